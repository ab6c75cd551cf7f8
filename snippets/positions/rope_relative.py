# RoPE turns q and k by their positions. The score sees only m - n.
import torch

from attn_ref import apply_rotary

torch.manual_seed(0)
d_k = 8
q, k = torch.randn(1, d_k), torch.randn(1, d_k)  # (T = 1, d_k) each


def score(m, n):
    q_m = apply_rotary(q, torch.tensor([m]))  # query at m
    k_n = apply_rotary(k, torch.tensor([n]))  # key at n
    return (q_m @ k_n.T).item()


scores = {}  # (m, n): the score of a query at m and a key at n
for m, n in [(3, 1), (13, 11), (1003, 1001), (1, 3)]:
    scores[m, n] = score(m, n)
    print(f"m = {m:4}, n = {n:4}: {scores[m, n]:.5f}")

q_far = apply_rotary(q, torch.tensor([1000]))
print("norm of q:          ", round(q.norm().item(), 5))
print("norm of q at 1000:  ", round(q_far.norm().item(), 5))

# Exercise: the lecture's model has n_embd = 384 and n_head = 6. What did scaling by C do?
import math

import torch

C, n_head = 384, 6
head_size = C // n_head  # 64
factor = math.sqrt(C / head_size)
print(f"divided by sqrt({C}) instead of sqrt({head_size}), the scores are {factor:.3f} times smaller")

torch.manual_seed(0)
T = 16
x = torch.randn(T, C)
W_Q, W_K = (torch.randn(C, head_size) / C**0.5 for _ in range(2))  # q and k with unit-variance parts
q, k = x @ W_Q, x @ W_K  # (T, head_size)
right = (q @ k.T / math.sqrt(head_size)).softmax(dim=-1)  # (T, T), no mask: every token sees all
buggy = (q @ k.T / math.sqrt(C)).softmax(dim=-1)
tempered = (q @ k.T / math.sqrt(head_size) / math.sqrt(n_head)).softmax(dim=-1)
print("buggy == right scores at temperature sqrt(n_head):", torch.allclose(buggy, tempered, atol=1e-6))


def entropy(w):  # in nats, averaged over the rows; a uniform row over T keys has log T
    return -(w * w.log()).sum(dim=-1).mean().item()


for name, w in (("right", right), ("buggy", buggy)):
    print(f"{name}: average largest weight {w.max(dim=-1).values.mean():.3f}, entropy {entropy(w):.3f} nats")
print(f"uniform over {T} keys: largest weight {1 / T:.3f}, entropy {math.log(T):.3f} nats")

# --8<-- [start:decode]
# A common mistake: decode with a KV cache and RoPE, every new query at 0.
import torch

from attn_ref import apply_rotary

torch.manual_seed(0)
T, d_k = 6, 8
Q, K = torch.randn(T, d_k), torch.randn(T, d_k)  # not yet rotated

# All at once: rotate by positions 0..T-1, keep the causal part.
full = apply_rotary(Q) @ apply_rotary(K).T  # (T, T)

# One token at a time: token t is rotated at position t, then cached.
cache, rows, forgot = [], [], []
for t in range(T):
    position = torch.tensor([t])
    cache.append(apply_rotary(K[t : t + 1], position))  # (1, d_k)
    keys = torch.cat(cache)  # (t + 1, d_k)
    q_t = apply_rotary(Q[t : t + 1], position)  # (1, d_k)
    rows.append((q_t @ keys.T)[0])
    q_0 = apply_rotary(Q[t : t + 1])  # bug: position 0 for every token
    forgot.append((q_0 @ keys.T)[0])

# --8<-- [end:decode]


# --8<-- [start:compare]
def largest_difference(rows):
    diffs = [row - full[t, : t + 1] for t, row in enumerate(rows)]
    return max(diff.abs().max().item() for diff in diffs)


right, wrong = largest_difference(rows), largest_difference(forgot)
print(f"with the offset, largest difference: {right:.1e}")
print(f"forgetting it, largest difference: {wrong:.2f}")
# --8<-- [end:compare]

# --8<-- [start:layouts]
# Two ways to pair features: equal up to a permutation, wrong mixed.
import torch

from attn_ref import apply_rotary

torch.manual_seed(0)
T, d_k = 5, 8
x = torch.randn(T, d_k)
perm = torch.tensor([0, 2, 4, 6, 1, 3, 5, 7])  # evens, then odds

paper = apply_rotary(x)  # pairs (0, 1), (2, 3), ...
neox = apply_rotary(x[:, perm], interleaved=False)  # pairs (i, i + 4)
same = torch.allclose(neox, paper[:, perm], atol=1e-6)
print("half-split of permuted x == permuted interleaved:", same)
# --8<-- [end:layouts]

# --8<-- [start:mixed]

# Projections trained with the paper's pairing, run with the other one.
C = 16
X = torch.randn(T, C)  # (T, C)
W_Q, W_K = torch.randn(C, d_k), torch.randn(C, d_k)  # (C, d_k) each


def weights(Q, K, interleaved):
    Q = apply_rotary(Q, interleaved=interleaved)
    K = apply_rotary(K, interleaved=interleaved)
    return (Q @ K.T / d_k**0.5).softmax(dim=-1)  # (T, T)


right = weights(X @ W_Q, X @ W_K, interleaved=True)
wrong = weights(X @ W_Q, X @ W_K, interleaved=False)
change = (right - wrong).abs().max().item()
print(f"largest change of a weight when mixed: {change:.2f}")

# The fix: permute the columns of W_Q and W_K once.
fixed = weights(X @ W_Q[:, perm], X @ W_K[:, perm], interleaved=False)
same = torch.allclose(fixed, right, atol=1e-6)
print("permuted W_Q, W_K with half-split:", same)
# --8<-- [end:mixed]

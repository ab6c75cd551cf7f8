# Exercise: shuffle the tokens under a causal mask, and the mask with them.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.masks import causal_mask

torch.manual_seed(0)
T, C = 5, 8
X = torch.randn(T, C)  # (T, C)
W_Q, W_K, W_V = (torch.randn(C, C) for _ in range(3))  # (C, C) each


def f(X, mask):
    """Self-attention under a mask: the (T, C) output."""
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, C) each
    return scaled_dot_product_attention(Q, K, V, attn_mask=mask)[0]


def close(a, b):
    return torch.allclose(a, b, atol=1e-5)


P = torch.eye(T)[[2, 0, 4, 1, 3]]  # (T, T): P @ X reorders the rows of X
M = causal_mask(T)  # (T, T): True on and below the diagonal
M_P = (P @ M.float() @ P.T).bool()  # (T, T): reordered like the tokens
out_c, out_c_p, out_moved = f(X, M), f(P @ X, M), f(P @ X, M_P)
print("f(P X, M) == P f(X, M):", close(out_c_p, P @ out_c))
print("f(P X, P M Pᵀ) == P f(X, M):", close(out_moved, P @ out_c))
print("P M Pᵀ:")
print(M_P.int())

# --8<-- [start:shuffle]
from functools import partial

import torch

from attn_ref import scaled_dot_product_attention

torch.manual_seed(0)
T, C = 5, 8
X = torch.randn(T, C)  # (T, C)
W_Q, W_K, W_V = (torch.randn(C, C) for _ in range(3))  # (C, C) each


def f(X, mask=None):
    """Self-attention: the (T, C) output and the (T, T) weights."""
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, C) each
    return scaled_dot_product_attention(Q, K, V, attn_mask=mask)


close = partial(torch.allclose, atol=1e-5)
P = torch.eye(T)[[2, 0, 4, 1, 3]]  # (T, T): P @ X reorders the rows of X
(out, A), (out_p, A_p) = f(X), f(P @ X)  # (T, C) outputs, (T, T) weights
print("f(P X) == P f(X), equivariant:", close(out_p, P @ out))
print("f(P X) == f(X), invariant:", close(out_p, out))
print("A(P X) == P A(X) P^T:", close(A_p, P @ A @ P.T))
print("mean over tokens unchanged:", close(out_p.mean(dim=0), out.mean(dim=0)))
# --8<-- [end:shuffle]

# --8<-- [start:fixed]
# A causal mask and positions stay where they are when the tokens move.
from attn_ref import sinusoidal_positional_encoding
from attn_ref.masks import causal_mask

# A causal mask: position i sees positions 0..i, whichever tokens sit there.
M = causal_mask(T)  # (T, T), True on and below the diagonal
out_c, out_c_p = f(X, M)[0], f(P @ X, M)[0]
print("causal, f(P X) == P f(X):", close(out_c_p, P @ out_c))
swap = torch.eye(T)[[1, 0, 2, 3, 4]]  # swaps the first two tokens
out_c_swap = f(swap @ X, M)[0]
print(
    "causal, first two swapped, last output unchanged:",
    close(out_c_swap[-1], out_c[-1]),
)

# Positions are added after shuffling, as in a model: position t gets pos[t].
pos = sinusoidal_positional_encoding(T, C)  # (T, C), the encoding PE
out_pe, out_pe_p = f(X + pos)[0], f(P @ X + pos)[0]
print(
    "with positions, f(P X + PE) == P f(X + PE):", close(out_pe_p, P @ out_pe)
)
print(f"largest difference: {(out_pe_p - P @ out_pe).abs().max():.2f}")
# --8<-- [end:fixed]

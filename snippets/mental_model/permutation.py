# Shuffle the tokens: the outputs are shuffled the same way, until positions.
import torch

from attn_ref import (
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
)

torch.manual_seed(0)
T, C = 5, 8
X = torch.randn(T, C)  # (T, C)
W_Q, W_K, W_V = (torch.randn(C, C) for _ in range(3))  # (C, C) each


def self_attention(X):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, C) each
    return scaled_dot_product_attention(Q, K, V)  # (T, C), (T, T)


perm = torch.tensor([2, 0, 4, 1, 3])
P = torch.eye(T)[perm]  # (T, T) permutation matrix: (P @ X)[i] = X[perm[i]]
out, A = self_attention(X)
out_p, A_p = self_attention(P @ X)
print("f(P X) == P f(X), equivariant:", torch.allclose(out_p, P @ out, atol=1e-5))
print("f(P X) == f(X), invariant:", torch.allclose(out_p, out, atol=1e-5))
print("A(P X) == P A(X) P^T:", torch.allclose(A_p, P @ A @ P.T, atol=1e-6))
mean, mean_p = out.mean(dim=0), out_p.mean(dim=0)  # (C,) each
print("mean over tokens unchanged:", torch.allclose(mean_p, mean, atol=1e-5))

# Positions are added after shuffling, as in a model: position i gets PE[i].
PE = sinusoidal_positional_encoding(T, C)  # (T, C)
out_pe, _ = self_attention(X + PE)
out_pe_p, _ = self_attention(P @ X + PE)
equivariant = torch.allclose(out_pe_p, P @ out_pe, atol=1e-5)
print("with positions, f(P X + PE) == P f(X + PE):", equivariant)
difference = (out_pe_p - P @ out_pe).abs().max().item()
print("largest difference:", round(difference, 4))

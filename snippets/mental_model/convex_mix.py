# Attention averages the values, with weights that depend on the input.
import torch

from attn_ref import scaled_dot_product_attention

torch.manual_seed(0)
T, C, d_k = 5, 8, 4
X = torch.randn(T, C)  # (T, C)
W_Q, W_K, W_V = (torch.randn(C, d_k) for _ in range(3))  # (C, d_k) each


def self_attention(X):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k) each
    return scaled_dot_product_attention(Q, K, V)  # (T, d_k), (T, T)


output, weights = self_attention(X)
V = X @ W_V  # (T, C) @ (C, d_k) -> (T, d_k): new, linear features
print("weights >= 0:", bool((weights >= 0).all()))
print("rows sum to one:", torch.allclose(weights.sum(dim=-1), torch.ones(T)))
print("output = weights @ V:", torch.allclose(output, weights @ V, atol=1e-6))
low, high = V.min(dim=0).values, V.max(dim=0).values  # (d_k,) each
inside = (output >= low - 1e-6) & (output <= high + 1e-6)  # (T, d_k)
print("every output feature within its range over V:", bool(inside.all()))

# The weights are computed from X too, so X -> output is not linear.
output_2x, _ = self_attention(2 * X)
difference = (output_2x - 2 * output).abs().max().item()
print("attention(2 X) == 2 attention(X):", torch.allclose(output_2x, 2 * output))
print("largest difference:", round(difference, 4))

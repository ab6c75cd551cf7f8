# Attention averages the values, with weights that depend on the input.
import torch

from attn_ref import scaled_dot_product_attention

torch.manual_seed(0)
T, C, d_k = 5, 8, 4
X = torch.randn(T, C)  # (T, C)
W_Q, W_K, W_V = (torch.randn(C, d_k) for _ in range(3))  # (C, d_k) each


def f(X):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k) each
    return scaled_dot_product_attention(Q, K, V)  # (T, d_k), (T, T)


output, A = f(X)
V = X @ W_V  # (T, d_k): new, linear features of X
low, high = V.min(dim=0).values, V.max(dim=0).values  # (d_k,) each
inside = (low <= output) & (output <= high)  # (T, d_k)
difference = (f(2 * X)[0] - 2 * output).abs().max().item()

print("output = A @ V:", torch.allclose(output, A @ V, atol=1e-6))
print("every output feature within its range over V:", bool(inside.all()))
print(f"largest difference, f(2 X) - 2 f(X): {difference:.2f}")

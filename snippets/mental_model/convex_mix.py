# Attention averages the values, with weights that depend on the input.
import torch

from attn_ref import scaled_dot_product_attention

torch.manual_seed(0)
T, C, d_k = 5, 8, 4
X = torch.randn(T, C)  # (T, C)
W_Q, W_K, W_V = (torch.randn(C, d_k) for _ in range(3))  # (C, d_k) each


def f(X):
    return scaled_dot_product_attention(
        X @ W_Q, X @ W_K, X @ W_V
    )  # (T, d_k), (T, T)


output, A = f(X)
V = X @ W_V  # (T, d_k): new, linear features of X
print(
    "weights >= 0, rows sum to one:",
    bool((A >= 0).all()),
    torch.allclose(A.sum(-1), torch.ones(T)),
)
print("output = A @ V:", torch.allclose(output, A @ V, atol=1e-6))
inside = (V.min(dim=0).values <= output) & (
    output <= V.max(dim=0).values
)  # (T, d_k)
print("every output feature within its range over V:", bool(inside.all()))
difference = (
    (f(2 * X)[0] - 2 * output).abs().max().item()
)  # the weights depend on X too
print(f"largest difference, f(2 X) - 2 f(X): {difference:.2f}")

# Exercise: attention with linear projections is linear for one token, not for two.
import torch

from attn_ref import scaled_dot_product_attention

generator = torch.Generator().manual_seed(0)
C = 4
W_Q, W_K, W_V = (
    torch.randn(C, C, generator=generator, dtype=torch.float64)
    for _ in range(3)
)


def F(X):
    """Self-attention with fixed projections, for X of shape (T, C)."""
    return scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V)[0]


# Two random inputs X and Y of T tokens, for one token and for two.
inputs = {
    T: [
        torch.randn(T, C, generator=generator, dtype=torch.float64)
        for _ in range(2)
    ]
    for T in (1, 2)
}
gaps = {}  # T: the largest entries of F(2X) - 2F(X) and of F(X+Y) - F(X) - F(Y)
for T, (X, Y) in inputs.items():
    scaling = (F(2 * X) - 2 * F(X)).abs().max().item()
    additivity = (F(X + Y) - F(X) - F(Y)).abs().max().item()
    gaps[T] = scaling, additivity
    print(
        f"T = {T}: |F(2X) - 2F(X)| = {scaling:.1e}, "
        f"|F(X+Y) - F(X) - F(Y)| = {additivity:.1e}"
    )

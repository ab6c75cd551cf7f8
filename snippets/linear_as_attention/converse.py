# Attention as a linear map whose matrix depends on X: f(X) = A(X) X, with Q = K = V = X.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS

X = torch.tensor(THREE_TOKENS, dtype=torch.float64)  # (3 tokens, 4 features)
generator = torch.Generator().manual_seed(0)
Y = torch.randn(3, 4, generator=generator, dtype=torch.float64)  # a second input


def f(X):
    """Self-attention with fixed (identity) projections: weights recomputed from X."""
    return scaled_dot_product_attention(X, X, X)[0]


A = scaled_dot_product_attention(X, X, X)[1]  # (3, 3), the weights for this X


def g(Z):
    """The same attention with its weights frozen at A(X): a linear map of Z."""
    return A @ Z  # (3, 3) @ (3, 4) -> (3, 4)


def gap(left, right):
    return f"{(left - right).abs().max().item():.1e}"


print("frozen A:     |g(2X) - 2 g(X)| =", gap(g(2 * X), 2 * g(X)))
print("              |g(X + Y) - g(X) - g(Y)| =", gap(g(X + Y), g(X) + g(Y)))
print("recomputed A: |f(2X) - 2 f(X)| =", gap(f(2 * X), 2 * f(X)))
print("              |f(X + Y) - f(X) - f(Y)| =", gap(f(X + Y), f(X) + f(Y)))

# Scaling the input down flattens the weights: f(tX) / t tends to the mean token.
mean_token = X.mean(dim=0).expand(3, 4)  # (4,) -> (3, 4): every token gets the mean
for t in (1.0, 0.1, 0.01, 0.001):
    print(f"t = {t:<6} |f(tX) / t - mean token| = {gap(f(t * X) / t, mean_token)}")

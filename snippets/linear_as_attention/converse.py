# --8<-- [start:nonlinear]
# Self-attention f(X) = A(X) X, with Q = K = V = X: A is recomputed from X,
# so f is not linear.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS

X = torch.tensor(THREE_TOKENS, dtype=torch.float64)  # (3 tokens, 4 features)
Y = torch.randn(
    3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64
)


def f(X):
    """Self-attention, identity projections: weights recomputed from X."""
    return scaled_dot_product_attention(X, X, X)[0]


def gap(left, right):
    return f"{(left - right).abs().max().item():.1e}"


print("|f(2X) - 2 f(X)| =", gap(f(2 * X), 2 * f(X)))
print("|f(X + Y) - f(X) - f(Y)| =", gap(f(X + Y), f(X) + f(Y)))
# --8<-- [end:nonlinear]

# --8<-- [start:scaling]
# Scaling the input down flattens the weights: f(lam X) / lam tends to the
# mean token.
mean_token = X.mean(dim=0).expand(
    3, 4
)  # (4,) -> (3, 4): every token gets the mean
scaled = {}  # lam: f(lam X) / lam
for lam in (1.0, 0.1, 0.01, 0.001):
    scaled[lam] = f(lam * X) / lam
    distance = gap(scaled[lam], mean_token)
    print(f"lam = {lam:<6} |f(lam X) / lam - mean token| = {distance}")
# --8<-- [end:scaling]

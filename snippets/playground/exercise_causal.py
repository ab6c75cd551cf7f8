# The playground's three tokens with a causal mask: token 0 sees only itself.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS

X = torch.tensor(THREE_TOKENS)[:, :2]  # (T, C) = (3, 2); Q = K = V = X
output, weights = scaled_dot_product_attention(X, X, X, is_causal=True)
print("causal weights (row = token, column = the token it sees):")
print(weights)
print("causal output:")
print(output)
_, full = scaled_dot_product_attention(X, X, X)
print("the last token's weights without the mask:", full[-1])

torch.manual_seed(0)
W_Q, W_K = (
    torch.randn(2, 2),
    torch.randn(2, 2),
)  # (C, d_k): other projections, picked at random
projected, projected_weights = scaled_dot_product_attention(
    X @ W_Q, X @ W_K, X, is_causal=True
)
print("random W_Q and W_K, token 0's weights:", projected_weights[0])
print("token 0's output:", projected[0], "and x_0:", X[0])

# The playground's three tokens: why token 0 splits its weight between
# tokens 0 and 2, and one change that ends the tie.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS

X = torch.tensor(THREE_TOKENS)[
    :, :2
]  # (T, C) = (3, 2): the first two features; Q = K = V = X
print("X:")
print(X)
dots = X[0] @ X.T  # (T,): token 0's dot product with each token
print("token 0's dot products with tokens 0, 1, 2:", dots)
_, weights = scaled_dot_product_attention(X, X, X)
print("token 0's weights:", weights[0])

X_new = X.clone()
X_new[0, 0] = 2.0  # token 0, feature 0: from 1 to 2
dots_new = X_new[0] @ X_new.T  # (T,)
print("after the change, dot products:", dots_new)
_, weights_new = scaled_dot_product_attention(X_new, X_new, X_new)
print("after the change, weights:", weights_new[0])

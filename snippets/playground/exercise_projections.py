# Projections can make the dot products asymmetric: Q K^T = X W_Q W_K^T X^T.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS

X = torch.tensor(THREE_TOKENS)[:, :2]  # (T, C) = (3, 2), as in the playground
dots_identity = X @ X.T  # (T, T): identity projections, Q = K = X
print("identity projections, Q K^T:")
print(dots_identity)
print("symmetric:", torch.equal(dots_identity, dots_identity.T))

W_Q = torch.eye(2)  # (C, d_k)
W_K = torch.eye(2)
W_K[0, 1] = (
    1.0  # row 0, column 1: each key adds the token's feature 0 to its feature 1
)
Q, K = X @ W_Q, X @ W_K  # (T, d_k)
dots = Q @ K.T  # (T, T)
print("W_K[0, 1] = 1, Q K^T:")
print(dots)
print("symmetric:", torch.equal(dots, dots.T))
_, weights = scaled_dot_product_attention(Q, K, X)
print("weights (row = query, column = key):")
print(weights)

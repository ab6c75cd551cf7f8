# Query, key and value projections, set by hand so that each role is visible.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import SENTENCE, SENTENCE_FEATURES

col = {
    name: i for i, name in enumerate(SENTENCE_FEATURES)
}  # feature name -> column
X = torch.tensor(SENTENCE)  # (T, C)
C = X.shape[-1]

# Plain dot products: tokens are compared on all their features.
_, plain = scaled_dot_product_attention(X, X, X)  # (T, T)
print(
    "plain weights of 'she' (Alice, met, Bob, she):", plain[3].numpy().round(3)
)

# What a token looks for (query), how it is found (key), what it passes on.
d_k, d_v = 2, 2
W_Q = torch.zeros(C, d_k)  # (C, d_k)
W_Q[col["pronoun"]] = torch.tensor([4.0, 4.0])  # wants: a name, female
W_K = torch.zeros(C, d_k)  # (C, d_k)
W_K[col["name"], 0] = 1.0  # key dimension 0: "I am a name"
W_K[col["female"], 1] = 1.0  # key dimension 1: "I am female"
W_V = torch.zeros(C, d_v)  # (C, d_v)
W_V[col["alice"], 0] = 1.0  # passed on: who the token is
W_V[col["bob"], 1] = 1.0

Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k), (T, d_k), (T, d_v)
scores = Q @ K.T  # (T, T)
print("scores Q K^T:")
print(scores.numpy())
output, weights = scaled_dot_product_attention(Q, K, V)  # (T, d_v), (T, T)
print(
    "projected weights of 'she' (Alice, met, Bob, she):",
    weights[3].numpy().round(3),
)
print("output of 'she' (alice, bob):", output[3].numpy().round(3))
print("key of 'met' (W_K ignores 'verb'):", K[1].numpy())

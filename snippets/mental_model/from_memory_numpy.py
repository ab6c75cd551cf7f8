# Self-attention from memory, in NumPy.
import numpy as np


def self_attention(X, W_Q, W_K, W_V):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k), (T, d_k), (T, d_v)
    scores = Q @ K.T / np.sqrt(K.shape[-1])  # (T, T)
    scores -= scores.max(axis=-1, keepdims=True)  # softmax is unchanged
    weights = np.exp(scores)  # and exp cannot overflow
    weights /= weights.sum(axis=-1, keepdims=True)  # (T, T), rows sum to one
    return weights @ V  # (T, d_v)


rng = np.random.default_rng(0)
T, C, d_k = 4, 6, 3
X = rng.standard_normal((T, C))  # (T, C)
W_Q, W_K, W_V = (rng.standard_normal((C, d_k)) for _ in range(3))
output = self_attention(X, W_Q, W_K, W_V)
print(output.round(4))

from attn_ref.numpy_ref import scaled_dot_product_attention

reference, _ = scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V)
print("same as attn_ref.numpy_ref:", np.allclose(output, reference))

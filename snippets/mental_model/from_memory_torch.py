# Self-attention from memory, in PyTorch.
import torch


def self_attention(X, W_Q, W_K, W_V):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k), (T, d_k), (T, d_v)
    scores = Q @ K.T / K.shape[-1] ** 0.5  # (T, T)
    weights = torch.softmax(scores, dim=-1)  # (T, T), rows sum to one
    return weights @ V  # (T, d_v)


torch.manual_seed(0)
T, C, d_k = 4, 6, 3
X = torch.randn(T, C)  # (T, C)
W_Q, W_K, W_V = (torch.randn(C, d_k) for _ in range(3))  # (C, d_k) each
output = self_attention(X, W_Q, W_K, W_V)
print(output)

Q, K, V = X @ W_Q, X @ W_K, X @ W_V
reference = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
print("same as PyTorch:", torch.allclose(output, reference, atol=1e-6))

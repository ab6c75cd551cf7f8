# One head of self-attention, with the shape of every step.
import torch

torch.manual_seed(0)
T, C, d_k, d_v = 5, 8, 4, 6
X = torch.randn(T, C)  # (T, C): one row per token
W_Q, W_K, W_V = torch.randn(C, d_k), torch.randn(C, d_k), torch.randn(C, d_v)

Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k), (T, d_k), (T, d_v)
scores = Q @ K.T / K.shape[-1] ** 0.5  # (T, d_k) @ (d_k, T) -> (T, T)
weights = torch.softmax(scores, dim=-1)  # (T, T), each row sums to one
output = weights @ V  # (T, T) @ (T, d_v) -> (T, d_v)
print("Q, K, V:", tuple(Q.shape), tuple(K.shape), tuple(V.shape))
print("scores, weights:", tuple(scores.shape), tuple(weights.shape))
print("output:", tuple(output.shape))
reference = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
print("same as PyTorch:", torch.allclose(output, reference, atol=1e-5))

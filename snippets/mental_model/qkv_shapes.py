# The shape of every matrix in one head of self-attention.
import torch

torch.manual_seed(0)
T, C, d_k, d_v = 5, 8, 4, 6
X = torch.randn(T, C)  # (T, C): one row per token
W_Q = torch.randn(C, d_k)  # (C, d_k)
W_K = torch.randn(C, d_k)  # (C, d_k)
W_V = torch.randn(C, d_v)  # (C, d_v)

Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k), (T, d_k), (T, d_v)
scores = Q @ K.T / K.shape[-1] ** 0.5  # (T, d_k) @ (d_k, T) -> (T, T)
weights = torch.softmax(scores, dim=-1)  # (T, T), each row sums to one
output = weights @ V  # (T, T) @ (T, d_v) -> (T, d_v)

shapes = {"X": X, "W_Q": W_Q, "W_K": W_K, "W_V": W_V, "Q": Q, "K": K, "V": V}
shapes |= {"Q K^T / sqrt(d_k)": scores, "weights": weights, "output": output}
for name, matrix in shapes.items():
    print(f"{name:>17}: {tuple(matrix.shape)}")
print("d_k, the width of queries and keys:", K.shape[-1])

reference = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
print("same as PyTorch:", torch.allclose(output, reference, atol=1e-5))

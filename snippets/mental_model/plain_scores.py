# What goes wrong when the score is the plain dot product x_i · x_j.
import torch

from attn_ref import softmax

torch.manual_seed(0)
T, C = 5, 8
X = torch.randn(T, C)  # (T, C): random token vectors
scores = X @ X.T  # (T, C) @ (C, T) -> (T, T): scores[i, j] = x_i · x_j
print("plain scores X X^T:")
print(scores.numpy().round(2))
A = softmax(scores / C**0.5)  # (T, T): the weights, one row per query
print(
    "scores symmetric:",
    torch.allclose(scores, scores.T),
    " weights symmetric:",
    torch.allclose(A, A.T),
)

# Cauchy-Schwarz: x_i · x_j <= |x_i| |x_j| < |x_i|^2 = x_i · x_i if |x_j| < |x_i|.
top, lengths = scores.argmax(dim=-1), X.norm(dim=-1)  # (T,) each
print(
    "each query's top key:",
    top.tolist(),
    " lengths:",
    lengths.numpy().round(2),
)
print(
    "each top key is the query or a longer vector:",
    all(lengths[top] >= lengths),
)

# A "loud" token: make token 2 longer without changing its direction.
others = [i for i in range(T) if i != 2 and scores[i, 2] > 0]
print("other queries with a positive score for token 2:", others)
loud = {}  # s -> (T, T): the weights with token 2 scaled by s
for s in (1.0, 2.0, 4.0):
    X_loud = X.clone()
    X_loud[2] *= s
    loud[s] = softmax(X_loud @ X_loud.T / C**0.5)  # (T, T)
    print(
        f"token 2 scaled by {s:g}, weight on it:",
        loud[s][:, 2].numpy().round(3),
    )

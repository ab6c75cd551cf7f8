# Learned positions: one vector per position, up to a maximum.
import torch

torch.manual_seed(0)
max_len, C = 8, 4
table = torch.nn.Embedding(
    max_len, C
)  # (max_len, C): one vector per position, learned in a real model
print("parameters:", table.weight.numel())

X = torch.randn(6, C)  # (T, C) token embeddings, T = 6
X_pos = X + table(torch.arange(6))  # rows 0..5 exist
print("T = 6:", tuple(X_pos.shape))
try:
    table(torch.arange(10))  # T = 10: rows 8 and 9 do not exist
except IndexError as error:
    print("T = 10: IndexError:", error)

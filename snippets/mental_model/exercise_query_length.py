# Exercise: she's query times s = 0, 1 and 10, against the same four keys.
import torch

tokens = ["Alice", "met", "Bob", "she"]
K = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
V = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
q = torch.tensor([4.0, 4.0])  # she's query
results = {}  # s -> (weights, output)
for s in (0, 1, 10):
    weights = torch.softmax(K @ (s * q) / 2**0.5, dim=-1)  # (T,)
    results[s] = (weights, weights @ V)
    print(f"s = {s:>2}: weights", weights.numpy().round(3))
    print("        output ", results[s][1].numpy().round(3))
print("mean of the values:", V.mean(dim=0).numpy().round(3))

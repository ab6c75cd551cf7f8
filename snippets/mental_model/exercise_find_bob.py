# Exercise: a query that makes she attend to Bob.
import torch

tokens = ["Alice", "met", "Bob", "she"]
K = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
V = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
q = torch.tensor([4.0, -4.0])  # a name, and NOT female
weights = torch.softmax(K @ q / 2**0.5, dim=-1)  # (T,)
print("scores: ", (K @ q / 2**0.5).numpy().round(2))
print("weights:", weights.numpy().round(3))
print("output (Alice, Bob):", (weights @ V).numpy().round(3))
print("attends most to:", tokens[weights.argmax()])

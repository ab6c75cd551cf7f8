# Exercise: add the same number to every score of she's query.
import torch

K = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
q = torch.tensor([4.0, 4.0])  # she's query
scores = K @ q / 2**0.5  # (T,)
shifted = {}  # c -> the weights of scores + c
for c in (0.0, 10.0, 100.0):
    shifted[c] = torch.softmax(scores + c, dim=-1)  # (T,)
    print(f"scores + {c:<5}: weights", shifted[c].numpy().round(3))
naive = torch.exp(scores + 100.0)  # e^100 is beyond float32's range
print("exp(scores + 100):", naive)

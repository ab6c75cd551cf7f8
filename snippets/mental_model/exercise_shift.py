# Exercise: add the same number to every score of the first picture's query.
import torch

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY

q = torch.tensor(LOOKUP_QUERY)  # (1, d_k)
K = torch.tensor(LOOKUP_KEYS)  # (S, d_k)
scores = q @ K.T / K.shape[-1] ** 0.5  # (1, S)
shifted = {}  # c -> the weights of scores + c
for c in (0.0, 10.0, 100.0):
    shifted[c] = torch.softmax(scores + c, dim=-1)  # (1, S)
    print(f"scores + {c:<6}: weights", shifted[c][0].numpy().round(3))
naive = torch.exp(scores + 100.0)  # e^100 is beyond float32's range
print("exp(scores + 100):", naive[0])

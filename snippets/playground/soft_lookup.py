# The playground's first state: one query, five keys, five values.
import math

import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES

q = torch.tensor(LOOKUP_QUERY)  # (L, d_k) = (1, 2)
K = torch.tensor(LOOKUP_KEYS)  # (S, d_k) = (5, 2)
V = torch.tensor(LOOKUP_VALUES)  # (S, d_v) = (5, 2)
tau = math.sqrt(K.shape[-1])  # the standard temperature, sqrt(d_k)

dots = q @ K.T  # (L, S)
print("q . k, one per key:")
print(dots)
scores = dots / tau  # (L, S)
print("scores (q . k) / tau:")
print(scores)
output, weights = scaled_dot_product_attention(q, K, V, scale=1 / tau)
print("weights:")
print(weights)
print("output = weights @ V:")
print(output)

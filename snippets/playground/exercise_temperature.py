# The playground's first query: the slider's left end, sqrt(d_k), its right end,
# and far beyond.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES

q = torch.tensor(LOOKUP_QUERY)  # (L, d_k) = (1, 2)
K = torch.tensor(LOOKUP_KEYS)  # (S, d_k) = (5, 2)
V = torch.tensor(LOOKUP_VALUES)  # (S, d_v) = (5, 2)
results = {}  # tau -> (output, weights)
for tau in (0.25, 2**0.5, 16.0, 1000.0):
    results[tau] = scaled_dot_product_attention(q, K, V, scale=1 / tau)
    output, weights = results[tau]
    print(f"tau = {tau:.2f}, weights:", weights[0])
    print(f"tau = {tau:.2f}, output:", output[0])
print("v0:", V[0])
print("mean of the values:", V.mean(dim=0))

# Masking key 0 at the playground's first query: the other weights grow, in proportion.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES

q = torch.tensor(LOOKUP_QUERY)  # (L, d_k) = (1, 2)
K = torch.tensor(LOOKUP_KEYS)  # (S, d_k) = (5, 2)
V = torch.tensor(LOOKUP_VALUES)  # (S, d_v) = (5, 2)
allowed = torch.tensor(
    [[False, True, True, True, True]]
)  # (L, S): key 0 masked

_, before = scaled_dot_product_attention(q, K, V)
_, after = scaled_dot_product_attention(q, K, V, attn_mask=allowed)
print("weights, every key:", before[0])
print("weights, key 0 masked:", after[0])
# The survivors share the weight key 0 had, each in proportion to its own weight.
renormalised = before[0, 1:] / (1 - before[0, 0])
print("other weights / (1 - weight of key 0):", renormalised)
print(
    "same as masking:", torch.allclose(after[0, 1:], renormalised, atol=1e-6)
)

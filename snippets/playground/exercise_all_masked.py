# Every key masked: a plain softmax has nothing to normalise.
import torch
import torch.nn.functional as F

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES

q = torch.tensor(LOOKUP_QUERY)  # (L, d_k) = (1, 2)
K = torch.tensor(LOOKUP_KEYS)  # (S, d_k) = (5, 2)
V = torch.tensor(LOOKUP_VALUES)  # (S, d_v) = (5, 2)
allowed = torch.zeros(1, 5, dtype=torch.bool)  # (L, S): no key allowed

scores = (q @ K.T).masked_fill(
    ~allowed, float("-inf")
)  # (L, S): every score -inf
plain = torch.softmax(scores, dim=-1)  # (L, S)
print("plain softmax:", plain[0])
output, weights = scaled_dot_product_attention(q, K, V, attn_mask=allowed)
print("attn_ref weights:", weights[0])
print("attn_ref output:", output[0])
reference = F.scaled_dot_product_attention(
    q, K, V, attn_mask=allowed
)  # (L, d_v)
print("PyTorch's output:", reference[0])

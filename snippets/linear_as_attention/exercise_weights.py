# Exercise: the construction's weights for x = (3, -1, 0, 2), and the masked key.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.linear_as_attention import linear_as_attention

x = torch.tensor([[3.0, -1.0, 0.0, 2.0]], dtype=torch.float64)  # (B=1, d_in=4)
W = torch.eye(
    4, dtype=torch.float64
)  # any weight: the weights of attention depend on x only
q, k, v, mask = linear_as_attention(
    x, W, generator=torch.Generator().manual_seed(0)
)
_, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
print("weights:", [round(w, 6) for w in weights[0, 0].tolist()])
print("masked keys:", (~mask[0, 0]).nonzero().flatten().tolist())

# What True means in a boolean mask: this site's and PyTorch's functions
# say "may attend"; nn.MultiheadAttention's attn_mask says "blocked".
# --8<-- [start:setup]
import torch
import torch.nn.functional as F
from torch import nn

from attn_ref import scaled_dot_product_attention
from attn_ref.masks import causal_mask

torch.manual_seed(0)
torch.set_printoptions(precision=2)
B, T, C, H = 1, 4, 8, 2
mask = causal_mask(T)  # (T, T), this site's: True where a query may see a key
# --8<-- [end:setup]
# --8<-- [start:compare]
q, k, v = torch.randn(3, B, H, T, C // H)  # (B, H, T, d_k) each
ours, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
print("F.scaled_dot_product_attention, same mask:", torch.allclose(ours, sdpa))

mha = nn.MultiheadAttention(C, H, batch_first=True)
x = torch.randn(B, T, C)
with torch.no_grad():
    _, as_is = mha(x, x, x, attn_mask=mask)  # True read as "blocked"
    _, inverted = mha(x, x, x, attn_mask=~mask)
print("nn.MultiheadAttention, the same mask: weights", as_is[0], sep="\n")
print("with ~mask: weights", inverted[0], sep="\n")
# --8<-- [end:compare]

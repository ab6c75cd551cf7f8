# How small can d_k be, for the weights |x| / sum|x|? A fixed key: d_in - 1.
import torch
import torch.nn.functional as F

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE
from attn_ref.linear_as_attention import linear_as_attention

generator = torch.Generator().manual_seed(LINEAR_SEED)
B, d_in, d_out = LINEAR_SHAPE
x = torch.randn(B, d_in, generator=generator, dtype=torch.float64)
W = torch.randn(d_out, d_in, generator=generator, dtype=torch.float64)
y_exact = x @ W.T  # (B, d_out)

# d_k = d_in - 1: a fixed key with columns orthogonal to (1, ..., 1) works.
q, k, v, mask = linear_as_attention(x, W, d_k=d_in - 1, generator=generator)
y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[:, 0]
error = (y - y_exact).abs().max().item()
print(f"d_k = {d_in - 1}: k {tuple(k.shape)}, max |y - x W^T| = {error:.1e}")

# d_k = d_in - 2: refused, q k^T + c misses the logits of almost every x.
try:
    linear_as_attention(x, W, d_k=d_in - 2)
except ValueError as message:
    print(f"d_k = {d_in - 2}: ValueError: {message}")

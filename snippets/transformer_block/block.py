# One pre-norm block, line by line: read through a norm, write by adding.
import torch

from attn_ref import DecoderBlock
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C, H = 1, 5, 16, 4  # one sequence of 5 tokens, width 16, 4 heads
block = DecoderBlock(embed_dim=C, num_heads=H)
x = torch.randn(B, T, C)  # the residual stream as it enters the block
mask = causal_mask(T)  # (T, T): True where a query may see a key

with torch.no_grad():
    h = block.norm1(x)  # (B, T, C): what attention reads
    a, _ = block.attn(h, h, h, attn_mask=mask)  # (B, T, C): what it writes
    x_mid = x + a  # the stream after attention
    h_mid = block.norm2(x_mid)  # (B, T, C): what the MLP reads
    m = block.mlp(h_mid)  # (B, T, C): what the MLP writes
    out = x_mid + m  # the stream after the block
    same = torch.allclose(out, block(x, mask), atol=1e-6)
print("stream in:", tuple(x.shape), " attention writes:", tuple(a.shape))
print("MLP writes:", tuple(m.shape), " stream out:", tuple(out.shape))
print("block(x) computes these lines:", same)
# The length of each token's vector, in the stream and in each write:
sizes = {"|x|": x, "|a|": a, "|m|": m, "|out|": out}
for name, tensor in sizes.items():
    print(f"{name:6}", tensor[0].norm(dim=-1).numpy().round(2))

# Forgetting the residual: x = attention(LN(x)) replaces the stream.
# --8<-- [start:compute]
import torch
import torch.nn.functional as F

from attn_ref import DecoderBlock
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C = 1, 5, 16
block = DecoderBlock(embed_dim=C, num_heads=4)
x = torch.randn(B, T, C)  # the stream entering the block
with torch.no_grad():
    h = block.norm1(x)
    a, _ = block.attn(h, h, h, attn_mask=causal_mask(T))  # (B, T, C)
kept = F.cosine_similarity(x + a, x, dim=-1)[0]  # (T,): x = x + a
replaced = F.cosine_similarity(a, x, dim=-1)[0]  # (T,): x = a, no residual
# --8<-- [end:compute]
# --8<-- [start:report]
print("each token after attention, cosine with itself before:")
print("  x + a:", kept.numpy().round(2))
print("  a:    ", replaced.numpy().round(2))
# --8<-- [end:report]

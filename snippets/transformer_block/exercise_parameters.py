# A block of GPT-2 small's size: C = 768, 12 heads. Count its parameters.
import torch

from attn_ref import DecoderBlock

C = 768
with torch.device("meta"):  # shapes only: nothing is allocated or drawn
    block = DecoderBlock(embed_dim=C, num_heads=12)
counted = sum(p.numel() for p in block.parameters())
in_mlp = sum(p.numel() for p in block.mlp.parameters())
formula = 12 * C**2 + 13 * C
print(f"counted: {counted:,}   by formula 12 C^2 + 13 C: {formula:,}")
print(f"in the MLP: {in_mlp:,}, a share of {in_mlp / counted:.3f}")
print(f"12 such blocks: {12 * counted:,}")

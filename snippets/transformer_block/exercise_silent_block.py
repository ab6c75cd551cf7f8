# A block whose two output layers are zero writes nothing: x passes through.
import torch

from attn_ref import DecoderBlock
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C, H = 1, 5, 16, 4
block = DecoderBlock(embed_dim=C, num_heads=H)
with torch.no_grad():
    # W_O, and the MLP's last layer: each writes into the stream
    for last in (block.attn.out_proj, block.mlp[2]):
        last.weight.zero_()
        last.bias.zero_()
x = torch.randn(B, T, C)
mask = causal_mask(T)
with torch.no_grad():
    out = block(x, mask)
    deep = x
    for _ in range(6):  # six such blocks in a row
        deep = block(deep, mask)
print("one silent block: out equals x exactly:", torch.equal(out, x))
print("six in a row: out equals x exactly:", torch.equal(deep, x))

# One token through the block's second branch, drawn from its own numbers:
# the norm, the MLP's widening to 4C features, the GELU, the way back to C.
import torch

from attn_ref import DecoderBlock
from attn_ref.diagrams import arrow, canvas, grid, note

torch.manual_seed(0)
C, H = 16, 4
block = DecoderBlock(embed_dim=C, num_heads=H)
x = 2 * torch.randn(C) + 2  # one token of a stream that has drifted
with torch.no_grad():
    normed = block.norm2(x)  # (C,)
    wide = block.mlp[0](normed)  # (4C,)
    bent = block.mlp[1](wide)  # (4C,): the GELU
    write = block.mlp[2](bent)  # (C,): what the MLP adds to the stream

norm, (linear1, gelu, linear2) = block.norm2, block.mlp
spread = f"mean {x.mean():.1f}, spread {x.std(unbiased=False):.1f}"
# Each row has its own colour scale, but the GELU's output has its input's:
# the cells it pushes towards 0 turn pale.
wide_scale = wide.abs().max().item()
steps = [  # (values, the step that made them, colour scale)
    (normed, f"{type(norm).__name__}: mean 0, spread 1", None),
    (wide, f"Linear {C}→{linear1.out_features}: rows of C", wide_scale),
    (bent, f"{type(gelu).__name__}: below 0, near 0", wide_scale),
    (write, f"Linear {linear2.in_features}→{C}: back to C", None),
]

fig, ax = canvas(9.0, 9.4, scale=0.32)
cell, left, gap = 0.5, 0.5, 0.6  # a feature's cell; the rows' left edge
note(ax, left, 0.35, f"x, one token of the stream: {spread}", ha="left")
top = grid(ax, x, left, 0.7, cell=cell).y + cell
for values, step, scale in steps:
    arrow(ax, (1.5, top), (1.5, top + gap))  # from the row above
    note(ax, 1.8, top + gap / 2, step, ha="left", fontsize=10)
    rows = values.reshape(-1, C)  # 4C features drawn as 4 rows of C
    box = grid(ax, rows, left, top + gap, cell=cell, vmax=scale)
    top = box.y + box.height
note(ax, left, top + 0.4, "m, added to the stream", ha="left")

# Which outputs move when one token changes? Attention moves information
# between positions; the MLP does not.
# --8<-- [start:tables]
import torch

from attn_ref import DecoderBlock
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C, H = 1, 5, 16, 4
block = DecoderBlock(embed_dim=C, num_heads=H)
x = torch.randn(B, T, C)
mask = causal_mask(T)


def attention_write(s):
    h = block.norm1(s)
    return block.attn(h, h, h, attn_mask=mask)[0]


parts = {
    "MLP": lambda s: block.mlp(block.norm2(s)),
    "attention": attention_write,
    "block": lambda s: block(s, mask),
}
moved = {name: torch.zeros(T, T, dtype=torch.int64) for name in parts}
replaced = {}  # j: the stream with token j replaced by new random numbers
with torch.no_grad():
    for j in range(T):
        replaced[j] = x.clone()
        replaced[j][:, j] = torch.randn(C)
        for name, f in parts.items():
            # (T,): which outputs moved when token j changed
            moved[name][j] = (f(replaced[j]) != f(x)).any(dim=-1)[0].long()
# --8<-- [end:tables]

# --8<-- [start:picture]
from attn_ref.diagrams import canvas, grid, note

fig, ax = canvas(10.0, 4.8, scale=0.43)
for n, (name, table) in enumerate(moved.items()):
    left = 0.7 + 3.2 * n
    # A coloured cell: that output moved; a hatched one: it did not.
    grid(
        ax, table, left, 1.0, mask=table.bool(), cell=0.56, vmax=1, label=name
    )
    note(ax, left + 1.4, 4.3, "output →", fontsize=10)
note(ax, 0.3, 2.4, "changed token ↓", rotation=90, fontsize=10)
# --8<-- [end:picture]

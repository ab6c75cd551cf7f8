# One pre-norm block, line by line: read through a norm, write by adding.
# --8<-- [start:setup]
import torch

from attn_ref import DecoderBlock
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C, H = 1, 5, 16, 4  # one sequence of 5 tokens, width 16, 4 heads
block = DecoderBlock(embed_dim=C, num_heads=H)
x = torch.randn(B, T, C)  # the residual stream as it enters the block
mask = causal_mask(T)  # (T, T): True where a query may see a key
# --8<-- [end:setup]

# --8<-- [start:lines]
# Continues the folded setup above: block, x and mask.
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
# --8<-- [end:lines]

# --8<-- [start:picture]
from attn_ref.diagrams import arrow, canvas, grid

# Every grid on one colour scale, so that sizes compare across the picture.
shown = {"x": x, "h": h, "a": a, "x_mid": x_mid, "h_mid": h_mid, "m": m}
top = max(t.abs().max().item() for t in (*shown.values(), out))
scale = {"cell": 0.28, "vmax": top}
fig, ax = canvas(10.4, 9.6, scale=0.37)
stream_x, branch_x = 0.2, 5.7  # left: the stream; right: what the parts do
pieces = [  # (tensor, column, row, label)
    (x, stream_x, 0, "$x$, the stream"),
    (h, branch_x, 0, r"$\mathrm{LN}_1(x)$"),
    (a, branch_x, 1, "$a$, attention's write"),
    (x_mid, stream_x, 1, "$x + a$"),
    (h_mid, branch_x, 2, r"$\mathrm{LN}_2(x + a)$"),
    (m, branch_x, 3, "$m$, the MLP's write"),
    (out, stream_x, 3, "$x + a + m$"),
]
boxes = [
    grid(ax, t[0], left, 0.8 + 2.4 * row, label=label, **scale)
    for t, left, row, label in pieces
]
arrow(ax, boxes[0].right, boxes[1].left, "read")
arrow(ax, boxes[1].bottom, (boxes[2].top[0], boxes[2].y - 0.65), None)
arrow(ax, boxes[2].left, boxes[3].right, "add")
arrow(ax, boxes[3].bottom, (boxes[3].bottom[0], boxes[6].y - 0.65), None)
arrow(ax, boxes[3].right, (boxes[4].x, boxes[4].y + 0.5), "read", bend=-0.2)
arrow(ax, boxes[4].bottom, (boxes[5].top[0], boxes[5].y - 0.65), None)
arrow(ax, boxes[5].left, boxes[6].right, "add")
# --8<-- [end:picture]

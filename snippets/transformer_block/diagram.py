# A picture of one block, drawn from the block's own modules.
import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyBboxPatch

from attn_ref import DecoderBlock

C, H = 16, 4
block = DecoderBlock(embed_dim=C, num_heads=H)


def describe(module):
    """A box's text: the module's class, and the widths of a linear layer."""
    if hasattr(module, "in_features"):
        return f"Linear {module.in_features}→{module.out_features}"
    return type(module).__name__


# The two branches, in the order forward() runs them: a norm, a sublayer.
mlp = [describe(m) for m in block.mlp]
branches = [
    (
        describe(block.norm1),
        f"{describe(block.attn)}\n{H} heads, causal mask,\n"
        "heads mixed by $W_O$",
    ),
    (
        describe(block.norm2),
        f"MLP, each token alone\n{mlp[0]}, {mlp[1]},\n{mlp[2]}",
    ),
]

# Narrow, so that its text stays legible on a phone.
fig, ax = plt.subplots(figsize=(3.6, 3.8), layout="constrained")
ax.set_xlim(0, 10)
ax.axis("off")
# The stream runs down the left; the sublayers sit on the right.
stream_x, box_x, box_w = 1.2, 3.0, 6.8
middle = box_x + box_w / 2
arrow = {
    "arrowstyle": "-|>",
    "color": "black",
    "lw": 1.2,
    "mutation_scale": 12,
}
small = {"ha": "center", "va": "bottom", "fontsize": 9}


def box(top, text, colour):
    """A box of text, its top edge at height top; returns its bottom edge."""
    height = 0.35 + 0.5 * (text.count("\n") + 1)
    corner = (box_x, top - height)
    style = {"boxstyle": "round,pad=0.1", "fc": colour, "ec": "black"}
    ax.add_patch(FancyBboxPatch(corner, box_w, height, **style))
    centre = (middle, top - height / 2)
    ax.text(*centre, text, ha="center", va="center", fontsize=9.5)
    return top - height


ax.text(stream_x, 13.2, "x, the residual stream", fontsize=10, va="center")
top = 12.4
colours = ["#cfe0f5", "#f8dcc0"]  # attention, MLP
for (norm_text, sublayer_text), colour in zip(branches, colours, strict=True):
    read_y = top - 0.55
    ax.annotate("", (box_x, read_y), (stream_x, read_y), arrowprops=arrow)
    ax.text((stream_x + box_x) / 2, read_y + 0.15, "read", **small)
    bottom = box(top, norm_text, "#e8e8e8")
    ax.annotate(
        "", (middle, bottom - 0.35), (middle, bottom), arrowprops=arrow
    )
    bottom = box(bottom - 0.35, sublayer_text, colour)
    plus_y = bottom - 0.65
    ax.plot([middle, middle], [bottom, plus_y], color="black", lw=1.2)
    add_to = (stream_x + 0.45, plus_y)  # the arrow stops at the circle's edge
    ax.annotate("", add_to, (middle, plus_y), arrowprops=arrow)
    ax.text((stream_x + box_x) / 2, plus_y + 0.15, "add", **small)
    plus = Circle((stream_x, plus_y), 0.45, fc="white", ec="black", zorder=2)
    ax.add_patch(plus)
    sign = {"ha": "center", "va": "center", "fontsize": 14, "zorder": 3}
    ax.text(stream_x, plus_y, "+", **sign)
    top = plus_y - 0.5
end = top - 0.2  # the stream goes on, below the last addition
stream = {**arrow, "lw": 2.5}
ax.annotate("", (stream_x, end), (stream_x, 12.8), arrowprops=stream, zorder=0)
ax.text(stream_x + 0.5, end, "to the next block", va="center", fontsize=10)
ax.set_ylim(end - 0.5, 13.6)

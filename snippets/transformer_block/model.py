# The whole model, drawn from a TinyDecoder's own modules: embeddings, a
# stack of blocks on the residual stream, a final norm and the output head.
from matplotlib.patches import FancyBboxPatch

from attn_ref import TinyDecoder
from attn_ref.diagrams import arrow, canvas, note

model = TinyDecoder(
    vocab_size=50, context_length=16, embed_dim=16, num_layers=2, num_heads=4
)
vocab, C = model.token_embedding.num_embeddings, model.head.in_features
words = ["Alice", "met", "Bob", "she"]

fig, ax = canvas(10.4, 11.6, scale=0.36)


def box(y, text, colour="#e8e8e8", x=5.6, width=7.2, height=1.1):
    """A box of text centred on (x, y); returns its top and bottom edges."""
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.05",
            fc=colour,
            ec="black",
        )
    )
    note(ax, x, y, text, fontsize=9.5)
    return y - height / 2, y + height / 2


for j, word in enumerate(words):  # the tokens, left to right
    box(0.8, word, "#cfe0f5", x=2.6 + 2.0 * j, width=1.7, height=0.8)
_, bottom = box(
    2.6,
    "token embedding: a row per word\n"
    "+ position embedding: a row per position",
    width=8.6,
)
arrow(ax, (5.6, 1.25), (5.6, 2.0))
stream_x = 0.9  # the residual stream runs down the left edge
ax.plot([stream_x, stream_x], [bottom + 0.3, 8.1], color="black", lw=3)
arrow(ax, (1.7, bottom), (stream_x + 0.1, bottom + 0.35))
note(ax, stream_x - 0.35, 5.4, "residual stream", rotation=90, fontsize=10)
for y, name in ((4.3, "block 1"), (6.9, "block N")):
    top, end = box(
        y,
        f"{name}: attention, then MLP,\neach read and added to the stream",
        "#f8dcc0",
    )
    arrow(ax, (stream_x, top + 0.3), (2.0, top + 0.3))  # read
    arrow(ax, (2.0, end - 0.3), (stream_x, end - 0.3))  # add
note(ax, 5.6, 5.6, "⋮", fontsize=16)
_, end = box(8.6, f"final {type(model.norm).__name__}", height=0.9)
arrow(ax, (stream_x, 8.1), (2.0, 8.6))
_, end = box(
    10.0,
    f"{type(model.head).__name__} {C} → {vocab}: a score\n"
    "for every word of the vocabulary",
    "#cfe0f5",
)
arrow(ax, (5.6, 9.05), (5.6, 9.4))
note(
    ax,
    5.6,
    11.1,
    "at each position: scores for the next token\n"
    "(after she: the word that comes next)",
    fontsize=10,
)

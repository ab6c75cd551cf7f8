# --8<-- [start:check]
# Attention sees a set: swap Alice and Bob, and met's output stays the same.
import torch

from attn_ref import (
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
)
from attn_ref.examples import (
    SENTENCE,
    SENTENCE_W_K,
    SENTENCE_W_Q,
    SENTENCE_W_V,
)

W_Q, W_K, W_V = (
    torch.tensor(W) for W in (SENTENCE_W_Q, SENTENCE_W_K, SENTENCE_W_V)
)


def attend(X):  # (T, C) -> output (T, d_v), weights (T, T)
    return scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V)


met_bob = torch.tensor(SENTENCE[:3])  # (3, C): Alice met Bob
bob_met = met_bob[[2, 1, 0]]  # Bob met Alice: the same rows, reordered
(out, w), (out_swapped, w_swapped) = attend(met_bob), attend(bob_met)
print("met's output, Alice met Bob:", out[1].numpy().round(3))
print("met's output, Bob met Alice:", out_swapped[1].numpy().round(3))
print(
    "outputs reordered like the tokens:",
    torch.equal(out_swapped, out[[2, 1, 0]]),
)
# A vector for each position, added to the token that sits there.
P = sinusoidal_positional_encoding(3, met_bob.shape[-1])  # (T, C)
placed, placed_swapped = attend(met_bob + P)[0], attend(bob_met + P)[0]
print(
    "with positions, met's outputs differ:",
    not torch.allclose(placed[1], placed_swapped[1]),
)
# --8<-- [end:check]

# --8<-- [start:picture]
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.examples import SENTENCE_TOKENS

fig, ax = canvas(10.6, 9.9, scale=0.42)
orders = [
    (["Alice", "met", "Bob"], w[1], out[1]),
    (["Bob", "met", "Alice"], w_swapped[1], out_swapped[1]),
]
for row, (words, weights, output) in enumerate(orders):
    top = 1.3 + 2.4 * row
    note(ax, 0.2, top + 0.5, " ".join(words), ha="left", fontsize=12)
    box = grid(
        ax,
        weights,
        4.4,
        top,
        cmap="viridis",
        decimals=2,
        column_names=words,
        label="met's weights" if row == 0 else None,
    )
    arrow(ax, box.right, (8.0, top + 0.5))
    grid(
        ax,
        output,
        8.1,
        top,
        decimals=2,
        vmax=1.0,
        column_names=["Alice", "Bob"],
        label="met's output" if row == 0 else None,
    )
note(ax, 5.3, 5.7, "the same: who met whom is lost", fontsize=11)
pe = sinusoidal_positional_encoding(3, 6)  # (T, C)
alice = torch.tensor(SENTENCE[SENTENCE_TOKENS.index("Alice")])  # (C,)
for row, position in enumerate((0, 2)):
    top = 7.5 + 1.3 * row
    note(ax, 0.2, top + 0.4, f"Alice + p{position}", ha="left", fontsize=12)
    grid(ax, alice + pe[position], 3.2, top, cell=0.8, decimals=1, vmax=2.0)
note(
    ax,
    5.6,
    6.95,
    "a vector for each position, added to its token",
    fontsize=11,
)
# --8<-- [end:picture]

# The opening picture: to read "she", the model needs "Alice". The arrows are
# she's weights, computed by the head this page builds (attn_ref.examples).
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from attn_ref import scaled_dot_product_attention
from attn_ref.diagrams import canvas, note
from attn_ref.examples import (
    SENTENCE,
    SENTENCE_TOKENS,
    SENTENCE_W_K,
    SENTENCE_W_Q,
    SENTENCE_W_V,
)

X = torch.tensor(SENTENCE)  # (T, C): Alice, met, Bob, she
Q, K, V = (
    X @ torch.tensor(W) for W in (SENTENCE_W_Q, SENTENCE_W_K, SENTENCE_W_V)
)
_, weights = scaled_dot_product_attention(Q, K, V)  # (T, T)
she = SENTENCE_TOKENS.index("she")
to = weights[she]  # (T,): how much "she" takes from each token

fig, ax = canvas(10.0, 4.3, scale=0.42)
centres = [1.3 + 2.5 * j for j in range(len(SENTENCE_TOKENS))]
for j, (token, x) in enumerate(zip(SENTENCE_TOKENS, centres, strict=True)):
    colour = "#f8dcc0" if j == she else "#cfe0f5"
    ax.add_patch(
        FancyBboxPatch(
            (x - 1.0, 2.5),
            2.0,
            1.0,
            boxstyle="round,pad=0.05",
            fc=colour,
            ec="black",
        )
    )
    note(ax, x, 3.0, token, fontsize=13)
for j, x in enumerate(centres[:she]):  # she's arrows to the tokens before it
    ax.add_patch(
        FancyArrowPatch(
            (centres[she] - 0.3, 2.45),
            (x + 0.3, 2.45),
            connectionstyle="arc3,rad=0.35",
            arrowstyle="-|>",
            mutation_scale=10 + 8 * float(to[j]),
            lw=0.8 + 5 * float(to[j]),
            color="black",
        )
    )
    note(ax, x - 0.35, 2.1, f"{to[j]:.2f}", fontsize=11)  # by the arrow's head
note(ax, centres[she], 4.0, f"and {to[she]:.2f} to itself", fontsize=10)

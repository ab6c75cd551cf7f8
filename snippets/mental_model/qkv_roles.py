# --8<-- [start:roles]
# Query, key and value projections, set by hand so that each role is visible.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import SENTENCE, SENTENCE_FEATURES

X = torch.tensor(SENTENCE)  # (T, C): Alice, met, Bob, she
col = {name: i for i, name in enumerate(SENTENCE_FEATURES)}  # name -> column
C, d_k = X.shape[-1], 2
W_Q, W_K, W_V = torch.zeros(C, d_k), torch.zeros(C, d_k), torch.zeros(C, d_k)
W_Q[col["pronoun"]] = 4.0  # a pronoun looks for a name that is female
W_K[col["name"], 0] = W_K[col["female"], 1] = 1.0  # found as: name, female
W_V[col["alice"], 0] = W_V[col["bob"], 1] = 1.0  # passes on: who it is

_, plain = scaled_dot_product_attention(X, X, X)  # (T, T): no projections
Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k) each
output, weights = scaled_dot_product_attention(Q, K, V)  # (T, d_k), (T, T)
print("output of 'she' (alice, bob):", output[3].numpy().round(3))
symmetric = [torch.equal(S, S.T) for S in (X @ X.T, plain, Q @ K.T)]
print("symmetric: X Xᵀ, its weights, Q Kᵀ:", *symmetric)
# --8<-- [end:roles]

# --8<-- [start:picture]
from matplotlib.patches import Rectangle

from attn_ref.diagrams import canvas, grid, note
from attn_ref.examples import SENTENCE_TOKENS

T = len(SENTENCE_TOKENS)
fig, ax = canvas(10.6, 7.6, scale=0.42)
panels = [
    (plain, 1.6, f"no projections\nsoftmax(X Xᵀ/√{C})"),
    (weights, 6.4, f"projected\nsoftmax(Q Kᵀ/√{d_k})"),
]
for matrix, left, title in panels:
    grid(ax, matrix, left, 2.5, cmap="viridis", decimals=2)
    note(ax, left + T / 2, 0.8, title)
    for j, token in enumerate(SENTENCE_TOKENS):
        note(ax, left + j + 0.5, 2.15, token, fontsize=10)
    # the row of 'she', the pronoun whose query is not zero
    she = Rectangle((left, 2.5 + 3), T, 1, fill=False, lw=2.5, color="black")
    ax.add_patch(she)
for i, token in enumerate(SENTENCE_TOKENS):
    note(ax, 1.45, 2.5 + i + 0.5, token, ha="right")
note(ax, 6.0, 7.1, "a row per query, a column per key")
# --8<-- [end:picture]

# %% [markdown]
# # From nn.Linear to self-attention
#
# [Page 1](../concepts/mental_model.md) gave each token of *Alice met Bob she* a query, a key
# and a value. In a model they are computed from the token itself, by three linear layers:
# $Q = X W_Q$, $K = X W_K$, $V = X W_V$. Those three projections and the attention they feed
# make one **head** ([page 4](scaled_dot_product_step_by_step.md) runs several side by side).
# This page builds that head from `nn.Linear`, step by step, and checks it against PyTorch's own
# attention. It assumes page 1, matrix products and
# a little PyTorch. Symbols follow the [notation](../notation.md): a token is a row vector. The
# cells run in order, as one notebook.
#
# The picture is the first step. Each token arrives as a row of $X$: six features, set by hand
# for this example (*is it a name, a verb, a pronoun, female, Alice, Bob?*). Each matrix,
# drawn here transposed, one row per output feature, picks out what one role needs: $W_Q$
# turns *verb* and *pronoun* into questions, $W_K$ keeps *name* and *female*, $W_V$ keeps who
# the token is. Each entry of $Q$, $K$ or $V$ is a row of $X$ dotted with a row of a matrix:
# the framed ones give *she*'s first query feature.

# %% tags=["plot"]
import torch

from attn_ref.diagrams import Box, canvas, grid, note, outline
from attn_ref.examples import (
    SENTENCE,
    SENTENCE_TOKENS,
    SENTENCE_W_K,
    SENTENCE_W_Q,
    SENTENCE_W_V,
)
from attn_ref.plotting import figure_to_svg

tokens = SENTENCE_TOKENS
short = ["name", "verb", "pron.", "fem.", "alice", "bob"]  # SENTENCE_FEATURES
X_drawn = torch.tensor(SENTENCE)  # (T, C) = (4, 6)
matrices = [
    torch.tensor(W) for W in (SENTENCE_W_Q, SENTENCE_W_K, SENTENCE_W_V)
]
outputs = [["name?", "fem.?"], ["name", "fem."], ["Alice", "Bob"]]
fig, ax = canvas(9.4, 18.6, scale=0.38)
grid(ax, X_drawn, 2.2, 1.4, decimals=0, row_names=tokens, column_names=short)
note(ax, 5.2, 0.3, "X: a row of features per token")
for n, (name, W) in enumerate(zip("QKV", matrices, strict=True)):
    top = 6.2 + 2.6 * n  # W transposed: a row per output, a column per feature
    grid(ax, W.T, 2.2, top, decimals=0, vmax=4.0, row_names=outputs[n])
    note(ax, 8.4, top + 1, f"W_{name}ᵀ", ha="left", fontsize=12)
    left = 2.2 + 2.4 * n
    grid(ax, X_drawn @ W, left, 14.4, decimals=0, vmax=4.0, label=name)
for i, token in enumerate(tokens):
    note(ax, 2.05, 14.4 + i + 0.5, token, ha="right")
outline(ax, Box(2.2, 1.4 + 3, 6, 1))  # she's row of X,
outline(ax, Box(2.2, 6.2, 6, 1))  # row 0 of W_Q transposed,
outline(ax, Box(2.2, 14.4 + 3, 1, 1))  # and their dot product
figure_to_svg(
    fig,
    alt="The four tokens X, a 4 by 6 grid of features (name, verb, pronoun, "
    "female, alice, bob). Under it, the matrices W_Q, W_K and W_V, each drawn "
    "transposed as two rows over the same six features, and at the bottom "
    "the 4 by 2 matrices Q, K and V. Framed: she's row of X, the first row of "
    "W_Q transposed, and their dot product, she's first query entry, "
    f"{(X_drawn @ matrices[0])[3, 0]:.0f}.",
    kind="diagram",
)

# %% [markdown]
# ## Three linear layers
#
# `nn.Linear(in_features, out_features, bias=False)` maps a row $x$ to $x W$. It stores the
# transpose: its `weight` is $W^\top$, one row per output feature, and `layer(x)` computes
# `x @ layer.weight.T`. Each output feature is one row of `weight` dotted with $x$, as the
# picture framed. A layer maps every row of $X$ at once, so with $W_Q$ copied in,
# `to_query(X)` is $Q = X W_Q$, of shape $(T, d_k)$: page 1's queries.

# %%
import torch
from torch import nn

import attn_ref.examples as ex

torch.set_grad_enabled(False)  # forward passes only: no gradients


def linear(W):  # an nn.Linear without bias that computes x @ W
    layer = nn.Linear(*W.shape, bias=False)  # weight: W^T, (out, in)
    layer.weight.copy_(W.T)
    return layer


X = torch.tensor(ex.SENTENCE)  # (T, C) = (4, 6): Alice, met, Bob, she
to_query = linear(torch.tensor(ex.SENTENCE_W_Q))  # W_Q: (C, d_k) = (6, 2)
to_key = linear(torch.tensor(ex.SENTENCE_W_K))
to_value = linear(torch.tensor(ex.SENTENCE_W_V))
Q, K, V = to_query(X), to_key(X), to_value(X)  # (T, d_k) each
T, C = X.shape
d_k = Q.shape[-1]  # the width of a query and of a key: 2
print("to_query.weight, a row per output:", to_query.weight.tolist(), sep="\n")
print("Q = to_query(X), a row per token:", Q.tolist(), sep="\n")
print("K:", K.tolist())
print("V:", V.tolist())

# %% [markdown]
# ## Why not the tokens themselves?
#
# <a id="what-the-identity-projections-hide"></a>Without projections, each token would compare its own features with the others',
# $X X^\top$. Those scores are symmetric, and a token shares every feature with itself: *she*
# would find *she*. The projections let a token ask for something it is not (a *female name*)
# and be found for something else than what it passes on. In the picture, each row is a query
# and each column a key.

# %% tags=["check"]
import math

plain = torch.softmax(X @ X.T / math.sqrt(C), dim=-1)  # (T, T): no projections
projected = torch.softmax(Q @ K.T / math.sqrt(d_k), dim=-1)  # (T, T)
print(
    "she, no projections, attends most to:",
    ex.SENTENCE_TOKENS[plain[3].argmax()],
)
print(
    "she, projected, attends most to:     ",
    ex.SENTENCE_TOKENS[projected[3].argmax()],
)
print("X X^T symmetric:", torch.equal(X @ X.T, (X @ X.T).T))
print("Q K^T symmetric:", torch.equal(Q @ K.T, (Q @ K.T).T))

# %% tags=["plot"]
fig, ax = canvas(10.6, 7.6, scale=0.4)
panels = [
    (plain, 1.6, f"no projections\nsoftmax(X Xᵀ/√{C})"),
    (projected, 6.4, f"projected\nsoftmax(Q Kᵀ/√{d_k})"),
]
for matrix, left, title in panels:
    grid(ax, matrix, left, 2.5, cmap="viridis", decimals=2)
    note(ax, left + 2, 0.8, title)
    for j, token in enumerate(tokens):
        note(ax, left + j + 0.5, 2.15, token, fontsize=10)
    outline(ax, Box(left, 2.5 + 3, 4, 1))  # the row of 'she'
for i, token in enumerate(tokens):
    note(ax, 1.45, 2.5 + i + 0.5, token, ha="right")
note(ax, 6.0, 7.1, "a row per query, a column per key")
figure_to_svg(
    fig,
    alt="Two four by four grids of weights for Alice, met, Bob, she, a row "
    f"per query. Without projections, she gives its largest weight, "
    f"{plain[3].max():.2f}, to itself. With the projections, she gives "
    f"{projected[3, 0]:.2f} to Alice.",
)

# %% [markdown]
# ## Scores, then weights, then the weighted sum
#
# The rest is page 1's formula, in four lines: every query against every key, $Q K^\top$ of
# shape $(T, T)$; divided by $\sqrt{d_k}$ (here $d_k = 2$, the width of $Q$'s rows, not of
# the tokens); a softmax along each row, over the keys (`dim=-1`); and each output row the
# values weighted by its row.

# %%
scores = Q @ K.T / math.sqrt(d_k)  # (T, d_k) @ (d_k, T) -> (T, T)
weights = torch.softmax(scores, dim=-1)  # (T, T): each row sums to one
output = weights @ V  # (T, T) @ (T, d_v) -> (T, d_v)
print("she's scores: ", scores[3].numpy().round(2))
print("she's weights:", weights[3].numpy().round(3))
print("she's output: ", output[3].numpy().round(3))

# %% [markdown]
# The softmax, drawn for *she*'s row: each score is exponentiated, so every weight is
# positive and a larger score gets a larger share; each exponential is then divided by their
# sum, so the weights add up to one.

# %% tags=["plot"]
from attn_ref.diagrams import arrow

row = scores[3]  # (T,): she's scores
exps = row.exp()  # (T,)
fig, ax = canvas(11.2, 6.9, scale=0.405)  # fits a phone
steps = [
    (row, "scores s", {"decimals": 2}),
    (exps, "exp(s)", {"decimals": 1, "vmax": float(exps.max())}),
    (exps / exps.sum(), "÷ their sum", {"decimals": 2, "cmap": "viridis"}),
]
for n, (values, label, options) in enumerate(steps):
    left = 1.8 + 3.4 * n
    box = grid(ax, values[:, None], left, 1.6, label=label, **options)
    if n:
        arrow(ax, (left - 2.3, 3.6), (left - 0.1, 3.6))
for i, token in enumerate(tokens):
    note(ax, 1.65, 1.6 + i + 0.5, token, ha="right")
note(ax, 5.2 + 1.7, 6.2, f"sum = {exps.sum():.1f}", fontsize=11)
note(ax, 8.6 + 0.5, 6.2, "weights", fontsize=11)
figure_to_svg(
    fig,
    alt="She's four scores, "
    + ", ".join(f"{s:.2f}" for s in row.tolist())
    + "; their exponentials, "
    + ", ".join(f"{e:.1f}" for e in exps.tolist())
    + f", which sum to {exps.sum():.1f}; and each divided by that sum, the "
    "weights, " + ", ".join(f"{w:.2f}" for w in weights[3].tolist()) + ".",
    kind="diagram",
)

# %% [markdown]
# ## The head, checked against PyTorch
#
# Put together, one head of self-attention is three linear layers and four lines, as the
# picture's flow of shapes shows. PyTorch's own
# `torch.nn.functional.scaled_dot_product_attention` takes the queries, keys and values and
# computes the same. `torch.allclose` compares up to rounding in the last bits, since two ways
# of adding the same numbers can round differently ([in depth](linear_in_depth.md#the-last-bits)).

# %% tags=["plot"]
from matplotlib.patches import FancyBboxPatch


def step(
    ax, x, y, text, colour="#e8e8e8", width=3.5
):  # a box centred at (x, y)
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - 0.55),
            width,
            1.1,
            boxstyle="round,pad=0.05",
            fc=colour,
            ec="black",
        )
    )
    note(ax, x, y, text, fontsize=10)


fig, ax = canvas(11.4, 10.2, scale=0.38)
T = X.shape[0]
step(ax, 5.7, 0.9, f"X  ({T}, {C})", "#cfe0f5", width=2.6)
columns = {"Q": 1.9, "K": 5.7, "V": 9.5}
for name, layer in (("Q", "to_query"), ("K", "to_key"), ("V", "to_value")):
    step(ax, columns[name], 3.2, f"{name} = {layer}(X)\n({T}, {d_k})")
    arrow(ax, (5.7, 1.5), (columns[name], 2.6))
step(ax, 3.8, 5.5, f"scores = Q Kᵀ / √{d_k}\n({T}, {T})")
arrow(ax, (1.9, 3.8), (3.4, 4.9))
arrow(ax, (5.7, 3.8), (4.2, 4.9))
step(ax, 3.8, 7.5, f"weights: softmax\nalong each row ({T}, {T})")
arrow(ax, (3.8, 6.1), (3.8, 6.9))
step(ax, 7.6, 9.4, f"output = weights V\n({T}, {d_k})", "#f8dcc0", width=3.9)
arrow(ax, (3.8, 8.1), (6.6, 8.8))
arrow(ax, (9.5, 3.8), (8.4, 8.8))
figure_to_svg(
    fig,
    alt=f"One head as a flow of shapes. X, ({T}, {C}), goes through three "
    f"linear layers to Q, K and V, each ({T}, {d_k}). Q and K give the "
    f"scores Q K transposed over the square root of {d_k}, ({T}, {T}); a "
    f"softmax along each row gives the weights, ({T}, {T}); the weights "
    f"times V give the output, ({T}, {d_k}).",
    kind="diagram",
)

# %%
import torch.nn.functional as F


def self_attention(X):  # (T, C) -> (T, d_v), with the layers above
    Q, K, V = to_query(X), to_key(X), to_value(X)  # (T, d_k) each
    scores = Q @ K.T / math.sqrt(Q.shape[-1])  # (T, T)
    return torch.softmax(scores, dim=-1) @ V  # (T, d_v)


reference = F.scaled_dot_product_attention(Q, K, V)  # PyTorch's own
print("same as PyTorch's:", torch.allclose(self_attention(X), reference))

# %% [markdown]
# Every row is a token of the sentence: *she* now carries *Alice*, and *met* carries both
# names.
#
# ## Common pitfalls
#
# <a id="transposed-weight"></a>**`X @ layer.weight`.** `nn.Linear` stores $W^\top$, so $XW$ is
# `X @ layer.weight.T`. Without the `.T`, a layer from 6 features to 2 fails at once; a square
# layer silently computes something else (the last line). The fix: call the layer, `layer(X)`.

# %% tags=["check"]
try:
    X @ to_query.weight  # (4, 6) @ (2, 6)
except RuntimeError as error:
    print("X @ to_query.weight:", error)
torch.manual_seed(0)
square = nn.Linear(C, C, bias=False)  # weight: W^T, (C, C)
print(
    "square layer, X @ weight equals layer(X):",
    torch.allclose(X @ square.weight, square(X)),
)

# %% [markdown]
# <a id="softmax-axis"></a>**`torch.softmax(scores, dim=0)`.** The softmax must run over the
# keys, along each row. Over `dim=0` each *column* sums to one instead, and each query's
# weights no longer add up to one ([the same bug in the wild](../practice/bugs.md#a-softmax-over-the-queries)).

# %% tags=["check"]
wrong = torch.softmax(scores, dim=0)  # over the queries
print("row sums, dim=0: ", wrong.sum(dim=-1).numpy().round(2))
print("row sums, dim=-1:", weights.sum(dim=-1).numpy().round(2))

# %% [markdown]
# ## Exercises
#
# **1. Every score doubles.** If every scaled score is multiplied by 2, do *she*'s weights
# double, stay the same, or change some other way? Predict, then compare with each weight
# squared and the row divided by its new sum.

# %% tags=["solution"]
doubled = torch.softmax(2 * scores, dim=-1)  # (T, T)
squared = weights**2
squared /= squared.sum(dim=-1, keepdim=True)  # rows sum to one
print("she, doubled scores:  ", doubled[3].numpy().round(4))
print("she, squared weights: ", squared[3].numpy().round(4))
print("equal:", torch.allclose(doubled, squared))
# e^(2s) = (e^s)^2: doubling every score squares every weight, then the
# row is renormalised, so the large weights grow and the small ones shrink.

# %% [markdown]
# **2. A key without *female*.** Set the *female* row of $W_K$ to zero. Predict *she*'s weights
# and output, then compute them.

# %% tags=["solution"]
W_K_blind = torch.tensor(ex.SENTENCE_W_K)  # (C, d_k)
W_K_blind[3] = 0.0  # row 3 is the feature "female"
K_blind = X @ W_K_blind  # (T, d_k): Alice's key is now (1, 0), like Bob's
weights_blind = torch.softmax(Q @ K_blind.T / math.sqrt(d_k), dim=-1)
print("she's weights:", weights_blind[3].numpy().round(3))
print("she's output: ", (weights_blind @ V)[3].numpy().round(3))
# she still asks "female?", but no key answers it: Alice and Bob now score
# the same, and she takes half of each. A query only finds what keys say.

# %% [markdown]
# **3. Reversing the tokens.** Reverse the order of the four tokens, *she Bob met Alice*, and
# run the head again. Predict the weights and outputs first.

# %% tags=["solution"]
order = [3, 2, 1, 0]
output_reversed = self_attention(X[order])  # (T, d_v)
same = torch.allclose(output_reversed, self_attention(X)[order])
print("the old output rows, reversed:", same)
# Without a mask and without positions, attention does not see the order:
# reordering the tokens reorders the outputs the same way (page 1, "Order").

# %% [markdown]
# ## References
#
# - Vaswani et al. [Attention Is All You Need](https://arxiv.org/abs/1706.03762), NeurIPS
#   2017: scaled dot-product attention and its projections (sections 3.2.1 and 3.2.2).
# - PyTorch: [`nn.Linear`](https://docs.pytorch.org/docs/stable/generated/torch.nn.Linear.html)
#   (its `weight` of shape `(out_features, in_features)`),
#   [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html)
#   and [`torch.allclose`](https://docs.pytorch.org/docs/stable/generated/torch.allclose.html).
#
# **Next:** [Self-attention with a causal mask](causal_self_attention.md) stops each token of
# the sentence from looking at the ones after it.

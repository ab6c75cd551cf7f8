# ---
# jupyter:
#   search:
#     boost: 2  # page 4 of the core path teaches the scaling and the heads: searches land here
# ---

# %% [markdown]
# # Scaled dot-product attention, step by step
#
# This page follows ten tokens through scaled dot-product attention, prints every
# intermediate, and shows why the scores are divided by $\sqrt{d_k}$. Then it cuts the
# work into several heads and recombines them with $W_O$: multi-head attention, checked
# against PyTorch.
#
# It assumes the steps of one head on a few tokens
# ([From nn.Linear to self-attention](linear_to_self_attention.md)) and the causal mask
# ([Self-attention with a causal mask](causal_self_attention.md)). Symbols follow the
# [notation table](../notation.md): tokens are rows, $Q = X W_Q$, shapes `(B, T, C)`
# for tokens and `(B, H, T, d_k)` for heads.
#
# $$
# \begin{aligned}
# &\operatorname{Attention}(Q, K, V) \\
# &\quad = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V
# \end{aligned}
# $$
#
# The picture is that formula on this page's ten tokens, drawn from the numbers the cells
# below compute. Each matrix is a grid of cells, blue below zero and red above; the
# weights run from purple (0) to yellow (1).

# %% tags=["plot"]
import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from IPython.display import Markdown
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from attn_ref import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.examples import AV_VALUES, AV_WEIGHTS, TEN_TOKENS
from attn_ref.plotting import figure_to_svg

torch.set_printoptions(precision=2, sci_mode=False)
np.set_printoptions(precision=2, suppress=True)  # 10 by 10: a row a line
torch.set_grad_enabled(False)  # forward passes only

tokens = torch.tensor(TEN_TOKENS)  # (T, C), with Q = K = V = the tokens
picture_out, picture_w = scaled_dot_product_attention(tokens, tokens, tokens)
picture_s = tokens @ tokens.T / math.sqrt(tokens.size(-1))  # (T, T)
fig, ax = canvas(9.8, 10.4, scale=0.43)
size = {"cell": 0.38}
x_box = grid(ax, tokens, 0.4, 1.0, label="$X$: tokens × features", **size)
s_box = grid(
    ax, picture_s, 5.6, 1.0, label=r"$S = QK^\top / \sqrt{d_k}$", **size
)
a_box = grid(ax, picture_w, 5.6, 6.2, cmap="viridis", **size)
o_box = grid(ax, picture_out, 0.4, 6.2, label="$O = AV$", **size)
note(ax, a_box.top[0], a_box.y - 0.35, r"$A = \mathrm{softmax}(S)$")
arrow(ax, x_box.right, s_box.left, "scores")
arrow(ax, s_box.bottom, (a_box.top[0], a_box.y - 0.75), None)
arrow(ax, a_box.left, o_box.right, "mix V")
figure_to_svg(
    fig,
    alt="Four 10 by 10 grids: the tokens X; their scaled scores S; the "
    "weights A, purple near 0 with a yellow-green diagonal; the output O.",
)

# %% [markdown]
# ## The input: ten tokens in a batch
#
# Each token is a row of ten features: fixed numbers that stand for embeddings with a
# positional encoding already added ([positions](../concepts/positions.md)). A batch
# axis in front gives `(B, T, C)`: batch, tokens, features (imports: in the plotting
# code above).

# %%
X = torch.tensor(TEN_TOKENS).unsqueeze(0)  # (T, C) -> (B, T, C)
B, T, C = X.shape
print(f"B = {B} sequence, T = {T} tokens, C = {C} features per token")
print("X[0, :3], the first three tokens:", X[0, :3].numpy(), sep="\n")

# %% [markdown]
# The width $C$ is the **last** axis, `X.size(-1)`; axis 1 counts the tokens. Here both
# are ten, which hides a mix-up of the two ([pitfall 1](#common-pitfalls)).
#
# ## Queries, keys, values and scores
#
# Each token is projected three times, $Q = X W_Q$, $K = X W_K$, $V = X W_V$. A model
# learns these matrices; the first half of this page takes identity matrices, so that
# the arithmetic runs on the tokens themselves: $Q = K = V = X$, and $d_k = C$.
#
# The score of query $i$ for key $j$ is $q_i \cdot k_j / \sqrt{d_k}$. `K.mT` swaps
# the last two axes of `K`, so one product pairs every query with every key: a
# `(B, T, T)` tensor, one row per query.

# %%
W_Q = W_K = W_V = torch.eye(C)  # (C, d_k) with d_k = C
Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # each (B, T, C) @ (C, C)
print("Q, K and V all equal X:", all(torch.equal(M, X) for M in (Q, K, V)))
d_k = K.size(-1)  # the width of each key
scores = Q @ K.mT / math.sqrt(d_k)  # (B, T, C) @ (B, C, T) -> (B, T, T)
print(f"d_k = {d_k}, sqrt(d_k) = {math.sqrt(d_k):.4f}")
print("scores.shape =", tuple(scores.shape))
print("first three rows:", scores[0, :3].numpy(), sep="\n")

# %% [markdown]
# <a id="the-variance-argument"></a>
#
# ## Why divide by √d_k
#
# Take a query $q$ and a key $k$ whose $2 d_k$ components are independent, of mean 0
# and variance 1, as Vaswani et al. (2017, footnote 4) assume. Their dot product is a
# sum of $d_k$ terms $q_m k_m$. Each term has mean
# $\mathbb{E}[q_m]\,\mathbb{E}[k_m] = 0$, by independence, and variance
#
# $$
# \begin{aligned}
# \operatorname{Var}(q_m k_m)
# &= \mathbb{E}[q_m^2]\,\mathbb{E}[k_m^2] - 0^2 \\
# &= 1 \cdot 1 = 1 .
# \end{aligned}
# $$
#
# The terms are independent, so their variances add:
# $\operatorname{Var}(q \cdot k) = d_k$. The scores spread like $\sqrt{d_k}$, and
# dividing by $\sqrt{d_k}$ brings their variance back to 1 at every width. (With
# variances $\sigma_q^2$ and $\sigma_k^2$ it is $d_k \sigma_q^2 \sigma_k^2$: the
# growth with $d_k$ comes from independence alone.)
#
# Why the spread matters: the softmax only sees differences between scores. Spread
# widely, the largest score takes almost all the weight and the row is nearly one-hot.
# Then the softmax's derivative, with $p = \operatorname{softmax}(z)$,
#
# $$
# \frac{\partial p_i}{\partial z_j} = p_i \left(\delta_{ij} - p_j\right),
# $$
#
# is near zero everywhere, since every $p_i$ is near 0 or 1: $W_Q$ and $W_K$ get
# almost no gradient. The paper puts it so: large dot products push "the softmax
# function into regions where it has extremely small gradients" (section 3.2.1).
#
# The experiment draws such queries and keys at growing widths, ten keys per query, and
# measures the scores' spread, each row's largest weight and the size of the softmax's
# gradient (the norm of the matrix above), with and without the division.

# %% tags=["plot"]
generator = torch.Generator().manual_seed(0)
widths, trials = [1, 4, 16, 64, 256, 1024], 500  # 500 queries per width
spread = {"plain": [], "scaled": []}  # per width: std, top weight, gradient
for width in widths:
    q_draw = torch.randn(trials, 1, width, generator=generator).double()
    k_draw = torch.randn(trials, T, width, generator=generator).double()
    z = (q_draw @ k_draw.mT)[:, 0]  # (trials, T): mean 0, variance width
    for name, s in (("plain", z), ("scaled", z / math.sqrt(width))):
        p = torch.softmax(s, dim=-1)  # (trials, T)
        jacobian = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
        size_of_gradient = torch.linalg.matrix_norm(jacobian).mean()
        spread[name].append([s.std(), p.amax(-1).mean(), size_of_gradient])
table = {name: torch.tensor(rows) for name, rows in spread.items()}
print("               std of scores    largest weight    gradient size")
print(" d_k           plain  scaled     plain  scaled     plain  scaled")
for i, width in enumerate(widths):
    pairs = torch.stack([table["plain"][i], table["scaled"][i]], dim=1)
    print(
        f"{width:4}       ",
        "    ".join(f"{a:6.3f} {b:6.3f}" for a, b in pairs),
    )
fig, axes = plt.subplots(
    2, 1, figsize=(4.4, 3.8), sharex=True, layout="constrained"
)
for name, style in (("plain", "o-"), ("scaled", "s--")):
    label = r"$q \cdot k$" if name == "plain" else r"$q \cdot k / \sqrt{d_k}$"
    for ax, column in zip(axes, (0, 1), strict=True):
        ax.plot(widths, table[name][:, column], style, label=label)
axes[0].plot(widths, np.sqrt(widths), ":", color="gray", label=r"$\sqrt{d_k}$")
axes[1].axhline(1 / T, color="gray", linestyle=":", label="uniform, 1/T")
axes[0].set(ylabel="std of the scores", yscale="log")
axes[1].set(ylabel="largest weight", ylim=(0, 1.05), xlabel="$d_k$")
axes[1].set_xscale("log", base=2)
for ax in axes:
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=10)
figure_to_svg(
    fig,
    alt="Against d_k on a log scale: unscaled, the spread of the scores grows "
    "like the square root of d_k and the largest weight rises towards 1; "
    "divided by the square root of d_k, both stay flat.",
)

# %% [markdown]
# The spread follows the derivation: about $\sqrt{d_k}$ unscaled, about 1 scaled.
# Unscaled, the rows drift towards one-hot as $d_k$ grows and the gradient shrinks
# towards zero; scaled, all three stay where they start. The ten tokens of this page
# do not meet the independence assumption, but the division still lowers the largest
# weight of every row:

# %% tags=["plot"]
unscaled = Q @ K.mT  # (B, T, T), not divided
print("largest weight of each row, without the division and with it:")
print(torch.softmax(unscaled, dim=-1).amax(dim=-1)[0].numpy())
print(torch.softmax(scores, dim=-1).amax(dim=-1)[0].numpy())

# %% [markdown]
# ## Softmax, then the weighted sum of the values
#
# A softmax along the last axis turns each row of scores into weights that are
# positive and sum to one: row $i$ says how much token $i$ takes from each token. The
# output mixes the value rows with those weights, $O = AV$: one row per query, as many
# columns as $V$. The checks below it: the rows sum to one, and `attn_ref` and
# PyTorch's own function compute the same.

# %%
weights = torch.softmax(scores, dim=-1)  # (B, T, T), over the keys
output = weights @ V  # (B, T, T) @ (B, T, d_v) -> (B, T, d_v)
print("weights:", tuple(weights.shape), " output:", tuple(output.shape))

# %% tags=["plot"]
row_sums = weights.sum(dim=-1)  # (B, T)
print("every row sums to one:", torch.allclose(row_sums, torch.ones(B, T)))
strongest = weights[0].argmax(dim=-1)  # (T,): each query's strongest key
itself = torch.equal(strongest, torch.arange(T))
print("each token's strongest key is itself:", itself)
print("scores symmetric:", torch.allclose(scores, scores.mT))
ours, ours_w = scaled_dot_product_attention(Q, K, V)  # attn_ref
theirs = F.scaled_dot_product_attention(Q, K, V)  # PyTorch's
same = torch.allclose(output, ours, atol=1e-6)
same = same and torch.allclose(weights, ours_w, atol=1e-6)
print("attn_ref agrees (allclose, atol=1e-6):", same)
print("PyTorch agrees:", torch.allclose(output, theirs, atol=1e-6))
gap = (output - theirs).abs().max()
print(f"largest |difference| from PyTorch: {gap:.1e}")

# %% [markdown]
# The diagonal of $A$ in the first picture is the yellow-green one: with identity
# projections the score of token $i$ with itself is $x_i \cdot x_i / \sqrt{d_k}$, and
# here it is the largest of every row. Nothing guarantees it: a token pointing the
# same way as $x_i$ but twice as long would score higher ([exercise 2](#exercises)).
#
# <details class="note">
# <summary>Going deeper: what identity projections hide</summary>
#
# With $W_Q = W_K = I$ the scores are symmetric: token $i$ scores token $j$ exactly as
# $j$ scores $i$. With learned projections the score is $x_i W_Q W_K^\top x_j^\top$,
# symmetric for every pair only when $W_Q W_K^\top$ is: what a token looks for can
# differ from what it offers. The multi-head part below prints that its scores are
# not symmetric. And with $W_V = I$ the output is a blend of the tokens themselves, as
# wide as they are.
#
# </details>
#
# <a id="one-product-by-hand"></a>
# One product small enough to check by hand: three tokens, four value features. Row 0
# of $O$ is $a_{00} v_0 + a_{01} v_1 + a_{02} v_2$; element by element,
# $O_{ij} = \sum_k A_{ik} V_{kj}$.

# %% tags=["plot"]
A = torch.tensor(AV_WEIGHTS)  # (3, 3): row i weighs the 3 tokens
V_small = torch.tensor(AV_VALUES)  # (3, 4): one value row per token
AV = A @ V_small  # (3, 3) @ (3, 4) -> (3, 4)
fig, ax = canvas(12.6, 4.4, scale=0.34)
a_box = grid(ax, A, 0.2, 0.8, cmap="viridis", decimals=1, label="$A$")
note(ax, 3.5, 2.3, "×", fontsize=16)
v_box = grid(ax, V_small, 3.8, 0.8, decimals=1, label="$V$")
note(ax, 8.1, 2.3, "=", fontsize=16)
o_box = grid(ax, AV, 8.4, 0.8, decimals=2, label="$O = AV$")
figure_to_svg(
    fig,
    alt="A 3 by 3 grid of weights A, each row summing to 1, times a 3 by 4 "
    "grid of values V, equals the 3 by 4 output O, every number written in "
    "its cell.",
)

# %% [markdown]
# Each row of $V$ rises by the same step from column to column, and each row of $A$
# sums to one, so each row of $O$ rises by that same step.
#
# <details class="note">
# <summary>Going deeper: all twelve sums, written out</summary>
#
# The cell below writes every sum from the tensors and typesets it.
#
# </details>

# %% tags=["deeper"]
boxes = []  # one block of sums per row of O, typeset by the site
for i, a_row in enumerate(A.tolist()):
    lines = []
    for j, v_column in enumerate(V_small.T.tolist()):
        pairs = zip(a_row, v_column, strict=True)  # (A_ik, V_kj), k = 0..2
        terms = " + ".join(rf"{a:.4g} \times {v:.4g}" for a, v in pairs)
        lines.append(rf"O_{{{i}{j}}} &= {terms} \\ &= {AV[i, j]:.4g}")
    boxes.append(
        r"$$\begin{aligned}" + r" \\ ".join(lines) + r"\end{aligned}$$"
    )
Markdown("\n\n".join(boxes))

# %% [markdown]
# ## Multi-head attention
#
# Multi-head attention runs $H$ attentions side by side. Head $h$ (counted from 0) has
# its own projections $W_Q^{(h)}$, $W_K^{(h)}$, $W_V^{(h)}$ of shape $(C, d_k)$, with
# $d_k = C / H$. The heads' outputs are concatenated, and an output projection $W_O$,
# $(C, C)$, mixes them:
#
# $$
# \begin{aligned}
# \text{head}_h &= \operatorname{Attention}(Q^{(h)}, K^{(h)}, V^{(h)}), \\
# Q^{(h)} &= X W_Q^{(h)}, \text{ and so } K^{(h)}, V^{(h)}; \\
# \text{output} &= [\text{head}_0, \dots, \text{head}_{H-1}]\, W_O .
# \end{aligned}
# $$
#
# In code the $W_Q^{(h)}$ sit side by side in one $(C, C)$ matrix $W_Q$: one product
# projects the tokens for every head, and `split_heads` hands each head its $d_k$
# columns. Each head is then one more batch of the same attention, divided by the
# square root of its own width. `merge_heads` undoes the split: the concatenation. The
# weights are those of a seeded, untrained `nn.MultiheadAttention` with two heads,
# which stores them transposed, as `nn.Linear` does.

# %%
torch.manual_seed(0)  # the layer's random initial weights
num_heads = 2
mha = nn.MultiheadAttention(C, num_heads, batch_first=True)
# (3C, C) -> three (C, C), each transposed back: W_Q, not W_Q^T
W_Q, W_K, W_V = (w.T for w in mha.in_proj_weight.chunk(3))
b_q, b_k, b_v = mha.in_proj_bias.chunk(3)  # (3C,) -> three (C,)
Q_mh = X @ W_Q + b_q  # (B, T, C) @ (C, C) -> (B, T, C)
K_mh = X @ W_K + b_k
V_mh = X @ W_V + b_v
# (B, T, C) -> (B, H, T, d_k): head h takes features h d_k to (h + 1) d_k - 1
q, k, v = (split_heads(t, num_heads) for t in (Q_mh, K_mh, V_mh))
d_head = C // num_heads  # d_k of each head
# (B, H, T, d_k) -> outputs (B, H, T, d_k) and weights (B, H, T, T)
head_outputs, head_weights = scaled_dot_product_attention(q, k, v)
concat = merge_heads(head_outputs)  # (B, H, T, d_k) -> (B, T, C)
W_O = mha.out_proj.weight.T  # stored as W_O^T: (C, C)
mh_output = concat @ W_O + mha.out_proj.bias  # (B, T, C)

# %% [markdown]
# The picture runs those lines on the layer's numbers. Each head has its own block of
# columns of $W_Q$ (and of $W_K$, $W_V$), its own weights and a five-wide output; side
# by side the outputs are the concatenation. $W_O$'s rows 0–4 read head 0's
# features, rows 5–9 head 1's, so every output feature draws on both heads.

# %% tags=["plot"]
fig, ax = canvas(10.4, 15.4, scale=0.41)
c = 0.29  # the side of a cell
lanes = (2.6, 7.8)  # the centre of each head's column of pieces
title = f"$W_Q$: {C} columns cut into {num_heads} blocks of $d_k$ = {d_head}"
note(ax, 5.2, 0.3, title)
for h, centre in enumerate(lanes):
    columns = slice(h * d_head, (h + 1) * d_head)
    w_box = grid(ax, W_Q[:, columns], centre - d_head * c / 2, 0.8, cell=c)
    note(ax, centre + 1.0, 2.25, f"$W_Q^{{({h})}}$", ha="left")
    a_box = grid(
        ax,
        head_weights[0, h],
        centre - T * c / 2,
        4.5,
        cell=c,
        cmap="viridis",
        label=f"head {h}: weights",
    )
    arrow(ax, w_box.bottom, (centre, 4.0), None)
    x_out = 5.2 - d_head * c * (1 - h)  # side by side: the concatenation
    h_box = grid(ax, head_outputs[0, h], x_out, 8.3, cell=c)
    arrow(ax, a_box.bottom, h_box.top, None)
note(ax, 5.2, 7.85, "× $V^{(h)}$", fontsize=11)
note(ax, 6.8, 9.75, "concatenated:\nT × C", ha="left")
for h in range(num_heads):  # W_O's rows, cut the same way as the features
    rows = slice(h * d_head, (h + 1) * d_head)
    grid(ax, W_O[rows], 1.0, 12.1 + h * (d_head * c + 0.2), cell=c)
note(ax, 1.0 + C * c / 2, 11.7, "× $W_O$, rows cut by head")
grid(ax, mh_output[0], 6.2, 12.2, cell=c, label="= output")
arrow(ax, (5.2, 11.3), (5.2, 12.4), None)
figure_to_svg(
    fig,
    alt=f"W_Q cut into {num_heads} column blocks of {d_head}; under each, "
    "that head's 10 by 10 weights, mostly purple (small) with a few green "
    "cells; "
    "under those, the heads' "
    "outputs side by side form the concatenation; it times W_O, whose rows "
    "are cut the same way, gives the 10 by 10 output.",
)

# %% [markdown]
# Step by step, `attn_ref.MultiHeadAttention` (given the layer's weights by
# `from_torch`) and PyTorch's layer itself agree, weights and outputs:

# %% tags=["plot"]
print("q, k, v:", tuple(q.shape), " weights:", tuple(head_weights.shape))
print(f"scale 1/sqrt(d_k) = {1 / math.sqrt(d_head):.4f}")
full_scores = Q_mh @ K_mh.mT  # (B, T, T), all features at once
print("scores symmetric now:", torch.allclose(full_scores, full_scores.mT))
second = torch.equal(q[:, 1], Q_mh[..., d_head:])  # (B, T, d_k)
print(f"head 1 holds features {d_head}..{C - 1} of Q:", second)
# PyTorch's layer, asked for one (T, T) matrix of weights per head
mha_output, mha_head_weights = mha(X, X, X, average_attn_weights=False)
ours_mh_output, _ = MultiHeadAttention.from_torch(mha)(X, X, X)
checks = {
    "step by step == nn.MultiheadAttention": (mh_output, mha_output),
    "attn_ref == nn.MultiheadAttention": (ours_mh_output, mha_output),
    "per-head weights agree": (head_weights, mha_head_weights),
}
for label, (a, b) in checks.items():
    print(f"{label}:", torch.allclose(a, b, atol=1e-6))
gap = (mh_output - mha_output).abs().max()
print(f"largest |difference| of the outputs: {gap:.1e}")

# %% [markdown]
# <details class="note">
# <summary>Going deeper: the layouts and weights nn.MultiheadAttention returns</summary>
#
# By default `nn.MultiheadAttention` expects `(T, B, C)`, tokens first;
# `batch_first=True` makes it `(B, T, C)`. It returns the weights averaged over the
# heads, `(B, T, T)`, unless `average_attn_weights=False` asks for one matrix per head.
# With `need_weights=False` it returns none, and its documentation says it can then use
# the optimized `scaled_dot_product_attention`.
#
# </details>
#
# <details class="note">
# <summary>Going deeper: what several heads cost</summary>
#
# Vaswani et al. (2017, section 3.2.2) write that, the heads being narrower, "the total
# computational cost is similar to that of single-head attention with full
# dimensionality". True of the arithmetic, not of the memory. PyTorch's
# `FlopCounterMode` counts the floating-point operations (FLOPs) of matrix products,
# here at $T = 16384$ tokens of width $C = 4096$, on tensors of the `meta` device:
# shapes without data, so nothing is computed or allocated.
#
# - The four projections cost the same for any $H$: the same $(C, C)$ products.
# - $QK^\top$ and $AV$ cost $2 T^2 d_k$ FLOPs each, per head: $H$ heads of width
#   $C / H$ cost what one head of width $C$ costs.
# - The scores and weights are `(B, H, T, T)`: $H$ times the memory of one head's.
#   [Attention without the T×T matrix](efficient_attention.md) avoids storing them.
#
# </details>


# %% tags=["deeper"]
def counted(f, *args):
    """f(*args), and the FLOPs PyTorch counts in its matrix products."""
    with FlopCounterMode(display=False) as counter:
        result = f(*args)
    return result, counter.get_total_flops()


x_big = torch.empty(1, 16384, 4096, device="meta")  # (B, T, C), no data
W_big = torch.empty(4096, 4096, device="meta")  # (C, C)
_, flops = counted(lambda: [x_big @ W_big for _ in range(4)])  # 4 of them
print(f"the four projections, for any H: {flops:.3e} FLOPs")
print("  H   d_k  QK^T and AV FLOPs  (B, H, T, T) weights")
for H in (1, 8, 32):
    q_big = split_heads(x_big, H)  # (B, H, T, C / H)
    (_, w), n = counted(scaled_dot_product_attention, q_big, q_big, q_big)
    print(f"{H:3}  {q_big.size(-1):4}  {n:17.3e}  {w.nbytes / 2**30:g} GiB")

# %% [markdown]
# ## Common pitfalls
#
# **1. Reading the width from axis 1.** A common mistake is
# `d_model = x.size(1)`. In `(B, T, C)` axis 1 is $T$, the number of tokens. With ten
# tokens of ten features it runs; keep four tokens, and the identity matrix it builds
# has the wrong size (first lines below). The fix: `x.size(-1)`.
#
# **2. "The output has shape (T, d_model)".** The output takes its width from the
# values, not from the model: $O = AV$ has as many columns as $V$. Values four
# features wide give an output four features wide (last lines below).

# %% tags=["plot"]
first_four = X[:, :4, :]  # (B, 4, C): now T and C differ
try:
    first_four @ torch.eye(first_four.size(1))  # the width read from T
except RuntimeError as error:
    print("identity of size(1): RuntimeError:")
    print(textwrap.fill(str(error), width=79))
right = first_four @ torch.eye(first_four.size(-1))  # (B, 4, C)
print("identity of size(-1): shape", tuple(right.shape))
narrow = weights @ V[..., :4]  # values 4 features wide: (B, T, 4)
print("values of width 4 give an output of shape", tuple(narrow.shape))

# %% [markdown]
# **3. A product by hand that cannot be right.** A common slip writes the sums of
# [one product by hand](#one-product-by-hand) correctly, then gives a result such as
# `claimed` below, wrong in most entries. The check: the rows of $A$ sum to one, so
# each row of $O$ must rise by the same step as the rows of $V$; the claimed rows rise
# by another. In words too: each output *row* is a weighted sum of the value *rows*.
#
# **4. "Combining the heads" with one head and a fresh layer.** A common shortcut sets
# one head, reshapes with `view(B, -1, 1 * C)` and applies a new, unseeded
# `nn.Linear`. With one head the reshape returns the same tensor, and an untrained
# layer made without a seed prints numbers that change from run to run (two seeds
# below). The fix: [multi-head attention](#multi-head-attention), $H > 1$ heads and a
# learned (here, seeded) $W_O$.

# %% tags=["plot"]
claimed = torch.tensor(  # a hand-computed A @ V, as it might be written
    [
        [0.62, 0.74, 0.86, 0.98],
        [0.42, 0.54, 0.66, 0.78],
        [0.64, 0.76, 0.88, 1.0],
    ]
)
wrong = ~torch.isclose(claimed, AV, atol=5e-3)  # (3, 4)
print(f"wrong entries: {int(wrong.sum())} of {wrong.numel()}")
print("steps from column to column, row by row:")
steps = [M.diff(dim=-1).numpy() for M in (V_small, AV, claimed)]
for name, step in zip(("V", "AV", "claimed"), steps, strict=True):
    print(f"{name:>8}:", step.ravel())
combined = output.view(B, -1, 1 * C)  # one head: heads * head_dim = C
print("the reshape changed nothing:", torch.equal(combined, output))
finals = []
for seed in (0, 1):
    torch.manual_seed(seed)
    finals.append(nn.Linear(C, C)(combined))  # random, untrained
gap = (finals[0] - finals[1]).abs().max()
print(f"two random 'final outputs' differ by up to {gap:.2f}")

# %% [markdown]
# ## Exercises
#
# **1. Shift the keys, then the queries.** Add the same vector $c$ to every key of the
# identity-projection example. Predict whether the weights change. Then add $c$ to
# every query instead. Compute both, and explain.

# %% tags=["solution"]
g = torch.Generator().manual_seed(1)
c = torch.randn(C, generator=g)  # (C,): the same vector for every token
scale = 1 / math.sqrt(d_k)
keys_shifted = torch.softmax(Q @ (K + c).mT * scale, dim=-1)  # (B, T, T)
queries_shifted = torch.softmax((Q + c) @ K.mT * scale, dim=-1)
change_k = (keys_shifted - weights).abs().max()
change_q = (queries_shifted - weights).abs().max()
print(f"keys + c:    largest change in the weights {change_k:.1e}")
print(f"queries + c: largest change in the weights {change_q:.2f}")
# Keys: q_i . c is added to the whole of row i, which a softmax ignores.
# Queries: c . k_j changes from key to key, so the weights move.

# %% [markdown]
# **2. A token that outshines itself.** Append an eleventh token, $2 x_0$. Derive which
# key query 0 now prefers, and the ratio of its weight on the new token to its weight
# on itself. Then compute both.

# %% tags=["solution"]
X11 = torch.cat([X, 2 * X[:, :1]], dim=1)  # (B, T + 1, C): t10 is 2 x_0
_, weights11 = scaled_dot_product_attention(X11, X11, X11)  # W = I
row = weights11[0, 0]  # the weights of query 0: (T + 1,)
print("query 0's strongest key:", row.argmax().item())
print(f"weight on t10 / weight on t0: {(row[10] / row[0]).item():.2f}")
derived = math.exp((X[0, 0] @ X[0, 0]).item() / math.sqrt(d_k))
print(f"derived, exp(|x_0|^2 / sqrt(d_k)): {derived:.2f}")
# Query 0 gives t10 the score 2 |x_0|^2 / sqrt(d_k), twice t0's; and two
# weights of one row are in the ratio e^(s - s') of their scores s, s'.

# %% [markdown]
# **3. Merge the heads with a reshape.** A common bug merges the heads with
# `head_outputs.reshape(B, T, C)` and no transpose. Predict whether it raises an error,
# and which numbers land in row 0. Then fix it without `merge_heads`.

# %% tags=["solution"]
broken = head_outputs.reshape(B, T, C)  # no error: the sizes match
print("broken merge == concat:", torch.equal(broken, concat))
first_two = head_outputs[0, 0, :2].flatten()  # head 0, tokens 0 and 1
same_row = torch.equal(broken[0, 0], first_two)
print("row 0 is head 0 of tokens 0, 1:", same_row)
# (B, H, T, d_k) -> (B, T, H, d_k) -> (B, T, C)
fixed = head_outputs.transpose(1, 2).reshape(B, T, C)
print("fixed merge == concat:", torch.equal(fixed, concat))
# reshape reads memory in order, all of head 0 first: a row of C numbers
# holds C / d_k tokens of one head. The transpose puts heads side by side.

# %% [markdown]
# ## References
#
# - Ashish Vaswani, Noam Shazeer, Niki Parmar, Jakob Uszkoreit, Llion Jones, Aidan N.
#   Gomez, Łukasz Kaiser, Illia Polosukhin.
#   [Attention Is All You Need](https://arxiv.org/abs/1706.03762). NeurIPS 2017.
#   Scaled dot-product attention and footnote 4, the variance of $q \cdot k$ (section
#   3.2.1); multi-head attention and its cost (section 3.2.2).
# - PyTorch documentation:
#   [`torch.nn.functional.scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html),
#   [`torch.nn.MultiheadAttention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html)
#   (its `in_proj_weight`, `need_weights` and `average_attn_weights`),
#   [`torch.nn.Linear`](https://docs.pytorch.org/docs/stable/generated/torch.nn.Linear.html)
#   (its `weight` of shape `(out_features, in_features)`), and
#   [`FlopCounterMode`](https://docs.pytorch.org/docs/main/generated/torch.utils.flop_counter.FlopCounterMode.html).
# - The [notation table](../notation.md).
#
# **Next:** [the transformer block](../concepts/transformer_block.md) puts multi-head
# attention where a model uses it: between a layer norm and the residual stream,
# beside an MLP.

# %% [markdown]
# # Scaled dot-product attention and heads, in depth
#
# [Page 4 of the core path](scaled_dot_product_step_by_step.md) built causal multi-head
# attention on a sentence with hand-set heads. This page follows ten tokens of ten features
# through scaled dot-product attention, prints every intermediate, works one product $AV$ out
# by hand, reads the heads out of PyTorch's own `nn.MultiheadAttention`, and takes the side
# roads page 4 leaves out: what attention and its heads cost, and what a head can write into
# the residual stream. It assumes [page 4](scaled_dot_product_step_by_step.md). Symbols
# follow the [notation table](../notation.md): tokens are rows, $Q = X W_Q$, shapes
# `(B, T, C)` for tokens and `(B, H, T, d_k)` for heads.
#
# $$
# \begin{aligned}
# &\operatorname{Attention}(Q, K, V) \\
# &\quad = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V
# \end{aligned}
# $$
#
# The picture is that formula on this page's ten tokens, with $Q = K = V = X$ (identity
# projections, below), drawn from the numbers the cells compute. Each matrix is a grid of
# cells, blue below zero and red above; the weights run from purple (0) to yellow (1).

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
from attn_ref.masks import causal_mask
from attn_ref.plotting import figure_to_svg

torch.set_printoptions(precision=2, sci_mode=False)
np.set_printoptions(precision=2, suppress=True)  # 10 by 10: a row a line
torch.set_grad_enabled(False)  # forward passes only

tokens = torch.tensor(TEN_TOKENS)  # (T, C), with Q = K = V = the tokens
picture_out, picture_w = scaled_dot_product_attention(tokens, tokens, tokens)
picture_s = tokens @ tokens.T / math.sqrt(tokens.size(-1))  # (T, T)
fig, ax = canvas(9.8, 10.4, scale=0.43)
size = {"cell": 0.38}
x_box = grid(ax, tokens, 0.4, 1.0, label="X: tokens × features", **size)
s_box = grid(ax, picture_s, 5.6, 1.0, label="S = X Xᵀ / √dₖ", **size)
a_box = grid(ax, picture_w, 5.6, 6.2, cmap="viridis", **size)
o_box = grid(ax, picture_out, 0.4, 6.2, label="O = A V, V = X", **size)
note(ax, a_box.top[0], a_box.y - 0.35, "A = softmax(S), by rows")
arrow(ax, x_box.right, s_box.left, "Q Kᵀ")
arrow(ax, s_box.bottom, (a_box.top[0], a_box.y - 0.75), None)
arrow(ax, a_box.left, o_box.right, "mix rows")
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
# ## The scale, measured three ways
#
# [Page 4](scaled_dot_product_step_by_step.md#the-variance-argument) derives why the scores are
# divided by $\sqrt{d_k}$: for independent components of mean 0 and variance 1,
# $\operatorname{Var}(q \cdot k) = d_k$, and a softmax over widely spread scores is nearly
# one-hot, where its derivative $\partial p_i / \partial z_j = p_i (\delta_{ij} - p_j)$ is
# near zero. The table measures all three on 500 random queries of ten keys at each width: the
# scores' spread, each row's largest weight, and the size of the softmax's gradient (the
# norm of that matrix of derivatives), with and without the division.

# %% tags=["check"]
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
# ## The heads of nn.MultiheadAttention
#
# PyTorch's `nn.MultiheadAttention` keeps $W_Q$, $W_K$ and $W_V$ in one `(3C, C)` tensor,
# `in_proj_weight`, transposed as `nn.Linear` stores its weights, with a bias for each. The
# cell takes them out of a seeded, untrained layer with two heads and runs
# [page 4](scaled_dot_product_step_by_step.md)'s steps on them: `attn_ref.split_heads` and
# `merge_heads` are page 4's `view(B, T, H, d_k).transpose(1, 2)` and its inverse. This is the
# layer's own computation, written out, so each head's weights can be compared with the ones
# the layer returns.

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
# ## What attention and its heads cost
#
# <a id="pitfall-cost"></a>**"The dot product is cheap, so attention scales well."** One is
# cheap, but there is one per pair of tokens. PyTorch's `FlopCounterMode` counts the
# floating-point operations (FLOPs) of matrix products, here on tensors of the `meta` device:
# shapes without data, so nothing is computed or allocated. Doubling $T$ multiplies the work
# and the weights' memory by four:


# %% tags=["check"]
def cost(T, H, d_k):
    """GFLOP, and MiB of the float32 weights, of attention over T tokens in H
    heads of width d_k."""
    q = torch.empty(H, T, d_k, device="meta")  # shapes, no data
    with FlopCounterMode(display=False) as counter:
        weights = torch.softmax(q @ q.mT / d_k**0.5, dim=-1)  # (H, T, T)
        weights @ q  # (H, T, d_k): the output
    return counter.get_total_flops() / 1e9, weights.nbytes / 2**20


lengths = (1024, 2048, 4096, 8192, 16384)
costs = {(n, 1, 64): cost(n, 1, 64) for n in lengths}  # one head, d_k = 64
print("one head, d_k = 64:\n     T   GFLOP    MiB")
for length in lengths:
    gflop, mib = costs[length, 1, 64]
    print(f"{length:>6} {gflop:>7.2f} {mib:>6.0f}")

# %% [markdown]
# [Tiled attention](efficient_attention.md) saves the memory, not the work. Several heads
# keep the work and multiply the memory. Vaswani et al. (2017, section 3.2.2) write that, the
# heads being narrower, "the total computational cost is similar to that of single-head
# attention with full dimensionality". True of the arithmetic, not of the memory. Counted at
# $T = 16384$ tokens of width $C = 4096$:
#
# - The four projections cost the same for any $H$: the same $(C, C)$ products.
# - $QK^\top$ and $AV$ cost $2 T^2 d_k$ FLOPs each, per head: $H$ heads of width
#   $C / H$ cost what one head of width $C$ costs.
# - The scores and weights are `(B, H, T, T)`: $H$ times the memory of one head's.
#   [Attention without the T×T matrix](efficient_attention.md) avoids storing them.


# %% tags=["check"]
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
# ## What a head writes into the stream
#
# <a id="pitfall-subspace"></a>**"With $W_O$, each head writes in any direction of the
# stream."** Cut $W_O$ into $H$ blocks of $d_k$ rows, $W_O^{(h)}$ of shape $(d_k, C)$, and the
# output splits into one term per head, $\sum_h \text{head}_h W_O^{(h)}$: "Attention Heads
# are Independent and Additive" (Elhage et al., 2021). Each head's write touches every feature
# of the stream, but each of its rows mixes only the $d_k$ rows of $W_O^{(h)}$: over any
# number of tokens, a head's writes span at most $d_k$ directions. The cell checks it on 24
# tokens of width 16 with four heads: a head writes into a learned subspace of rank at most
# $d_k$, and only the heads together reach all $C$.

# %% tags=["check"]
torch.manual_seed(0)
width, n_heads, length = 16, 4, 24  # C, H, T: more tokens than features
head_width = width // n_heads  # d_k
writer = MultiHeadAttention(embed_dim=width, num_heads=n_heads)
stream = torch.randn(1, length, width)  # (B, T, C)
past = causal_mask(length)  # (T, T)
written, _ = writer(stream, stream, stream, attn_mask=past)  # (B, T, C)
projected = (p(stream) for p in (writer.q_proj, writer.k_proj, writer.v_proj))
per_head, _ = scaled_dot_product_attention(
    *(split_heads(t, n_heads) for t in projected), attn_mask=past
)  # (B, H, T, d_k)
W_out = writer.out_proj.weight.T  # (C, C): nn.Linear stores W_O^T
rows = [slice(h * head_width, (h + 1) * head_width) for h in range(n_heads)]
writes = [per_head[:, h] @ W_out[rows[h]] for h in range(n_heads)]  # (B, T, C)
out_bias = writer.out_proj.bias  # (C,)
total_written = sum(writes) + out_bias
summed = written - out_bias  # (B, T, C): the heads' writes, added up
print(
    "output = heads' writes + b_O:",
    torch.allclose(written, total_written, atol=1e-6),
)
reached = [int((w != 0).any(dim=1).sum()) for w in writes]
print("features each head's write touches:", reached, "of", width)
# Singular values under 1e-5 of the largest are rounding, not directions.
ranks = [int(torch.linalg.matrix_rank(w[0], rtol=1e-5)) for w in writes]
print("rank of each head's write:", ranks, " d_k =", head_width)
all_heads = int(torch.linalg.matrix_rank(summed[0], rtol=1e-5))
print("rank of all the heads' writes, summed:", all_heads, "of", width)

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(4.4, 3.4), layout="constrained")
index = torch.arange(1, width + 1)
for h, w in enumerate(writes):
    sigma = torch.linalg.svdvals(w[0])  # (C,), largest first
    ax.plot(index, sigma / sigma[0], "o-", markersize=4, label=f"head {h}")
sigma = torch.linalg.svdvals(summed[0])
ax.plot(index, sigma / sigma[0], "s--", markersize=4, label="all heads")
ax.axhline(1e-5, color="gray", linestyle=":", label="rounding cut-off")
ax.set(yscale="log", xlabel="direction i", ylabel="σᵢ / σ₁")
ax.set_xticks([1, 4, 8, 12, 16])
ax.legend(fontsize=9, ncols=2)
figure_to_svg(
    fig,
    alt="Singular values of each head's write over 24 tokens, divided by the "
    "largest, on a log scale: for each of the 4 heads, 4 values between 1 and "
    "about 0.05, then a drop far below the dotted cut-off. The heads' writes "
    "summed keep all 16 values above it.",
)

# %% [markdown]
# Each head's singular values fall off a cliff after the $d_k$-th, down to float32 rounding.
# Without $W_O$, head $h$ could only write into its own slice of $d_k$ features; with it, the
# model learns the subspace.

# %% [markdown]
# ## Common pitfalls
#
# **1. `d_model = x.size(1)`.** In `(B, T, C)` axis 1 is $T$, the number of tokens. With ten
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
# **3. A product by hand that cannot be right.** A hand-computed $AV$ can be checked without
# redoing it: the rows of $A$ sum to one, so each row of $O$ must rise by the same step as the
# rows of $V$. The matrix `claimed` below, wrong in most entries, fails that check at once:
# its rows rise by another step. In words too: each output *row* is a weighted sum of the
# value *rows* ([one product by hand](#one-product-by-hand)).
#
# **4. One head, `view(B, -1, 1 * C)` and a fresh `nn.Linear` as "combining the heads".**
# With one head the reshape returns the same tensor, and an untrained layer made without a
# seed prints numbers that change from run to run (two seeds below). The fix: [multi-head attention](scaled_dot_product_step_by_step.md#multi-head-attention), $H > 1$ heads and a
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
# **3. Merge the heads with a reshape.** Merge the heads with `head_outputs.reshape(B, T, C)`
# and no transpose. Predict whether it raises an error,
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
# - Elhage et al. (2021). [A Mathematical Framework for Transformer
#   Circuits](https://transformer-circuits.pub/2021/framework/index.html): attention heads
#   as independent and additive, each writing into the residual stream.
# - The [notation table](../notation.md).
#
# **Next:** back to the core path, [page 5: the transformer block](../concepts/transformer_block.md),
# which puts multi-head attention where a model uses it.

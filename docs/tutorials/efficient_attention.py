# %% [markdown]
# # Attention without the T×T matrix: online softmax and FlashAttention's tiles
#
# Every page so far has built the full matrix of scores: one number for every pair of
# query and key, $T \times T$ of them per head. Models that read long texts avoid it.
# Rabe and Staats (2021) computed exact attention chunk by chunk, with a softmax that is
# updated as the keys stream past; FlashAttention (Dao et al., 2022) does it in *tiles*
# sized for a GPU's on-chip memory. The result is exact, and the memory it needs grows
# like $T$ instead of $T^2$.
#
# This page builds that method from first principles: the one-pass ("online") softmax,
# then attention tile by tile. It checks that the result equals PyTorch's to float
# rounding, and measures what it saves on this machine. It assumes scaled dot-product
# attention and its masks
# ([Scaled dot-product attention, step by step](scaled_dot_product_step_by_step.md),
# [Self-attention with a causal mask](causal_self_attention.md)). Shapes follow the
# site's [notation](../notation.md): `(B, H, T, d_k)` for heads, $L$ queries and $S$ keys.
#
# Here is the whole idea on 8 tokens, in tiles of 2 by 2, with a causal mask (the numbers
# are the ones the section "Tiled attention" computes).

# %% tags=["plot"]
import math

import torch

from attn_ref import tiled_attention
from attn_ref.diagrams import (
    Box,
    arrow,
    canvas,
    grid,
    note,
    outline,
    tile_order,
)
from attn_ref.masks import causal_mask
from attn_ref.plotting import figure_to_svg

g = torch.Generator().manual_seed(1)
q8, k8, v8 = torch.randn(3, 8, 2, generator=g)  # T = 8, d_k = d_v = 2
_, state8 = tiled_attention(
    q8, k8, v8, is_causal=True, block_size=2, trace=True
)
scores8 = q8 @ k8.T / math.sqrt(2)  # (T, T): drawn, never made by the tiles
fig, ax = canvas(10, 9.4)
box = grid(ax, scores8, 0.4, 1.0, mask=causal_mask(8, 8), cell=0.5)
note(ax, box.center[0], 0.45, "scores, T = 8")
for i in range(4):  # the tiles' edges
    for j in range(4):
        outline(ax, Box(0.4 + j, 1.0 + i, 1, 1), width=1.2)
outline(ax, Box(0.3, 2.9, 4.2, 1.2), style="--")  # the block of queries 4, 5
tiles = tile_order(ax, state8.trace, (8, 8), (2, 2), 6.2, 1.0)
outline(ax, Box(6.1, 2.9, 4.2 - 0.4, 1.2), style="--")
note(ax, tiles.center[0], 0.45, "tiles, in order")
note(ax, tiles.center[0], 5.45, "10 computed, 6 skipped", fontsize=10)
y0, query = 7.0, 4  # below: query 4's scores, tile by tile
note(ax, 5, 6.3, "query 4, tile by tile: running m and ℓ")
for y, word in (
    (y0 + 0.5, "scores"),
    (y0 + 1.5, "max m"),
    (y0 + 2.2, "sum ℓ"),
):
    note(ax, 0.9, y, word, fontsize=10)
picture_steps = []  # (m, ℓ, rescale) after each tile
previous, x = None, 2.0
for step in (s for s in state8.trace if query in s.rows):
    r = query - step.rows.start
    m, ell, rescale = (
        float(t[r]) for t in (step.row_max, step.row_sum, step.rescale)
    )
    picture_steps.append((m, ell, rescale))
    row = step.scores[r]  # -inf where the mask hides a key
    largest = float(scores8.abs().max())  # one colour scale for both grids
    b = grid(ax, row, x, y0, decimals=1, mask=row.isfinite(), vmax=largest)
    note(ax, b.center[0], y0 + 1.5, f"{m:.2f}")
    note(ax, b.center[0], y0 + 2.2, f"{ell:.2f}")
    if previous is not None:
        arrow(ax, previous.right, b.left)
        middle = (previous.right[0] + b.left[0]) / 2
        note(ax, middle, y0 + 1.85, f"×{rescale:.2f}", fontsize=10)
    previous, x = b, b.x + b.width + 0.9
figure_to_svg(
    fig,
    alt="Left, the 8 by 8 scores of a causal attention, cut into 2 by 2 "
    "tiles, the block of queries 4 and 5 framed; right, the 4 by 4 tiles "
    "numbered in the order they are computed, the 6 above the diagonal "
    "skipped. Below, query 4's scores in its three tiles, with its running "
    "maximum m and sum ℓ after each: "
    + "; ".join(f"m {m:.2f}, ℓ {ell:.2f}" for m, ell, _ in picture_steps),
)

# %% [markdown]
# On the left are the scores a causal head would compute: red above zero, blue below,
# hatched where the mask hides a key. Tiled attention never holds this matrix. It works
# through one block of queries at a time (the dashed frame), one tile of keys after
# another, in the order on the right. Tiles whose keys all come after the block's
# queries are never computed. Each query keeps two running numbers, below: $m$, the
# largest score so far, and $\ell$, the sum of $e^{s - m}$ over the scores so far. When
# a tile brings a larger score, the sum is rescaled (the factor on the arrow) so that
# it is measured against the new maximum. After the last tile, $m$ and $\ell$ are
# exactly the maximum and the normaliser of the softmax of the whole row. The rest of
# the page derives this, and extends it to the output.

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn_ref import online_softmax, scaled_dot_product_attention, softmax
from attn_ref.measure import cpu_time_ms, peak_memory

torch.set_num_threads(1)  # results that do not depend on the machine's cores
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## The matrix every page so far builds
#
# `attn_ref.scaled_dot_product_attention` returns the attention weights beside the
# output, so that pages can print and plot them. For $B$ sequences and $H$ heads those
# weights have shape `(B, H, T, T)`, and so do the scores they come from. In float32
# one such matrix takes $4 B H T^2$ bytes.

# %%
q = k = v = torch.randn(1, 2, 6, 4)  # (B, H, T, d_k)
print("weights:", tuple(scaled_dot_product_attention(q, k, v)[1].shape))
print("one float32 (B, H, T, T) matrix, B = 1 and H = 32:")
for T_long in (2_048, 32_768, 131_072):
    print(f"  T = {T_long:>7,}: {4 * 32 * T_long**2 / 2**30:g} GiB")

# %% [markdown]
# The output grows like $T$; the matrix grows like $T^2$. Doubling the text multiplies
# the matrix by four. At the longest length above, one matrix is far larger than a GPU's
# memory: the A100 of the FlashAttention paper has 40 to 80 GB. Yet each output row needs
# only a weighted sum of values. The rest of the page gets it without ever holding a full
# row of weights, let alone the whole matrix.
#
# ## The normaliser in one pass
#
# The stable softmax reads a row $x_0, \dots, x_{S-1}$ three times. The first pass
# finds the maximum $m = \max_j x_j$. The second sums $\ell = \sum_j e^{x_j - m}$.
# The third divides: $\operatorname{softmax}(x)_j = e^{x_j - m} / \ell$. Subtracting $m$
# keeps every exponent at or below zero, so nothing overflows.
#
# The *online* softmax (Milakov and Gimelshein, 2018) finds $m$ and $\ell$ in a single
# pass. (Attention needs no separate pass to divide: the next section folds the
# division into the output.) It keeps the largest entry seen so far, $m$, and the sum
# $\ell$ of $e^{x_i - m}$ over the entries seen so far. When a new entry $x_j$ arrives,
# the maximum may grow to $m' = \max(m, x_j)$. Every term already in $\ell$ was computed
# against the old maximum, and $e^{x_i - m'} = e^{x_i - m} \, e^{m - m'}$. So the whole
# sum is rescaled by one factor before the new term is added:
#
# $$
# \begin{aligned}
# m' &= \max(m, x_j), \\
# \ell' &= \ell \, e^{m - m'} + e^{x_j - m'}.
# \end{aligned}
# $$
#
# It starts from $m = -\infty$ and $\ell = 0$. After the last entry, $m$ and $\ell$ are
# those of the stable softmax. `attn_ref.online_softmax` records them after every step.

# %%
x = torch.tensor([2.0, 1.0, 4.0, 3.0, 6.0, 0.0], dtype=torch.float64)
weights, online_state = online_softmax(x, trace=True)
print(" j  x_j    m  rescale       ℓ")
for j, s in enumerate(online_state.trace):
    print(
        f"{j:>2} {x[j]:4.1f} {s.row_max:4.1f}",
        f"{s.rescale:8.4f} {s.row_sum:7.4f}",
    )
print(f"stable:     m = {x.max():.1f}, ℓ = {(x - x.max()).exp().sum():.4f}")
gap = (weights - softmax(x)).abs().max()
print(f"largest |online - stable softmax|: {gap:.1e}")

# %% [markdown]
# The rescale factor $e^{m - m'}$ is 1 whenever the maximum stays put, and below 1 at
# each step where a larger entry arrives. At the first step it is 0: the sum was still
# empty. The final $m$ and $\ell$ are those of the stable softmax, and so are the weights.
#
# The update does not have to take one entry at a time. A block of entries has its own
# maximum and its own sum, and merging them into the running pair is the same rescaling
# (exercise 1 checks it). That is what lets attention work in tiles.
#
# ## Tiled attention
#
# Attention applies a softmax to every row of scores, then mixes values with the
# weights. The online softmax lets the keys arrive in blocks; one more running quantity
# lets the values arrive with them. Take a block of queries $Q_i$ and a block of keys
# and values $K_j, V_j$. Their *tile* of scores is $S_{ij} = Q_i K_j^\top / \sqrt{d_k}$,
# of shape `(block_q, block_k)`. Each query row keeps $m$, $\ell$ and an unnormalised
# output $O$, and each tile updates them:
#
# $$
# \begin{aligned}
# m' &= \max\bigl(m, \operatorname{rowmax} S_{ij}\bigr) \\
# P &= e^{S_{ij} - m'} \\
# \ell' &= \ell \, e^{m - m'} + \operatorname{rowsum} P \\
# O' &= O \, e^{m - m'} + P \, V_j
# \end{aligned}
# $$
#
# The letters are those of the FlashAttention papers: $S_{ij}$ is a tile of scores (not
# $S$, the number of keys), $P$ its unnormalised weights, and $O$ the output before
# dividing by $\ell$. After the last block of keys, the output rows are $O / \ell$. The
# output is rescaled by the same factor as the sum, for the same reason: every term in it
# was weighted against the old maximum.
#
# This form of the update, with $O$ kept unnormalised and one division at the end, is
# FlashAttention-2's (Dao, 2023, section 3.1.1). The first FlashAttention (Dao et al.,
# 2022, Algorithm 1) divides by the running sum at every step and writes a normalised
# output each time; the result is the same. `attn_ref.tiled_attention` also follows
# FlashAttention-2's loop order: queries outside, keys inside. No tensor of scores
# larger than one tile is ever made.
#
# Here are the 8 tokens of the picture at the top. After each of its tiles, the block of
# queries 4 and 5 has a trace: $m$, the rescale factor, $\ell$, and the output so far,
# which is attention over the keys read so far.

# %%
g = torch.Generator().manual_seed(1)
q8, k8, v8 = torch.randn(3, 8, 2, generator=g)  # T = 8, d_k = d_v = 2
out8, state8 = tiled_attention(
    q8, k8, v8, is_causal=True, block_size=2, trace=True
)
for step in state8.trace:
    if step.rows.start == 4:  # the block of queries 4 and 5
        print(f"keys {step.cols.start}-{step.cols[-1]}:")
        print("  m", step.row_max, " rescale", step.rescale)
        print("  ℓ", step.row_sum)
        print(f"  output so far, one row per query\n{step.output}")
expected, _ = scaled_dot_product_attention(q8, k8, v8, is_causal=True)
print(f"largest |tiled - attn_ref|: {(out8 - expected).abs().max():.0e}")

# %% [markdown]
# Where a query's maximum grows, its rescale factor drops below 1 and shrinks what it had
# gathered; where the maximum stays, the factor is 1. The block never reads keys 6 and 7:
# that tile was skipped. The last "output so far" is the output. `state.row_max` and
# `state.row_sum` keep $m$ and $\ell$ of every query.
#
# ## Exact, not approximate
#
# In exact arithmetic, tiling changes nothing. In floating point, the additions come in
# another order and the rescalings round too. So for finite inputs the result should
# equal PyTorch's `scaled_dot_product_attention` up to float rounding, and so should the
# gradients. The cases below use lengths that are not multiples of the block size, a
# boolean mask with a query that may see no key at all, an additive mask, and causal
# attention with fewer queries than keys, all in float64. The gradients are those of a
# random linear function of the output, with respect to $Q$, $K$ and $V$.

# %% tags=["plot"]
g = torch.Generator().manual_seed(2)
B, H, L, S, d_k = 2, 3, 37, 45, 16
q, k, v = (
    torch.randn(
        B, H, n, d_k, generator=g, dtype=torch.float64
    ).requires_grad_()
    for n in (L, S, S)
)
boolean = torch.rand(L, S, generator=g) > 0.5
boolean[5] = False  # query 5 may see no key: its output is zero
additive = torch.randn(L, S, generator=g, dtype=torch.float64)
cases = {
    "no mask": {},
    "boolean mask, a query with no key": {"attn_mask": boolean},
    "additive mask": {"attn_mask": additive},
    "causal, L < S": {"is_causal": True},
}
direction = torch.randn(B, H, L, d_k, generator=g, dtype=torch.float64)
for name, kwargs in cases.items():
    ours, state = tiled_attention(q, k, v, block_size=16, **kwargs)
    theirs = F.scaled_dot_product_attention(q, k, v, **kwargs)
    grads = [
        torch.autograd.grad((out * direction).sum(), (q, k, v))
        for out in (ours, theirs)
    ]
    grad_error = max((a - b).abs().max() for a, b in zip(*grads, strict=True))
    error = (ours - theirs).abs().max()
    print(
        f"{name:<34} {state.tiles_computed} tiles: outputs {error:.0e}, "
        f"gradients {grad_error:.0e}"
    )

# %% [markdown]
# Autograd differentiates through the loop, so the gradients come for free; they agree
# to float64 rounding too. The test suite also checks the claim behind all this: it
# records every tensor PyTorch allocates during a call of `tiled_attention`, and none
# has the shape `(..., L, S)`.
#
# ## Causal attention skips the tiles above the diagonal
#
# With a causal mask, query $i$ sees keys $0, \dots, i$. A tile whose first key comes after
# its last query is entirely masked: `tiled_attention(..., is_causal=True)` skips it,
# without computing or even reading it. Tiles on the diagonal are computed with the mask
# added; tiles below it need no mask at all. With $n$ blocks on a side, $n(n-1)/2$ of the
# $n^2$ tiles lie above the diagonal, a fraction $(n-1)/(2n)$ that tends to one half.
# Below, 32 tokens in blocks of four, drawn from the trace of `tiled_attention`, then its
# counts as $n$ grows.

# %% tags=["plot"]
block, n_blocks = 4, 8
x_grid = torch.zeros(n_blocks * block, 1)
_, state_grid = tiled_attention(
    x_grid, x_grid, x_grid, is_causal=True, block_size=block, trace=True
)
for n in (2, 8, 64):
    x_n = torch.zeros(n, 1)
    _, counted = tiled_attention(x_n, x_n, x_n, is_causal=True, block_size=1)
    skipped = counted.tiles_skipped
    total = counted.tiles_computed + skipped
    print(
        f"n = {n:>2}: skipped {skipped:>4} of {total:>4}",
        f"= {skipped / total:.3f}; (n-1)/(2n) =",
        (n - 1) / (2 * n),
    )
fig, ax = canvas(8.6, 9.8)
T_grid = n_blocks * block
tiles = tile_order(
    ax, state_grid.trace, (T_grid, T_grid), (block, block), 0.3, 0.9
)
note(ax, tiles.center[0], 0.4, "columns: blocks of keys")
note(ax, tiles.center[0], 9.4, "rows: blocks of queries")
figure_to_svg(
    fig,
    alt=f"The {n_blocks} by {n_blocks} tiles of {T_grid} tokens in blocks of "
    f"{block}, numbered 1 to {state_grid.tiles_computed} row by row in the "
    f"order computed; the {state_grid.tiles_skipped} tiles above the "
    "diagonal are hatched: skipped.",
)

# %% [markdown]
# Each row of tiles is one block of queries: it computes the tiles up to the diagonal,
# left to right, and skips the rest (hatched). So causal attention needs about half the
# work of full attention at long lengths, on top of the memory it saves.
# FlashAttention-2 skips the same tiles on a GPU, where the saved work is saved time.
#
# ## Memory, measured
#
# Counting tensors is one thing; the memory a process actually uses is another.
# `attn_ref.measure.peak_memory(fn)` runs `fn` in a copy of this process (made with
# `os.fork`) and reads from Linux how far that copy's resident memory rose, at its peak,
# while `fn` ran. Each measured call makes its own random inputs, so the figures include
# $Q$, $K$, $V$ and the output: everything one attention call needs. Three methods run on
# the same inputs, one sequence with one head of width 128, as $T$ doubles:
#
# - **naive**: `attn_ref.scaled_dot_product_attention`, which makes the full matrices;
# - **tiled**: `attn_ref.tiled_attention`, in tiles of 128 by 128;
# - **PyTorch**: `torch.nn.functional.scaled_dot_product_attention`, held to its
#   `FLASH_ATTENTION` backend, PyTorch's own fused CPU kernel.

# %% tags=["plot", "measured"]
B, H, d = 1, 1, 128
lengths = [256, 512, 1024, 2048]


def random_inputs(T):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, T, d, generator=g) for _ in range(3)]  # q, k, v


def pytorch_kernel(q, k, v):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v)


methods = {
    "naive": scaled_dot_product_attention,
    "tiled": lambda q, k, v: tiled_attention(q, k, v, block_size=128),
    "PyTorch": pytorch_kernel,
}
with (
    torch.no_grad()
):  # the inputs are made inside each measured call, so they count
    peaks = {
        name: np.array(
            [
                peak_memory(lambda m, T: m(*random_inputs(T)), f, T)
                for T in lengths
            ]
        )
        / 2**20
        for name, f in methods.items()
    }
formula = (
    np.array([4 * B * H * T**2 for T in lengths]) / 2**20
)  # one (T, T) matrix
io = np.array([4 * 4 * B * H * T * d for T in lengths]) / 2**20  # Q, K, V, O
print("    T    naive    tiled  PyTorch  4·B·H·T²  Q,K,V,O  (MiB)")
for i, T in enumerate(lengths):
    print(
        f"{T:>5}",
        *(f"{column[i]:>8.2f}" for column in (*peaks.values(), formula, io)),
    )

# %% [markdown]
# How fast does each grow? A straight line through the three longest lengths on log-log
# axes gives the exponent $p$ in $\text{memory} \propto T^p$. Beside it, what each method
# holds beyond its inputs and output.

# %% tags=["plot", "measured"]
slopes = {
    name: np.polyfit(np.log(lengths[1:]), np.log(peak[1:]), 1)[0]
    for name, peak in peaks.items()
}
for name, peak in peaks.items():
    print(
        f"{name:<8} grows like T^{slopes[name]:.2f}; beyond Q, K, V and O:",
        (peak - io).round(2),
        "MiB",
    )
extra = (peaks["naive"] - io)[-1] / formula[-1]  # in (B, H, T, T) matrices
print(f"naive at T = {lengths[-1]}: {extra:.2f} matrices beyond Q, K, V and O")
fig, ax = plt.subplots(figsize=(4.6, 4.4), layout="constrained")
for (name, peak), marker in zip(peaks.items(), "os^", strict=True):
    ax.loglog(
        lengths, peak, marker + "-", label=f"{name} (slope {slopes[name]:.2f})"
    )
ax.loglog(lengths, formula, "k--", linewidth=1, label="4·B·H·T²: one matrix")
ax.set_xticks(lengths, lengths)
ax.minorticks_off()
ax.set(xlabel="sequence length T", ylabel="peak memory (MiB)")
fig.legend(
    loc="outside lower center", ncols=2
)  # below: the lines fill the axes
figure_to_svg(
    fig,
    alt="Log-log plot of the measured peak memory against T: "
    + ", ".join(f"{name} with slope {slopes[name]:.2f}" for name in peaks),
)

# %% [markdown]
# The naive method's memory grows like $T^2$. Beyond its inputs and output it holds about
# four `(B, H, T, T)` matrices at once: `attn_ref`'s softmax keeps the scores, the scores
# minus their maximum, their exponentials and the weights.
#
# The tiled method's memory grows like $T$. It holds its inputs and output, plus a few
# tiles and the Python loop's bookkeeping: a small amount that does not grow with $T$.
# That fixed part still weighs at these lengths, which pulls the fitted slope below
# one. PyTorch's kernel, too, keeps only tiles beside its inputs and output. Its source
# picks larger tiles for longer sequences, so its fixed part can step up on the way.
#
# <details class="note">
# <summary>Going deeper: how <code>peak_memory</code> measures</summary>
#
# Linux keeps, for every process, its resident memory and the highest value it has
# reached (`VmRSS` and `VmHWM` in `/proc/self/status`). The forked copy resets the high
# mark to the current value (by writing `5` to `/proc/self/clear_refs`), runs the
# function, and reads the mark again. It also asks glibc's `malloc` to give every
# allocation of 4 KiB or more its own pages and to return them when freed, so that no
# allocation lands in memory already counted. Pages of PyTorch's machine code, read from
# its libraries as the copy first runs them, count as resident too (`RssFile`); their
# growth is subtracted. The test suite checks the measurement on tensors of known size.
#
# </details>
#
# ## What a GPU adds: FlashAttention's memory traffic
#
# On a CPU, tiling saves memory and, on this page, nothing else. FlashAttention's title
# promises speed as well, and the reason lies in the GPU's memory hierarchy. A GPU holds
# its tensors in large *high-bandwidth memory* (HBM). It computes on data in a small,
# much faster on-chip *SRAM*. Every number a kernel uses must travel from HBM to SRAM,
# and every result back. The paper finds that the number of these HBM accesses, not the
# arithmetic, is what sets the runtime of attention (its Figure 2).
#
# Standard attention writes the `(N, N)` scores to HBM (the paper writes $N$ for our
# $T$, and $d$ for $d_k$), reads them back for the softmax, writes the weights, and reads
# them again to mix the values. FlashAttention never writes an `(N, N)` matrix. It reads
# $Q$, $K$ and $V$ in blocks that fit in SRAM, and writes the output, with $m$ and $\ell$
# for each query. With $M$ numbers of SRAM (not a mask here), its Theorem 2, for
# $d \le M \le Nd$: standard attention needs $\Theta(Nd + N^2)$ HBM accesses,
# FlashAttention $\Theta(N^2 d^2 M^{-1})$.
#
# The folded cell below counts the accesses of one head's forward pass line by line, for
# three algorithms: the paper's Algorithm 0 (standard), its Algorithm 1 (FlashAttention,
# keys and values in the outer loop), and the loop order of this page's
# `tiled_attention` (queries outside), which is FlashAttention-2's. The count is for an
# NVIDIA A100, the paper's GPU, in the setting of its Figure 2; the table puts it beside
# what the paper measured there, forward and backward passes together: the paper's
# numbers, not this machine's.
#
# <details class="note">
# <summary>Going deeper: the count, line by line, and what it leaves out</summary>
#
# - Standard: read $Q, K$, write $S$; read $S$, write $P$; read $P, V$, write $O$:
#   $4Nd + 4N^2$ numbers.
# - FlashAttention, keys and values in the outer loop: it takes blocks of
#   $B_c = \lceil M / 4d \rceil$ keys and makes $T_c = \lceil N / B_c \rceil$ passes over
#   the queries and outputs. It writes the initial $O$, $\ell$, $m$ ($Nd + 2N$) and reads
#   each block of $K$ and $V$ once ($2Nd$). In each of the $T_c$ passes it reads $Q$ and
#   $O$, writes $O$, and reads and writes $\ell$ and $m$: $3Nd + 2N + T_c(3Nd + 4N)$ in all.
# - Queries in the outer loop (this page's order): each block of queries stays on chip
#   until its last key. It reads $Q$ once, writes $O$ and the log-sum-exp once
#   ($2Nd + N$), and reads all of $K$ and $V$ once per block of queries: $T_r$ times,
#   $T_r = \lceil N / B_r \rceil$. FlashAttention-2 tunes its block sizes by hand for
#   each GPU and head size (its section 3.3); for a like-for-like count, this one gives the
#   outer loop's blocks the size FlashAttention gives its own, $B_r = \lceil M / 4d \rceil$
#   queries. That is our choice, not the paper's. The total is $2Nd + N + 2 T_r N d$.
#
# What the count models: the numbers each algorithm's pseudocode moves between HBM and
# SRAM in the forward pass, each block read exactly where the algorithm says. What it
# leaves out: the backward pass; the elementwise steps that standard implementations run
# as kernels of their own, each reading and writing an `(N, N)` matrix again (masking
# applied to $S$, dropout applied to $P$: the paper's section 2.2); and any cache between
# HBM and SRAM that would serve a block read twice.
#
# The paper gives the A100 "192KB of on-chip SRAM" per streaming multiprocessor (its
# section 2.1). That is the L1 cache and the shared memory together; NVIDIA's tuning
# guide for the A100 says a kernel can have at most 164 KB of it as shared memory, the
# part a kernel fills by hand with its blocks. So $M$ is 164 KB here, in 16-bit numbers.
#
# </details>

# %% tags=["plot"]
M = 164 * 1024 // 2  # fp16 numbers in an A100 SM's 164 KB of shared memory


def hbm_accesses(N, d, M):
    """Numbers one head's forward pass reads from or writes to HBM:
    (standard, FlashAttention, queries in the outer loop)."""
    block = math.ceil(M / (4 * d))  # B_c keys; B_r queries in the other order
    passes = math.ceil(N / block)  # T_c passes over the queries, or T_r
    standard = 4 * N * d + 4 * N * N
    keys_outside = 3 * N * d + 2 * N + passes * (3 * N * d + 4 * N)
    queries_outside = 2 * N * d + N + passes * 2 * N * d
    return standard, keys_outside, queries_outside


heads = 64 * 16  # GPT-2 medium in the paper's Figure 2: batch 64, 16 heads
standard, flash, flash2 = (
    2 * heads * n / 1e9 for n in hbm_accesses(1024, 64, M)
)  # GB of fp16, N = 1024, d = 64
block = math.ceil(M / (4 * 64))
print(f"M = {M:,} fp16 numbers: blocks of {block} keys (or queries)")
print(
    f"HBM (GB), counted, forward: standard {standard:.3g},",
    f"FlashAttention {flash:.3g},",
)
print(f"  queries outside {flash2:.3g}")
# Dao et al. (2022, arXiv v2), Figure 2 left: A100, forward and backward
rows = {
    "HBM R/W (GB)": (40.3, 4.4),
    "Runtime (ms)": (41.7, 7.3),
    "GFLOPs": (66.6, 75.2),
}
print(f"{'the paper, measured':<20} standard  FlashAttention  ratio")
for quantity, (measured_standard, measured_flash) in rows.items():
    ratio = measured_standard / measured_flash
    print(
        f"{quantity:<20} {measured_standard:>8.3g} {measured_flash:>15.3g}"
        f" {ratio:>6.1f}"
    )

# %% [markdown]
# FlashAttention does *more* arithmetic: it recomputes the tiles in the backward pass
# instead of storing them. It is faster anyway, because it moves far less data. The
# measured traffic is larger than the count in both columns: the measurement includes
# the backward pass, and the extra kernels of the standard implementation. The paper's
# headline results come from the two savings this page shows: attention in GPT-2 7.6
# times faster than PyTorch's implementation (its Figure 1), from the traffic; attention
# memory up to 20 times smaller than exact baselines (its Section 4.3), from never
# storing the matrix.
#
# How does the saving change with the length? At long lengths every count grows like
# $N^2$: $4N^2$ for standard attention, about $12 N^2 d^2 / M$ for FlashAttention, and
# about $8 N^2 d^2 / M$ with the queries outside (its passes reread only $K$ and $V$, not
# $Q$, $O$, $\ell$ and $m$). So the ratio of standard attention's count to
# FlashAttention's levels off near $M / (3 d^2)$, and to the other order's near
# $M / (2 d^2)$ (the dashed lines): larger with more SRAM, smaller with wider heads.

# %% tags=["plot"]
Ns = 2 ** np.arange(8, 17)
fig, ax = plt.subplots(figsize=(4.4, 4.6), layout="constrained")
for d_head, color in ((64, "C0"), (128, "C1")):
    counts = np.array([hbm_accesses(int(n), d_head, M) for n in Ns])  # (N, 3)
    for column, style, outer in ((1, "o-", "K, V"), (2, "s:", "Q")):
        ax.semilogx(
            Ns,
            counts[:, 0] / counts[:, column],
            style,
            color=color,
            label=f"{outer} outer, d = {d_head}",
        )
    for level in (M / (3 * d_head**2), M / (2 * d_head**2)):
        ax.axhline(level, color=color, linestyle="--", linewidth=1)
ax.set(xlabel="sequence length N", ylabel="HBM traffic, standard / tiled")
fig.legend(
    loc="outside lower center", ncols=2
)  # below: the lines fill the axes
figure_to_svg(
    fig,
    alt="The ratio of HBM traffic, standard attention over tiled attention, "
    "against N, for d = 64 and d = 128 and both loop orders (keys and values "
    "outer, or queries outer): each curve rises, then levels off at its "
    "dashed line, M/(3d²) with the keys outer and M/(2d²) with the queries "
    "outer.",
)

# %% [markdown]
# The saving needs $d^2$ to be well below $M$, as the paper notes for its typical values.
# At long lengths, with less SRAM or wider heads, FlashAttention's ratio falls below one
# once $M < 3d^2$: the blocks of keys that fit are so small that reading the queries and
# outputs again on every pass costs more than the matrices it saves. With the queries
# outside, that happens once $M < 2d^2$. FlashAttention-2, likewise, chooses its block
# sizes by head dimension and by the GPU's shared memory (its Section 3.3).
#
# A CPU can show two of FlashAttention's three claims: the result is exact, and the memory
# grows like $T$. It cannot show the speed. A CPU's caches are not a small scratchpad that
# a kernel fills by hand, and `attn_ref.tiled_attention` is a Python loop that calls many
# small PyTorch operations for every tile. Here are its times on this machine at
# $T = 1024$, one head of width 128, one thread, against the naive function and
# PyTorch's fused CPU kernel, which runs the same tiled algorithm in C++. Each is the
# least CPU time of five runs (`attn_ref.measure.cpu_time_ms`), which does not count the
# moments when other programs have the processor.

# %% tags=["plot", "measured"]
T_time = 1024
q, k, v = random_inputs(T_time)
with torch.no_grad():
    timings = {
        "naive (attn_ref)": cpu_time_ms(
            lambda: scaled_dot_product_attention(q, k, v)
        ),
        "tiled, blocks of 64": cpu_time_ms(
            lambda: tiled_attention(q, k, v, block_size=64)
        ),
        "tiled, blocks of 256": cpu_time_ms(
            lambda: tiled_attention(q, k, v, block_size=256)
        ),
        "PyTorch's CPU kernel": cpu_time_ms(lambda: pytorch_kernel(q, k, v)),
    }
for name, ms in timings.items():
    print(f"{name:<22} {ms:6.1f} ms")

# %% [markdown]
# These are the times of the machine that built this page; another machine can order
# them differently. What shapes them: the Python loop's time depends on the tile size,
# since larger tiles mean far fewer Python steps, each doing more arithmetic. The naive
# function runs no loop in Python, but it makes four `(T, T)` matrices (see "Memory,
# measured"), and writing and reading them takes time too; with large tiles, the loop can
# keep up with it, Python and all (compare their rows). PyTorch's kernel runs the tiled
# algorithm without the interpreter. None of this says how a GPU kernel would compare:
# that depends on its memory traffic, which a CPU does not show.
#
# <details class="note">
# <summary>Going deeper: the two loop orders, and the backward pass</summary>
#
# FlashAttention's forward algorithm puts the keys and values in the outer loop and the
# queries inside. It then reads and writes each block of outputs, with its $m$ and $\ell$,
# once per block of keys: the $T_c$ passes counted above. FlashAttention-2 swaps the
# loops, as `tiled_attention` does. Each block of queries then keeps its running state
# on chip until its last key, and divides by $\ell$ once, at the end. The blocks of
# queries are independent, so a GPU can give each its own processor.
#
# Autograd differentiates `tiled_attention` by storing what every tile computed, which
# brings back memory quadratic in $T$ (exercise 4). FlashAttention writes its backward
# pass by hand instead. It keeps the output and, for each query, $m$ and $\ell$;
# FlashAttention-2 keeps only their combination $m + \log \ell$, the *log-sum-exp*
# (`state.logsumexp` here). From it, the backward pass recomputes each tile's weights
# when it needs them (exercise 3): more arithmetic, much less memory and traffic. The
# [next page](backward_pass.md) builds it.
#
# </details>
#
# ## Common pitfalls
#
# **Exponentiating before subtracting the maximum.** A softmax written as
# `x.exp() / x.exp().sum()` is exact on paper. In float32, `exp` overflows to `inf` for
# any logit above the threshold printed below. With logits near $10^4$ it divides `inf`
# by `inf` and gives `nan`. The fix is the one every pass above makes: subtract the
# running maximum first, so that no exponent is positive.

# %%
logits = torch.tensor([1e4, 1e4 + 1, 1e4 + 2])
print("exp / sum(exp):", logits.exp() / logits.exp().sum())  # inf / inf
print("online softmax:", online_softmax(logits)[0])
threshold = math.log(torch.finfo(torch.float32).max)
print(f"float32 exp overflows above {threshold:.2f}")

# %% [markdown]
# **Rescaling the sum but not the output.** A hand-written tiled loop must multiply
# *both* running quantities by $e^{m - m'}$ when the maximum grows. A common mistake
# rescales $\ell$ and simply adds $P V_j$ to $O$. The terms already in $O$ then stay
# weighted against the old maximum, too heavy by $e^{m' - m}$, and the output is wrong
# wherever a later tile raises a query's maximum. The loop below does one query block,
# with and without the rescale of $O$, on the 8 tokens above (no mask: every tile).


# %%
def one_pass(q, k, v, block, rescale_output):
    m = torch.full((q.shape[0],), -math.inf)  # (L,)
    ell = torch.zeros(q.shape[0])  # (L,)
    out = torch.zeros(q.shape[0], v.shape[-1])  # (L, d_v): O, unnormalised
    for j in range(0, k.shape[0], block):
        s = q @ k[j : j + block].T / math.sqrt(q.shape[-1])  # (L, block)
        m_new = torch.maximum(m, s.max(dim=-1).values)
        p = (s - m_new[:, None]).exp()
        factor = (m - m_new).exp()[:, None]  # e^(m - m'): (L, 1)
        ell = ell * factor[:, 0] + p.sum(dim=-1)
        out = (out * factor if rescale_output else out) + p @ v[j : j + block]
        m = m_new
    return out / ell[:, None]


reference, _ = scaled_dot_product_attention(q8, k8, v8)
one_pass_outputs = {}  # rescale_output: the output
for rescale_output in (False, True):
    out = one_pass(q8, k8, v8, 2, rescale_output)
    one_pass_outputs[rescale_output] = out
    gap = (out - reference).abs().max()
    print(f"O rescaled: {rescale_output!s:<5}  largest error {gap:.1e}")

# %% [markdown]
# **Skipping tiles by the top-left test when the mask is bottom-right.** After a KV
# cache, $L$ new queries are the *last* $L$ of $S$ positions, so query $i$ sees keys up
# to $i + S - L$ (see [Generating text with a KV cache](kv_cache.md)). A tile-skipping
# test copied from the square case, "skip when the tile's first key comes after its
# last query", then skips tiles that hold visible keys. `tiled_attention` takes such a
# test as a `TileRule`'s `skip`; the symptom is a wrong output, with no error. The fix is to shift
# the test by $S - L$.

# %%
from attn_ref.tiled import TileRule

g = torch.Generator().manual_seed(6)
q_new, k_all, v_all = (torch.randn(n, 8, generator=g) for n in (6, 10, 10))
L_new, S_all = 6, 10  # 6 new queries after 4 cached keys
mask = causal_mask(L_new, S_all, lower_right=True)
expected, _ = scaled_dot_product_attention(q_new, k_all, v_all, attn_mask=mask)
skip_tests = {
    "top-left test": lambda rows, cols: cols.start > rows[-1],
    "shifted by S - L": lambda rows, cols: (
        cols.start > rows[-1] + S_all - L_new
    ),
}
skipping = {}  # test: (tiles skipped, largest error)
for name, skip in skip_tests.items():
    ours, state = tiled_attention(
        q_new, k_all, v_all, mask, block_size=(2, 4), tile_rule=TileRule(skip)
    )
    skipping[name] = (state.tiles_skipped, (ours - expected).abs().max())
    print(f"{name:<16}: skips {skipping[name][0]} tiles,", end=" ")
    print(f"largest error {skipping[name][1]:.1e}")

# %% [markdown]
# ## Summary
#
# - The online softmax keeps a running maximum $m$ and sum $\ell$. When the maximum grows,
#   the sum is multiplied by $e^{m_\text{old} - m_\text{new}}$. One pass gives the $m$ and
#   $\ell$ of the stable softmax, and no exponent is ever positive.
# - Tiled attention applies the same rescaling to a running output. Queries go in blocks,
#   keys and values stream past block by block, and no tile of scores larger than
#   `(block_q, block_k)` ever exists. The result equals PyTorch's to float rounding, masks,
#   causal attention and gradients included.
# - With a causal mask, the tiles above the diagonal are skipped: a fraction that tends
#   to one half.
# - Measured here, naive attention's peak memory grows like $T^2$, the tiled version's and
#   PyTorch's kernel's like $T$ (the table under "Memory, measured"). On a GPU the same
#   tiling also cuts the traffic to HBM, which is where FlashAttention's speed comes from.
#
# ## Exercises
#
# **1. Merging two halves.** Milakov and Gimelshein show that the pairs $(m, \ell)$ of two
# parts of a row merge into the pair of the whole row:
# $m = \max(m_1, m_2)$, $\ell = \ell_1 e^{m_1 - m} + \ell_2 e^{m_2 - m}$. Check it: compute
# `online_softmax` on each half of a row, merge the two states, and compare with the
# state of the whole row.

# %% tags=["solution"]
row = 4 * torch.randn(
    101, generator=torch.Generator().manual_seed(5), dtype=torch.float64
)
(_, first), (_, second), (_, whole) = (
    online_softmax(row[:50]),
    online_softmax(row[50:]),
    online_softmax(row),
)
m = torch.maximum(first.row_max, second.row_max)
ell = (
    first.row_sum * (first.row_max - m).exp()
    + second.row_sum * (second.row_max - m).exp()
)
print(f"merged m = {m:.6f}, ℓ = {ell:.6f}")
print(f"whole  m = {whole.row_max:.6f}, ℓ = {whole.row_sum:.6f}")

# %% [markdown]
# **2. New tokens after a cache.** With a KV cache, new queries attend to all the keys so
# far through a bottom-right causal mask
# (see [Generating text with a KV cache](kv_cache.md)). Run `tiled_attention` for 6 new
# queries over 10 keys with `attn_mask=causal_mask(6, 10, lower_right=True)` and check it
# against `scaled_dot_product_attention`. How many of its tiles (blocks of 2 by 4) hold no
# visible key, and how many does it skip? Why?

# %% tags=["solution"]
g = torch.Generator().manual_seed(6)
q_new, k_all, v_all = (torch.randn(n, 8, generator=g) for n in (6, 10, 10))
mask = causal_mask(6, 10, lower_right=True)
ours, state = tiled_attention(
    q_new, k_all, v_all, attn_mask=mask, block_size=(2, 4)
)
expected, _ = scaled_dot_product_attention(q_new, k_all, v_all, attn_mask=mask)
print(f"largest difference: {(ours - expected).abs().max():.0e}")
empty = sum(
    not mask[i : i + 2, j : j + 4].any()
    for i in range(0, 6, 2)
    for j in range(0, 10, 4)
)
print("tiles with no visible key:", empty, " skipped:", state.tiles_skipped)
# None skipped: only is_causal=True (top-left aligned) skips tiles. An
# attn_mask is added tile by tile, never inspected ahead; skipping here would
# need the offset S - L in the skip test.

# %% [markdown]
# **3. The log-sum-exp is enough.** FlashAttention-2's backward pass keeps, for each
# query, only $m + \log \ell$. Show that it recovers a full row of weights: for one
# query, compute its scores and $e^{s_j - (m + \log \ell)}$, and compare with the weights
# `scaled_dot_product_attention` returns.

# %% tags=["solution"]
g = torch.Generator().manual_seed(7)
q6, k6, v6 = (
    torch.randn(5, 4, generator=g, dtype=torch.float64) for _ in range(3)
)
_, state6 = tiled_attention(q6, k6, v6, block_size=2)
_, weights6 = scaled_dot_product_attention(q6, k6, v6)
scores = q6[3] @ k6.T / math.sqrt(4)  # query 3's scores: (S,)
print("recovered:", (scores - state6.logsumexp[3]).exp().numpy().round(4))
print("weights:  ", weights6[3].numpy().round(4))

# %% [markdown]
# **4. Autograd stores the tiles.** Measure the peak memory of a forward *and* backward
# pass (call `.sum().backward()` on the output) of the naive function and of the tiled one
# (tiles of 128), for one head of width 16 at T = 512 and 1024. How does each grow, and why?

# %% tags=["solution", "measured"]


def forward_backward(attention, T):
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(1, 1, T, 16, generator=g).requires_grad_()
        for _ in range(3)
    )
    attention(q, k, v)[0].sum().backward()


for name, attention in (
    ("naive", scaled_dot_product_attention),
    ("tiled", lambda q, k, v: tiled_attention(q, k, v, block_size=128)),
):
    mib = [
        peak_memory(forward_backward, attention, T) / 2**20
        for T in (512, 1024)
    ]
    print(
        f"{name}: {mib[0]:5.2f} MiB at T = 512,",
        f"{mib[1]:5.2f} MiB at T = 1024, ratio {mib[1] / mib[0]:.1f}",
    )
# Both grow faster than T (a ratio of 2 per doubling), towards T**2 (a ratio of
# 4): to differentiate, autograd keeps every tile's scores and weights, which
# together make up the whole (T, T) matrix again. FlashAttention recomputes
# them instead.

# %% [markdown]
# ## References
#
# - Tri Dao, Daniel Y. Fu, Stefano Ermon, Atri Rudra, Christopher Ré.
#   [FlashAttention: Fast and Memory-Efficient Exact Attention with
#   IO-Awareness](https://arxiv.org/abs/2205.14135). NeurIPS 2022. The tiled algorithm
#   (Algorithm 1), Theorem 2 on HBM accesses, and the A100 figures used above (Figure 2
#   of arXiv version 2; version 1 printed other measurements); code at
#   [Dao-AILab/flash-attention](https://github.com/Dao-AILab/flash-attention).
# - NVIDIA. [Ampere GPU Architecture Tuning Guide](https://docs.nvidia.com/cuda/ampere-tuning-guide/index.html),
#   section 1.4.2.3: the A100's L1 cache and shared memory together hold 192 KB per SM,
#   of which a kernel can use at most 164 KB as shared memory.
# - Tri Dao. [FlashAttention-2: Faster Attention with Better Parallelism and Work
#   Partitioning](https://arxiv.org/abs/2307.08691). 2023. Queries in the outer loop, one
#   division at the end, only the log-sum-exp kept (Section 3.1.1), causal tiles skipped,
#   block sizes (Section 3.3).
# - Markus N. Rabe, Charles Staats. [Self-attention Does Not Need O(n²)
#   Memory](https://arxiv.org/abs/2112.05682). 2021. Exact attention in chunks of keys,
#   with a running maximum and sum (its Section 3).
# - Maxim Milakov, Natalia Gimelshein. [Online normalizer calculation for
#   softmax](https://arxiv.org/abs/1805.02867). 2018. The one-pass softmax and the merge
#   of two partial results.
# - PyTorch: [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html),
#   [`sdpa_kernel`](https://docs.pytorch.org/docs/stable/generated/torch.nn.attention.sdpa_kernel.html),
#   and its CPU kernel's source,
#   [`FlashAttentionKernel.cpp`](https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cpu/FlashAttentionKernel.cpp),
#   which works in blocks of queries and keys too, larger blocks of queries for longer
#   sequences.
#
# Next: [Training attention: the backward pass, and FlashAttention's](backward_pass.md)
# differentiates attention by hand, and recomputes these tiles instead of storing them.

# %% [markdown]
# # Attention without the T×T matrix: online softmax and tiled attention
#
# Every page so far has built the full matrix of scores: one number for every pair of
# query and key, $T \times T$ of them per head. Models that read long texts avoid it.
# Since FlashAttention (Dao et al., 2022), attention is computed in *tiles*, with a
# softmax that is updated as the keys stream past. The result is exact, and the memory
# it needs grows like $T$ instead of $T^2$.
#
# This page builds that method from first principles. It derives the one-pass
# ("online") softmax, extends it to attention tile by tile, checks that the result
# equals PyTorch's to float rounding, and then measures what it saves on this machine.
# It assumes scaled dot-product attention and its masks
# ([Scaled dot-product attention, step by step](../scaled_dot_product_step_by_step/),
# [Self-attention with a causal mask](../causal_self_attention/)). Shapes follow the
# site's [notation](../../notation/): `(B, H, T, d_k)` for heads, $L$ queries and $S$ keys.

# %%
import math
import statistics
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from IPython.display import HTML, display
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn_ref import causal_mask, online_softmax, scaled_dot_product_attention, softmax, tiled_attention
from attn_ref.measure import peak_memory
from attn_ref.plotting import figure_to_svg

torch.set_num_threads(1)  # one thread: timings and memory that do not depend on the machine's other work
torch.set_printoptions(precision=4, sci_mode=False, linewidth=80)
print("torch", torch.__version__)

# %% [markdown]
# ## The matrix every page so far builds
#
# `attn_ref.scaled_dot_product_attention` returns the attention weights beside the
# output, so that pages can print and plot them. For a batch of $B$ sequences and $H$
# heads those weights have shape `(B, H, T, T)`, and so do the scores they come from.

# %%
g = torch.Generator().manual_seed(0)
B, H, T, d_k = 1, 2, 6, 4
q, k, v = (torch.randn(B, H, T, d_k, generator=g) for _ in range(3))
output, weights = scaled_dot_product_attention(q, k, v)
print("output: ", tuple(output.shape))
print("weights:", tuple(weights.shape))


def matrix_bytes(B, H, T, bytes_per_number=4):
    """Bytes of one (B, H, T, T) matrix: 4 * B * H * T**2 in float32."""
    return bytes_per_number * B * H * T * T


print("one float32 (B, H, T, T) matrix, for B = 1 and H = 32:")
for T_long in (2_048, 32_768, 131_072):
    print(f"  T = {T_long:>7,}: {matrix_bytes(1, 32, T_long) / 2**30:>9,.2f} GiB")

# %% [markdown]
# The output grows like $T$; the matrix grows like $T^2$. Doubling the text multiplies
# the matrix by four. At long context one such matrix would fill a GPU on its own, and
# the computation makes several. Yet each output row needs only a weighted sum of
# values. The rest of the page shows how to get it without ever holding a full row of
# weights, let alone the whole matrix.
#
# ## Softmax in one pass
#
# The stable softmax of a row $x_1, \dots, x_S$ reads the row twice. The first pass
# finds the maximum $m = \max_j x_j$. The second sums $\ell = \sum_j e^{x_j - m}$.
# Then $\operatorname{softmax}(x)_j = e^{x_j - m} / \ell$. Subtracting $m$ keeps every
# exponent at or below zero, so nothing overflows.
#
# The *online* softmax (Milakov and Gimelshein, 2018) finds $m$ and $\ell$ in a single
# pass. It keeps the largest entry seen so far, $m$, and the sum $\ell$ of
# $e^{x_i - m}$ over the entries seen so far. When a new entry $x_j$ arrives, the maximum
# may grow to $m' = \max(m, x_j)$. Every term already in $\ell$ was computed against
# the old maximum, and $e^{x_i - m'} = e^{x_i - m} \, e^{m - m'}$, so the whole sum is
# rescaled by one factor before the new term is added:
#
# $$
# m' = \max(m, x_j), \qquad \ell' = \ell \, e^{m - m'} + e^{x_j - m'}
# $$
#
# starting from $m = -\infty$, $\ell = 0$. After the last entry, $m$ and $\ell$ are
# exactly the two-pass values. `attn_ref.online_softmax` records them after every step.

# %%
x = torch.tensor([2.0, 1.0, 4.0, 3.0, 6.0, 0.0], dtype=torch.float64)
weights, state = online_softmax(x, trace=True)
print(f"{'j':>2} {'x_j':>5} {'m':>5} {'rescale':>9} {'ℓ':>8}")
for step in state.trace:
    j = step.cols.start
    print(
        f"{j:>2} {x[j].item():>5.1f} {step.row_max.item():>5.1f} {step.rescale.item():>9.4f} {step.row_sum.item():>8.4f}"
    )
print("two-pass: max", x.max().item(), " sum", round((x - x.max()).exp().sum().item(), 4))
print("largest |online - two-pass softmax|:", (weights - softmax(x)).abs().max().item())

# %% [markdown]
# The rescale factor $e^{m - m'}$ is 1 whenever the maximum stays put, and below 1 at each
# step where a larger entry arrives. At the first step it is 0: the sum was still empty.
# The final $m$ and $\ell$ are the two-pass ones, and so are the weights.
#
# Nothing overflows either. Here are logits near $10^4$ in float32, where `exp` itself
# overflows, and a pair of logits at $10^{30}$:


# %%
def show(values):
    return "[" + ", ".join(f"{v:.6g}" for v in values.tolist()) + "]"


for logits in (torch.tensor([1e4, 1e4 + 1.0, 1e4 + 2.0]), torch.tensor([1e30, 1e30, -1e30])):
    print("logits:          ", show(logits))
    print("  exp(logits):   ", show(logits.exp()))
    print("  exp / sum(exp):", show(logits.exp() / logits.exp().sum()))
    print("  online softmax:", show(online_softmax(logits)[0]))
print("float32 exp overflows above", math.log(torch.finfo(torch.float32).max))

# %% [markdown]
# The update does not have to take one entry at a time. A block of entries has its own
# maximum and its own sum; merging them into the running pair is the same rescaling.
# Any block size gives the same result:

# %%
row = 3 * torch.randn(200, generator=g, dtype=torch.float64)
for block_size in (1, 7, 64, 200):
    weights, state = online_softmax(row, block_size=block_size)
    print(
        f"block_size {block_size:>3}: {len(range(0, len(row), block_size)):>3} steps,"
        f" largest |online - softmax| = {(weights - torch.softmax(row, dim=0)).abs().max().item():.1e}"
    )

# %% [markdown]
# ## Tiled attention
#
# Attention applies a softmax to every row of scores and then mixes values with the
# weights. The online softmax lets the keys arrive in blocks; one more running
# quantity makes the values arrive with them. Take a block of queries $Q_i$ and a block of
# keys and values $K_j, V_j$. Their *tile* of scores is $S_{ij} = Q_i K_j^\top / \sqrt{d_k}$,
# of shape `(block_q, block_k)`. For each query row the running state is $m$, $\ell$
# and an unnormalised output $O$, and each tile updates it:
#
# $$
# m' = \max\bigl(m, \operatorname{rowmax} S_{ij}\bigr), \qquad
# P = e^{S_{ij} - m'}, \qquad
# \ell' = \ell \, e^{m - m'} + \operatorname{rowsum} P, \qquad
# O' = O \, e^{m - m'} + P \, V_j
# $$
#
# After the last block of keys, the output rows are $O / \ell$. The output is rescaled by
# the same factor as the sum, for the same reason: every term in it was weighted against
# the old maximum. `attn_ref.tiled_attention` runs this loop, queries outside and keys
# inside, which is the loop order of FlashAttention-2 (Dao, 2023). No tensor larger
# than one tile of scores is ever made.
#
# Two queries and six keys, in tiles of two by two, are small enough to follow by hand.
# After each tile, the trace holds the scores of the tile, the running $m$, the rescale
# factor, the running $\ell$, and the output so far: attention over the keys read so far.

# %%
g = torch.Generator().manual_seed(1)
q_small = torch.randn(2, 2, generator=g)  # (L, d_k): two queries
k_small = torch.randn(6, 2, generator=g)  # (S, d_k): six keys
v_small = torch.randn(6, 2, generator=g)  # (S, d_v): six values
out_small, state_small = tiled_attention(q_small, k_small, v_small, block_size=(2, 2), trace=True)
for step in state_small.trace:
    print(f"keys {step.cols.start}-{step.cols.stop - 1}, scores of queries 0-1:")
    print(step.scores)
    print("  m      ", step.row_max, "\n  rescale", step.rescale, "\n  ℓ      ", step.row_sum)
    print("  output so far\n", step.output)
expected, _ = scaled_dot_product_attention(q_small, k_small, v_small)
print("final output\n", out_small)
print("largest |tiled - attn_ref|:", (out_small - expected).abs().max().item())

# %% [markdown]
# Where a query's maximum grows, its rescale factor drops below 1 and shrinks what it had
# gathered; where the maximum stays, the factor is 1. The last "output so far" of each
# query is its output. `state.row_max` and `state.row_sum` keep $m$ and $\ell$ of every
# query; FlashAttention keeps their combination $m + \log \ell$ (the *log-sum-exp*, here
# `state.logsumexp`) for the backward pass.
#
# ## Exact, not approximate
#
# Tiling changes the order of the additions and nothing else, so the result should equal
# PyTorch's `scaled_dot_product_attention` up to float rounding. The cases below use
# lengths that are not multiples of the block size, a boolean mask with a query that
# may see no key at all, an additive mask, and causal attention with fewer queries than
# keys, all in float64.

# %%
g = torch.Generator().manual_seed(2)
B, H, L, S, d_k = 2, 3, 37, 45, 16
q, k, v = (torch.randn(B, H, n, d_k, generator=g, dtype=torch.float64) for n in (L, S, S))
boolean = torch.rand(L, S, generator=g) > 0.5
boolean[5] = False  # query 5 may see no key: its output is zero
cases = {
    "no mask": {},
    "boolean mask, a query with no key": {"attn_mask": boolean},
    "additive mask": {"attn_mask": torch.randn(L, S, generator=g, dtype=torch.float64)},
    "causal, L < S": {"is_causal": True},
}
for name, kwargs in cases.items():
    ours, state = tiled_attention(q, k, v, block_size=16, **kwargs)
    theirs = F.scaled_dot_product_attention(q, k, v, **kwargs)
    difference = (ours - theirs).abs().max().item()
    print(f"{name:<34} {state.tiles_computed:>2} tiles, |tiled - PyTorch| <= {difference:.1e}")

# %% [markdown]
# The gradients agree too. Autograd differentiates through the loop; the cell compares
# the gradients of a random linear function of the output with respect to $Q$, $K$ and $V$.


# %%
def gradients(attention, **kwargs):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    result = attention(*leaves, **kwargs)
    output = result[0] if isinstance(result, tuple) else result
    return torch.autograd.grad((output * direction).sum(), leaves)


direction = torch.randn(B, H, L, d_k, generator=g, dtype=torch.float64)
for name, kwargs in cases.items():
    ours = gradients(tiled_attention, block_size=16, **kwargs)
    theirs = gradients(F.scaled_dot_product_attention, **kwargs)
    largest = max((a - b).abs().max().item() for a, b in zip(ours, theirs, strict=True))
    print(f"{name:<34} largest |gradient difference| = {largest:.1e}")

# %% [markdown]
# The test suite also checks the claim behind all this: it records every tensor PyTorch
# allocates during a call of `tiled_attention`, and none has the shape `(..., L, S)`.
#
# ## Causal attention skips the tiles above the diagonal
#
# With a causal mask, query $i$ sees keys $0, \dots, i$. A tile whose first key comes after
# its last query is entirely masked: `tiled_attention(..., is_causal=True)` skips it,
# without computing or even reading it. Tiles on the diagonal are computed with the mask
# added; tiles below it need no mask at all. Here is the map for eight blocks of four
# tokens, drawn from the trace of the tiles `tiled_attention` computed.

# %%
block, n_blocks = 4, 8
x_grid = torch.zeros(n_blocks * block, 1)
_, state_grid = tiled_attention(x_grid, x_grid, x_grid, is_causal=True, block_size=block, trace=True)
grid = [["·"] * n_blocks for _ in range(n_blocks)]  # skipped, unless a step of the trace computed it
for step in state_grid.trace:
    crosses = step.cols[-1] > step.rows[0]  # some key after some query: the mask is needed
    grid[step.rows.start // block][step.cols.start // block] = "◩" if crosses else "■"
print("■ computed   ◩ computed, with the mask   · skipped")
print("             keys " + " ".join(f"{j * block:<2}" for j in range(n_blocks)))
for i, marks in enumerate(grid):
    print(f"queries {i * block:>2}-{i * block + block - 1:<2}     " + "  ".join(marks))
print(f"computed {state_grid.tiles_computed}, skipped {state_grid.tiles_skipped}")

# %% [markdown]
# With $n$ blocks on a side, $n(n-1)/2$ of the $n^2$ tiles lie above the diagonal, a
# fraction $(n-1)/(2n)$ that tends to one half. The counts below come from
# `tiled_attention` itself.

# %%
print(f"{'blocks n':>8} {'tiles':>6} {'computed':>9} {'skipped':>8} {'fraction':>9} {'(n-1)/(2n)':>11}")
for n in (1, 2, 4, 8, 16, 32):
    x_n = torch.zeros(n, 1)
    _, counted = tiled_attention(x_n, x_n, x_n, is_causal=True, block_size=1)
    total = counted.tiles_computed + counted.tiles_skipped
    print(
        f"{n:>8} {total:>6} {counted.tiles_computed:>9} {counted.tiles_skipped:>8}"
        f" {counted.tiles_skipped / total:>9.3f} {(n - 1) / (2 * n):>11.3f}"
    )

# %% [markdown]
# So causal attention does about half the work of full attention at long lengths, on top of
# the memory it saves. FlashAttention-2 skips the same tiles on a GPU, where the saved work
# is saved time.
#
# ## Memory, measured
#
# Counting tensors is one thing; the memory a process actually uses is another. The cell
# below measures it. `attn_ref.measure.peak_memory(fn)` runs `fn` in a copy of this
# process (made with `os.fork`) and reads from Linux how far that copy's resident
# memory rose, at its peak, while `fn` ran.
#
# Each measured call makes its own random inputs, so the figures include $Q$, $K$, $V$ and
# the output: everything one attention call needs. Three methods run on the same inputs,
# one sequence with one head of width 128, as $T$ doubles:
#
# - **naive**: `attn_ref.scaled_dot_product_attention`, which makes the full matrices;
# - **tiled**: `attn_ref.tiled_attention`, in tiles of 64 by 64;
# - **PyTorch**: `torch.nn.functional.scaled_dot_product_attention`, held to its
#   `FLASH_ATTENTION` backend, PyTorch's own fused CPU kernel.

# %%
B, H, d = 1, 1, 128
lengths = [256, 512, 1024, 2048]


def random_inputs(T):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, T, d, generator=g) for _ in range(3)]  # q, k, v: (B, H, T, d)


def pytorch_kernel(q, k, v):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v)


def on_new_inputs(method, T):
    return method(*random_inputs(T))  # the inputs are made inside the measured call: counted


methods = {
    "naive": lambda q, k, v: scaled_dot_product_attention(q, k, v),
    "tiled": lambda q, k, v: tiled_attention(q, k, v, block_size=64),
    "PyTorch": pytorch_kernel,
}
with torch.no_grad():
    peaks = {
        name: np.array([peak_memory(on_new_inputs, f, T) for T in lengths]) / 2**20
        for name, f in methods.items()
    }
formula = np.array([matrix_bytes(B, H, T) for T in lengths]) / 2**20  # MiB
print(f"{'T':>5} {'naive':>9} {'tiled':>9} {'PyTorch':>9} {'4·B·H·T²':>9}  (MiB)")
for i, T in enumerate(lengths):
    print(f"{T:>5}", *(f"{column[i]:>9.2f}" for column in (*peaks.values(), formula)))

# %% [markdown]
# How fast does each grow? A straight line through the three longest lengths on log-log
# axes gives the exponent $p$ in $\text{memory} \propto T^p$. Beside it, the memory each
# doubling of $T$ adds.

# %%
slopes = {name: np.polyfit(np.log(lengths[1:]), np.log(peak[1:]), 1)[0] for name, peak in peaks.items()}
for name, peak in peaks.items():
    added = ", ".join(f"{a:.2f}" for a in np.diff(peak))
    print(f"{name:<8} grows like T^{slopes[name]:.2f}; each doubling adds {added} MiB")
print(f"naive at T = {lengths[-1]}: {peaks['naive'][-1] / formula[-1]:.2f} times one (B, H, T, T) matrix")

fig, ax = plt.subplots(figsize=(5.6, 3.8), layout="constrained")
for (name, peak), marker in zip(peaks.items(), "os^", strict=True):
    ax.loglog(lengths, peak, marker + "-", label=f"{name} (slope {slopes[name]:.2f})")
ax.loglog(lengths, formula, "k--", linewidth=1, label="4·B·H·T² bytes: one matrix")
ax.set_xticks(lengths, [str(T) for T in lengths], minor=False)
ax.set(xlabel="sequence length T", ylabel="peak memory (MiB)", title="Peak memory of one attention call")
ax.legend(fontsize=8)
alt = f"Log-log plot of measured peak memory against T, from {lengths[0]} to {lengths[-1]}: " + "; ".join(
    f"{name} from {peak[0]:.2f} to {peak[-1]:.2f} MiB, slope {slopes[name]:.2f}"
    for name, peak in peaks.items()
)
display(HTML(figure_to_svg(fig, alt=alt)))

# %% [markdown]
# The naive method's memory grows like $T^2$: each doubling of $T$ adds about four times
# what the previous one added, and the total sits a fixed multiple above one
# `(B, H, T, T)` matrix, because `attn_ref`'s softmax holds the scores, the scores minus
# their maximum, their exponentials and the weights at the same moment. The tiled
# method's memory grows like $T$: it is the inputs and the output, plus a fixed cost (a
# few tiles, and the Python loop's own bookkeeping) that does not grow with $T$. That
# fixed cost still weighs at these lengths, which is why the fitted slope is below one,
# while each doubling adds about twice what the one before added: the mark of linear
# growth, as four times is the mark of quadratic growth. PyTorch's kernel also
# keeps only tiles beside its inputs and output. Its source picks larger tiles for longer
# sequences, so its fixed cost steps up on the way.
#
# <details class="note">
# <summary>Going deeper: how <code>peak_memory</code> measures</summary>
#
# Linux keeps, for every process, its resident memory and the highest value it has
# reached (`VmRSS` and `VmHWM` in `/proc/self/status`). Writing `5` to
# `/proc/self/clear_refs` resets the high mark to the current value. The forked copy does
# that, runs the function, and reads the mark again.
#
# Two details make the figure follow the tensors. First, `malloc` normally keeps freed
# memory for reuse, so a later allocation can land in memory that is already counted; the
# copy asks glibc's `malloc` to give every allocation of 4 KiB or more its own pages and
# to return them when freed. Second, a forked copy reads PyTorch's machine code from its
# libraries page by page as it first runs it, and those pages count as resident too
# (`RssFile`); their growth is subtracted. The measurement runs on one thread. The test
# suite checks it on tensors of known size.
#
# </details>
#
# ## What a GPU adds
#
# On a CPU, tiling saves memory and, on this page, nothing else. FlashAttention's title
# promises speed as well, and the reason lies in the GPU's memory hierarchy. A GPU holds
# its tensors in large *high-bandwidth memory* (HBM). It computes on data in a small,
# much faster on-chip *SRAM*. Every number a kernel uses must travel from HBM to SRAM,
# and every result back. The softmax and the masking do only a few operations per number
# moved, and the paper finds that, for standard attention, the traffic to HBM is what
# sets the runtime.
#
# Standard attention writes the `(N, N)` scores to HBM, reads them back for the softmax,
# writes the weights, and reads them again to mix the values. FlashAttention reads
# $Q$, $K$, $V$ in tiles that fit in SRAM and writes only the output, with $m$ and $\ell$
# for each query. Its Theorem 2, for
# sequence length $N$, head dimension $d$ and SRAM size $M$ (in numbers, $d \le M \le Nd$):
# standard attention needs $\Theta(Nd + N^2)$ HBM accesses, FlashAttention
# $\Theta(N^2 d^2 M^{-1})$.
#
# The function below counts the accesses of the forward pass line by line, from the
# paper's Algorithm 0 (standard) and the forward algorithm of its appendix
# (FlashAttention, with its block size $B_c = \lceil M / 4d \rceil$ keys, and
# $T_c = \lceil N / B_c \rceil$ passes over the queries and outputs):
#
# - standard: read $Q, K$, write $S$; read $S$, write $P$; read $P, V$, write $O$:
#   $4Nd + 4N^2$ numbers;
# - FlashAttention: read $K$ and $V$ once ($2Nd$); in each of the $T_c$ passes, read $Q$
#   and $O$ and write $O$, and read and write $m$ and $\ell$: $2Nd + T_c(3Nd + 4N)$.
#
# The GPU is the paper's example, an NVIDIA A100.

# %%
HBM_BANDWIDTH = 1.5e12  # bytes/s: an A100's "1.5-2.0TB/s" (Dao et al., 2022, Section 2.1), the lower end
SRAM_PER_SM = 192 * 1024  # bytes: "192KB of on-chip SRAM per each of 108 streaming multiprocessors"


def hbm_accesses(N, d, M):
    """Numbers read from or written to HBM by one head's forward pass: (standard, FlashAttention)."""
    standard = 4 * N * d + 4 * N * N
    B_c = math.ceil(M / (4 * d))  # keys per block
    T_c = math.ceil(N / B_c)  # passes over the queries and outputs
    flash = 2 * N * d + T_c * (3 * N * d + 4 * N)
    return standard, flash


M = SRAM_PER_SM // 2  # in fp16 numbers, 2 bytes each
heads = 64 * 16  # GPT-2 medium in the paper's Figure 2: batch 64, 16 heads, N = 1024, d = 64
standard, flash = (2 * heads * n for n in hbm_accesses(1024, 64, M))  # bytes
print(f"M = {M:,} fp16 numbers: blocks of {math.ceil(M / (4 * 64))} keys")
for name, traffic in (("standard", standard), ("FlashAttention", flash)):
    print(
        f"{name:<15} {traffic / 1e9:5.2f} GB, at least {traffic / HBM_BANDWIDTH * 1e3:.2f} ms at full bandwidth"
    )
print(f"ratio {standard / flash:.1f}")

# %% [markdown]
# The paper measured the same setting on an A100, forward and backward together (its
# Figure 2, left; the backward pass moves more). These are its numbers, not this
# machine's, followed by its headline results:

# %%
paper_figure_2 = {  # Dao et al. (2022), arXiv v2, Figure 2 left: GPT-2 medium, N = 1024, d = 64, fwd + bwd
    "GFLOPs": (66.6, 75.2),
    "HBM R/W (GB)": (40.3, 4.4),
    "Runtime (ms)": (41.7, 7.3),
}
print(f"{'':<14} {'standard':>9} {'FlashAttention':>15} {'ratio':>6}")
for quantity, (standard_value, flash_value) in paper_figure_2.items():
    print(f"{quantity:<14} {standard_value:>9} {flash_value:>15} {standard_value / flash_value:>6.1f}")
print("and its headline results, on A100 GPUs:")
paper_headlines = [  # Dao et al. (2022): abstract, Figure 1, Section 4.3
    ("training BERT-large (seq. 512), vs the MLPerf 1.1 record", "15% faster"),
    ("training GPT-2 (seq. 1K)", "3x faster"),
    ("long-range arena (seq. 1K-4K)", "2.4x faster"),
    ("attention in GPT-2 (Figure 1)", "7.6x faster"),
    ("memory, vs exact attention baselines", "up to 20x smaller"),
]
for setting, result in paper_headlines:
    print(f"{result:>18}  {setting}")

# %% [markdown]
# FlashAttention does *more* arithmetic (it recomputes the tiles in the backward pass
# instead of storing them) and is faster anyway, because it moves far less data. The
# count above predicts the size of the saving from the paper's own algorithms; the
# measured traffic is larger in both columns because it includes the backward pass.
#
# The ratio grows with $N$ (standard attention's $N^2$ term against FlashAttention's
# $N^2 d^2 / M$) and with the SRAM size $M$, and shrinks with the head dimension $d$:

# %%
Ns = 2 ** np.arange(8, 17)
fig, ax = plt.subplots(figsize=(5.6, 3.6), layout="constrained")
for d_head, style in ((64, "-"), (128, "--")):
    counts = np.array([hbm_accesses(int(n), d_head, M) for n in Ns]) * 2 / 2**20  # fp16 bytes, in MiB
    ax.loglog(Ns, counts[:, 0], "C0" + style, label=f"standard, d = {d_head}")
    ax.loglog(Ns, counts[:, 1], "C1" + style, label=f"FlashAttention, d = {d_head}")
ax.set(xlabel="sequence length N", ylabel="HBM traffic per head (MiB)", title="Forward pass, A100 SRAM, fp16")
ax.legend(fontsize=8)
ends = [np.divide(*hbm_accesses(int(Ns[-1]), d_head, M)) for d_head in (64, 128)]
alt = (
    f"Log-log plot of forward HBM traffic per head against N from {Ns[0]} to {Ns[-1]}: standard attention "
    f"stays above FlashAttention, by {ends[0]:.1f} times at the end for d = 64 and {ends[1]:.1f} for d = 128."
)
display(HTML(figure_to_svg(fig, alt=alt)))

# %%
N_ratio, sram_kib = 4096, (32, 64, 128, 192, 256)
print(f"standard / FlashAttention traffic at N = {N_ratio}, by SRAM size:")
print(f"{'SRAM (KiB)':>10} " + " ".join(f"{s:>6}" for s in sram_kib))
for d_head in (64, 128):
    ratios = [np.divide(*hbm_accesses(N_ratio, d_head, s * 1024 // 2)) for s in sram_kib]
    print(f"{'d = ' + str(d_head):>10} " + " ".join(f"{r:>6.1f}" for r in ratios))

# %% [markdown]
# Where the ratio falls below one, the blocks of keys that fit in SRAM are so small that
# reading the queries and outputs again on every pass costs more than the matrices it
# saves. The saving needs $d^2$ to be well below $M$, as the paper notes for its typical
# values, which is also why FlashAttention-2 tunes its block sizes to the head dimension
# and the GPU.
#
# A CPU can show two of FlashAttention's three claims: the result is exact, and the memory
# grows like $T$. It cannot show the speed. A CPU's caches are not a small scratchpad that
# a kernel fills by hand, and `attn_ref.tiled_attention` is a Python loop that launches a
# dozen small PyTorch operations per tile. Here are its times on this machine, against
# the naive function and PyTorch's fused CPU kernel, which runs the same tiled algorithm
# in C++:


# %%
def median_ms(call, repeats=3):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


T_time = 1024
q, k, v = random_inputs(T_time)
with torch.no_grad():
    timings = {
        "naive (attn_ref)": median_ms(lambda: scaled_dot_product_attention(q, k, v)),
        "tiled, blocks of 64": median_ms(lambda: tiled_attention(q, k, v, block_size=64)),
        "tiled, blocks of 256": median_ms(lambda: tiled_attention(q, k, v, block_size=256)),
        "PyTorch's CPU kernel": median_ms(lambda: pytorch_kernel(q, k, v)),
    }
print(f"T = {T_time}, B = {B}, H = {H}, d = {d}, one thread:")
for name, ms in timings.items():
    print(f"  {name:<22} {ms:7.2f} ms")
print("fastest:", min(timings, key=timings.get))

# %% [markdown]
# The Python loop's time depends on the tile size: larger tiles mean far fewer Python
# steps, each doing more arithmetic. The naive function pays for
# writing and reading its `(T, T)` matrices. PyTorch's kernel runs the tiled algorithm
# without the interpreter. None of this says how a GPU kernel would compare: that depends
# on its memory traffic, which a CPU does not show.
#
# <details class="note">
# <summary>Going deeper: the two loop orders, and the backward pass</summary>
#
# FlashAttention's forward algorithm puts the keys and values in the outer loop and the
# queries inside. It then reads and writes each block of outputs, with its $m$ and $\ell$,
# once per block of keys: the $T_c$ passes counted above. FlashAttention-2 swaps the
# loops, as `tiled_attention` does. Each block of queries then keeps its running state
# on chip until its last key, and divides by $\ell$ once at the end. The blocks of
# queries are independent, so a GPU can give each its own processor.
#
# Autograd differentiates `tiled_attention` by storing what every tile computed, which
# brings back memory quadratic in $T$ (exercise 4). FlashAttention writes its backward
# pass by hand instead. It keeps only the output and the log-sum-exp of each query, and
# recomputes each tile's weights from $Q$, $K$ and the log-sum-exp when it needs them:
# more arithmetic, much less memory and traffic.
#
# </details>
#
# ## Summary
#
# - The online softmax keeps a running maximum $m$ and sum $\ell$. When the maximum grows,
#   the sum is multiplied by $e^{m_\text{old} - m_\text{new}}$. One pass gives exactly the
#   two-pass values, and no exponent is ever positive.
# - Tiled attention applies the same rescaling to a running output. Queries go in blocks,
#   keys and values stream past block by block, and nothing larger than one tile of
#   scores ever exists. The result equals PyTorch's to float rounding, masks, causal
#   attention and gradients included.
# - With a causal mask, the tiles above the diagonal are skipped: the fraction tends to
#   one half.
# - Measured here, naive attention's peak memory grows like $T^2$, the tiled version's and
#   PyTorch's kernel's like $T$. On a GPU the same tiling also cuts the traffic to
#   high-bandwidth memory, which is where FlashAttention's speed comes from.
#
# The memory measured at the longest length on this page:

# %%
print(f"peak memory at T = {lengths[-1]} (B = {B}, H = {H}, d = {d}), inputs and output included:")
for name, peak in peaks.items():
    print(f"  {name:<8} {peak[-1]:8.2f} MiB")
print(f"  one (B, H, T, T) float32 matrix: {formula[-1]:.2f} MiB")

# %% [markdown]
# ## Exercises
#
# **1. Merging two halves.** Milakov and Gimelshein show that the pairs $(m, \ell)$ of two
# parts of a row merge into the pair of the whole row:
# $m = \max(m_1, m_2)$, $\ell = \ell_1 e^{m_1 - m} + \ell_2 e^{m_2 - m}$. Check it: compute
# `online_softmax` on each half of a row, merge the two states, and compare with the
# state of the whole row.

# %% tags=["solution"]
row = 4 * torch.randn(101, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
_, first = online_softmax(row[:50])
_, second = online_softmax(row[50:])
_, whole = online_softmax(row)
m = torch.maximum(first.row_max, second.row_max)
ell = first.row_sum * (first.row_max - m).exp() + second.row_sum * (second.row_max - m).exp()
print("merged m:", m.item(), " whole m:", whole.row_max.item())
print("merged ℓ:", ell.item(), " whole ℓ:", whole.row_sum.item())

# %% [markdown]
# **2. New tokens after a cache.** With a KV cache, new queries attend to all the keys so
# far through a bottom-right causal mask
# (see [Generating text with a KV cache](../kv_cache/)). Run `tiled_attention` for 6 new
# queries over 10 keys with `attn_mask=causal_mask(6, 10, lower_right=True)` and check it
# against `scaled_dot_product_attention`. How many of its tiles (blocks of 2 by 4) hold no
# visible key, and how many does it skip? Why?

# %% tags=["solution"]
g5 = torch.Generator().manual_seed(6)
q_new, k_all, v_all = (torch.randn(n, 8, generator=g5) for n in (6, 10, 10))
mask = causal_mask(6, 10, lower_right=True)
ours, state = tiled_attention(q_new, k_all, v_all, attn_mask=mask, block_size=(2, 4))
expected, _ = scaled_dot_product_attention(q_new, k_all, v_all, attn_mask=mask)
print("largest difference:", (ours - expected).abs().max().item())
empty = sum(not mask[i : i + 2, j : j + 4].any() for i in range(0, 6, 2) for j in range(0, 10, 4))
print("tiles with no visible key:", empty, " skipped:", state.tiles_skipped)
# Only is_causal=True skips tiles, and it is top-left aligned. A mask passed as attn_mask is
# added tile by tile, never inspected ahead; skipping for a bottom-right mask would need the
# offset S - L in the test that decides which tiles lie above the diagonal.

# %% [markdown]
# **3. The log-sum-exp is enough.** FlashAttention's backward pass keeps, for each
# query, only $m + \log \ell$. Show that it recovers a full row of weights: for one
# query, compute its scores and $e^{s_j - (m + \log \ell)}$, and compare with the weights
# `scaled_dot_product_attention` returns.

# %% tags=["solution"]
g6 = torch.Generator().manual_seed(7)
q6, k6, v6 = (torch.randn(5, 4, generator=g6, dtype=torch.float64) for _ in range(3))
_, state6 = tiled_attention(q6, k6, v6, block_size=2)
_, weights6 = scaled_dot_product_attention(q6, k6, v6)
scores = q6[3] @ k6.T / math.sqrt(4)  # query 3's scores: (S,)
recovered = (scores - state6.logsumexp[3]).exp()
print("recovered:", recovered.numpy().round(4))
print("weights:  ", weights6[3].numpy().round(4))

# %% [markdown]
# **4. Autograd stores the tiles.** Measure the peak memory of a forward *and* backward
# pass (call `.sum().backward()` on the output) of the naive function and of the tiled one
# (tiles of 128), for one head of width 16 at T = 512 and 1024. How does each grow, and why?

# %% tags=["solution"]


def forward_backward(attention, T):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, T, 16, generator=g).requires_grad_() for _ in range(3))
    result = attention(q, k, v)
    (result[0] if isinstance(result, tuple) else result).sum().backward()


for name, attention in (
    ("naive", scaled_dot_product_attention),
    ("tiled", lambda q, k, v: tiled_attention(q, k, v, block_size=128)),
):
    mib = [peak_memory(forward_backward, attention, T) / 2**20 for T in (512, 1024)]
    print(f"{name}: {mib[0]:6.2f} MiB at T = 512, {mib[1]:6.2f} MiB at T = 1024, ratio {mib[1] / mib[0]:.1f}")
# Both grow like T**2: to differentiate, autograd keeps every tile's scores and weights,
# which together make up the whole (T, T) matrix again. FlashAttention recomputes them instead.

# %% [markdown]
# ## References
#
# - Tri Dao, Daniel Y. Fu, Stefano Ermon, Atri Rudra, Christopher Ré.
#   [FlashAttention: Fast and Memory-Efficient Exact Attention with
#   IO-Awareness](https://arxiv.org/abs/2205.14135). NeurIPS 2022. The tiled algorithm,
#   Theorem 2 on HBM accesses, and the A100 figures used above; code at
#   [Dao-AILab/flash-attention](https://github.com/Dao-AILab/flash-attention).
# - Tri Dao. [FlashAttention-2: Faster Attention with Better Parallelism and Work
#   Partitioning](https://arxiv.org/abs/2307.08691). 2023. Queries in the outer loop, one
#   division at the end, causal tiles skipped.
# - Maxim Milakov, Natalia Gimelshein. [Online normalizer calculation for
#   softmax](https://arxiv.org/abs/1805.02867). 2018. The one-pass softmax and the merge
#   of two partial results.
# - PyTorch: [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html),
#   [`sdpa_kernel`](https://docs.pytorch.org/docs/stable/generated/torch.nn.attention.sdpa_kernel.html),
#   and its CPU kernel's source,
#   [`FlashAttentionKernel.cpp`](https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cpu/FlashAttentionKernel.cpp),
#   which works in blocks of queries and keys too.

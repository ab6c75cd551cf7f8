# %% [markdown]
# # Batch invariance: the same request, the same bits, in any batch
#
# Send a server the same prompt twice, with greedy decoding, and the two answers can
# differ. Nothing is random: in a dense model the difference comes from how many
# other requests, and how long, shared each forward pass, not from what they contain
# (in a mixture of experts, what they contain decides how many tokens reach each
# expert). A kernel splits its
# sums by how much work it was given, and floating-point addition can give other bits
# when the order changes. This page
# finds where a request's numbers come to depend on its batch (attention split along
# the keys, chunked prefill, the linear layers), counts the greedy tokens that flip
# because of it, and makes every reduction follow an order fixed by the request
# alone, so that its numbers are the same bits in any batch. Each claim of invariance
# is checked with `torch.equal`, bit for bit; how many bits or tokens change in the
# other cases is what the machine that built this page printed.
#
# It assumes [Serving attention](serving_batches.md) (the paged pool and `serve`) and
# split-K decoding from [Serving long contexts](serving_long_contexts.md#split-k-decoding).
# Shapes follow the site's [notation](../notation.md).
#
# The picture is one query and its 40 keys. A decoding kernel splits the keys among
# its workers, so that they stay busy: with 4 workers, one request gets 4 splits, two
# requests get 2 splits each, four requests 1. Each split's sum is added in its own
# order, so the number printed beside each row can change in its last digits when the
# batch does (two rows may agree by chance). The bottom row splits at a fixed *size*, 16 keys: its boundaries
# are the same in every batch, and so are its bits. (The picture's folded code also
# holds the page's imports.)

# %% tags=["plot"]
import functools
import operator
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attn_ref.decoder import TinyDecoder
from attn_ref.diagrams import canvas, grid, note
from attn_ref.plotting import figure_to_svg
from attn_ref.serving import (
    FixedOrderLinear,
    PagedKVCache,
    Request,
    batch_invariant,
    fixed_order_sum,
    serve,
    split_bounds,
    split_kv_attention,
)

torch.set_grad_enabled(False)  # inference only: no gradients
# one thread everywhere; the instruction set still moves the last bits printed
torch.set_num_threads(1)


def wrap(text):
    """Printed text in lines of at most 79 characters."""
    return textwrap.fill(text, width=79, subsequent_indent="    ")


TAB10 = {"cmap": "tab10", "vmax": 10}  # value i + 0.5: tab10's i-th colour
g = torch.Generator().manual_seed(0)
q_pic = torch.randn(1, 1, 1, 8, generator=g)  # (B, H, 1, d_k): one query
k_pic, v_pic = torch.randn(2, 1, 1, 40, 8, generator=g)  # (B, H_kv, S, d)
sees_all = torch.ones(1, 40, dtype=torch.bool)  # (L, S)
picture_rows = []  # (label, boundaries, first output number)
for requests in (1, 2, 4):
    count = 4 // requests
    out = split_kv_attention(q_pic, k_pic, v_pic, sees_all, num_splits=count)
    bounds = split_bounds(40, num_splits=count)
    label = f"{requests} request{'s' * (requests > 1)}: {count} split"
    picture_rows.append((label + "s" * (count > 1), bounds, out[0, 0, 0, 0]))
out = split_kv_attention(q_pic, k_pic, v_pic, sees_all, split_size=16)
picture_rows.append(
    (
        "any batch: splits of 16",
        split_bounds(40, split_size=16),
        out[0, 0, 0, 0],
    )
)
fig, ax = canvas(9.6, 9.4)
for row, (label, bounds, first) in enumerate(picture_rows):
    y = 0.4 + 2.3 * row
    colours = np.searchsorted(bounds, np.arange(40), side="right") - 0.5
    note(ax, 0.2, y, label, ha="left", fontsize=10)
    note(ax, 9.4, y, f"{first.item():.9f}", ha="right", fontsize=10)
    grid(
        ax,
        colours % 2 + 0.5 + 2 * (row == 3),
        0.2,
        y + 0.5,
        **TAB10,
        cell=0.23,
    )
    for b in bounds[1:-1]:  # each boundary's position under the row
        note(ax, 0.2 + 0.23 * b, y + 1.45, str(b), fontsize=9)
figure_to_svg(
    fig,
    alt="Four rows of 40 key cells, coloured by split. One request: 4 splits"
    " at 10, 20, 30; two requests: 2 splits at 20; four requests: one split;"
    " any batch: splits of 16, at 16 and 32. Beside each row, the first number"
    " of the query's output: "
    + ", ".join(f"{first.item():.9f}" for _, _, first in picture_rows)
    + ".",
)

# %% [markdown]
# ## Float addition is not associative
#
# In float32, $10^8 + 1$ rounds back to $10^8$: float32 numbers near $10^8$ are 8 apart,
# and 1 is less than half that gap. So the
# same four numbers summed in two orders give two answers.

# %%
x = torch.tensor([1e8, 1.0, -1e8, 1.0])
print("((1e8 + 1) - 1e8) + 1 =", (((x[0] + x[1]) + x[2]) + x[3]).item())
print("(1e8 - 1e8) + (1 + 1) =", ((x[0] + x[2]) + (x[1] + x[3])).item())

# %% [markdown]
# Real sums lose less than that, but they lose something at almost every addition.
# `attn_ref.serving.fixed_order_sum` adds in halves: for eight terms,
#
# $$
# \begin{aligned}
# &\bigl((x_0 + x_4) + (x_2 + x_6)\bigr) \\
# &\quad + \bigl((x_1 + x_5) + (x_3 + x_7)\bigr).
# \end{aligned}
# $$
#
# Below, 4,096 numbers are cut into 1, 2, 4 and 8 parts, each part is summed that
# way, and the parts are added left to right, as workers' results would be. The
# exact sum, in float64, is the reference.

# %%
g = torch.Generator().manual_seed(1)
numbers = torch.randn(4096, generator=g)  # float32
exact = numbers.double().sum().item()
part_sums = {}
for parts in (1, 2, 4, 8):
    pieces = [fixed_order_sum(piece) for piece in numbers.chunk(parts)]
    part_sums[parts] = functools.reduce(operator.add, pieces)  # in order
    total = part_sums[parts].item()
    print(
        f"{parts} part{'s' * (parts > 1)}: {total:.9f},"
        f" off the exact sum by {total - exact:.1e}"
    )

# %% [markdown]
# Every total is within a few float32 roundings of the exact sum, and none of these
# orders (each a tree of pairwise sums) is the better one. Two orders can agree by
# chance, but nothing promises it: a reduction gives the same bits only when the same
# numbers are added in the same order.
#
# ## One query, split four ways
#
# Split-K decoding (Flash-Decoding) gives each worker a share of one query's keys.
# Worker $i$ returns its maximum score $m_i$, its sum $\ell_i = \sum_j e^{s_j - m_i}$
# and its output $O_i$, and the merge weighs each output by its share of the
# softmax's denominator:
#
# $$
# O = \frac{\sum_i w_i\, O_i}{\sum_i w_i}, \qquad w_i = e^{m_i - M}\,\ell_i, \quad
# M = \max_i m_i .
# $$
#
# `attn_ref.serving.split_kv_attention` computes this for each query on its own, every
# sum a `fixed_order_sum`. Here one query of 64 numbers meets 1,000 keys, split into 1,
# 2, 4 and 8 even shares; each output is compared with the one-split output and with
# attention in float64.

# %%
g = torch.Generator().manual_seed(2)
q1 = torch.randn(1, 1, 1, 64, generator=g)  # (B, H, 1, d_k)
keys, values = torch.randn(2, 1, 1, 1000, 64, generator=g)  # (B, H, S, d)
sees = torch.ones(1, 1000, dtype=torch.bool)  # (L, S): every key
scores64 = (q1.double() @ keys.double().mT) / 8  # (1, 1, 1, S)
exact_out = scores64.softmax(-1) @ values.double()  # (1, 1, 1, 64)
split_outs = {
    n: split_kv_attention(q1, keys, values, sees, num_splits=n)
    for n in (1, 2, 4, 8)
}
print("splits  numbers unlike 1 split  largest gap  largest error")
for n, out in split_outs.items():
    unlike = int((out != split_outs[1]).sum())
    gap = (out - split_outs[1]).abs().max().item()
    error = (out.double() - exact_out).abs().max().item()
    print(f"{n:>6} {unlike:>20} of 64 {gap:>12.1e} {error:>14.1e}")

# %% [markdown]
# Every split count is within float32 rounding of the exact output, none of them
# systematically closer; here most of the
# 64 numbers differ between them in their last bits (the count is what this machine
# printed: which bits differ depends on the data). The decision that matters is who
# picks the count.
#
# ## The batch picks the split count
#
# A GPU kernel picks the number of splits so that its processors stay busy: a request
# decoding alone gets many, a full batch few or none. FlashAttention chooses it by a
# heuristic of this kind; Tri Dao, asked whether its kernel is batch invariant,
# answered: "I don't think it's batch invariant unless you fix the split-KV size"
# (flash-attention #1897). vLLM's PagedAttention kernel (in its first engine) chose
# between one pass and partitions of 512 keys by the number of requests in the batch
# and the longest of them (`num_seqs * num_heads > 512`, `max_seq_len`).
#
# The cell emulates a kernel with 8 workers: `max(1, 8 // batch)` splits for a batch
# of `batch` requests. One request's decoding query runs in batches of 1 to 8 (the
# others in the batch do not change its arithmetic, only the count does), once with
# that count and once with splits of 16 keys.


# %%
def kernel_splits(batch):
    """The split count of a kernel with 8 workers, for a batch of requests."""
    return max(1, 8 // batch)


# %%
g = torch.Generator().manual_seed(3)
# (B, H, 1, d_k): a decoding step
q_row = torch.randn(1, 4, 1, 16, generator=g)
k_row, v_row = torch.randn(2, 1, 4, 300, 16, generator=g)  # 300 cached keys
sees_row = torch.ones(1, 300, dtype=torch.bool)
counted = {}  # batch size -> the row's output with the batch's split count
fixed = {}  # batch size -> the row's output with splits of 16
for batch in range(1, 9):
    n = kernel_splits(batch)
    counted[batch] = split_kv_attention(
        q_row, k_row, v_row, sees_row, num_splits=n
    )
    fixed[batch] = split_kv_attention(
        q_row, k_row, v_row, sees_row, split_size=16
    )
print("batch  splits  same bits as alone: by count  by size 16")
for batch in counted:
    by_count = torch.equal(counted[batch], counted[1])
    by_size = torch.equal(fixed[batch], fixed[1])
    n = kernel_splits(batch)
    print(f"{batch:>5} {n:>7} {by_count!s:>28} {by_size!s:>11}")

# %% [markdown]
# With the count from the batch, the row's bits changed wherever the by-count column
# says False (another count can give the same bits by chance, nothing more), and they
# cannot change while the count stays (batches of 5 to 8 all get one split: the same
# computation). With a fixed split size the row is the same in every batch, by
# construction: the boundaries are 0, 16, 32, ..., fixed by the key positions alone.
# In this emulation the batch reaches the row only through the split count, so the
# right column is the same call every time; exercise 1 puts the row beside 7 other
# requests in one call. *Fixed* is the word that matters: a split size chosen by the
# batch is no better than a count chosen by it, and Thinking Machines' post points
# out that FlashInfer's balanced scheduling "chooses the largest split-size that can
# still saturate all the GPU's cores", which is not batch invariant.
#
# <details class="note">
# <summary>Going deeper: why "the same bits" holds on every machine</summary>
#
# PyTorch's CPU kernels may reduce differently by shape, by thread count and by
# instruction set (`ATEN_CPU_CAPABILITY`), so a bitwise claim cannot rest on
# `torch.sum` or on a matrix product. `split_kv_attention` builds each query's output
# from two kinds of operation only:
#
# - **elementwise IEEE arithmetic**: products, the additions of `fixed_order_sum`,
#   divisions, maxima. IEEE 754 rounds each one correctly, so its result depends on its
#   two operands and nothing else: not on where the numbers sit in a tensor, nor on
#   the vector width or the thread that computes them;
# - **exponentials**, which are not correctly rounded (a vectorised kernel and its
#   scalar tail may differ in the last bit). They are taken on one query's scores at a
#   time, a tensor whose shape depends on that query's position and the split size
#   only, so the same query meets the same call.
#
# A query sees its splits up to its last visible key; a split that is only partly
# visible is padded with masked keys, which add exact zeros. `fixed_order_sum` pads
# with zeros to a power of two, and more zeros at the end change no bit. So a query
# gives the same bits whether its keys end at its own position (decoding) or run on
# past it, masked (a chunk of a prompt). The test suite checks each bitwise claim
# (fixed split size, keys written first, fixed-order layers, the replayed batch,
# exercise 4) with `torch.equal`, under the native kernels and under
# `ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1`. "The same bits" means the same in
# any batch on one machine: the page's seeded inputs themselves can differ in their
# last bits from one instruction set to another (PyTorch draws normal numbers with a
# kernel of its own for each).
#
# </details>
#
# A fixed count of more than one split would not do either: "it's not sufficient to
# choose a fixed number of splits regardless of the batch size", in the words of
# Thinking Machines' post, since the count fixes the boundaries only together with
# the number of keys. The post splits 1,000 keys into four even splits of 250, or
# into splits of 256 (256 + 256 + 256 + 232); splits of a fixed size keep their
# boundaries as keys arrive. One split, that is no splitting, is invariant too, at
# the cost of parallelism.

# %%
for n_keys in (1000, 1001):
    by_count = split_bounds(n_keys, num_splits=4)
    by_size = split_bounds(n_keys, split_size=256)
    print(
        f"{n_keys} keys: 4 splits at {by_count[1:-1]}; splits of 256 at "
        f"{by_size[1:-1]}"
    )

# %% [markdown]
# ## Chunked prefill, aligned and unaligned
#
# A long prompt is fed in chunks (chunked prefill): each chunk's queries attend to the
# keys cached before it and to the chunk's own. A kernel may read the two apart, the
# cached keys from the pool and the new ones from the chunk, and split each part on
# its own; then a chunk that starts inside a split of 16 cuts that split in two
# (`cuts=` below), and its queries get other bits than in one pass over the prompt.
# SGLang's deterministic mode, with its FlashInfer backend, avoids this by cutting
# prompts only at multiples of the split size: "we adapted the chunking logic to align
# the truncation point with an integer multiple of the split_kv_size"
# ([SGLang's post](https://lmsys.org/blog/2025-09-22-sglang-deterministic/)). The other way out writes the chunk's keys into the cache before
# attention (Thinking Machines' fix), so that every query sees one sequence of keys,
# split on one grid.
#
# A prompt of 48 positions, 2 heads, is fed in chunks of 8 to 32, both ways, and each
# query's output is compared with one pass over the whole prompt.


# %%
def prefill(q, k, v, chunk, cut_at_chunk):
    """Causal attention of every query, the prompt fed in chunks of `chunk`."""
    T = q.shape[2]
    rows = []
    for start in range(0, T, chunk):
        stop = min(start + chunk, T)
        # (L, S): query start + i sees keys up to its own position
        allowed = torch.ones(stop, stop, dtype=torch.bool).tril()[start:]
        cuts = (start,) if cut_at_chunk and start else ()
        rows.append(
            split_kv_attention(
                q[:, :, start:stop],
                k[:, :, :stop],
                v[:, :, :stop],
                allowed,
                split_size=16,
                cuts=cuts,
            )
        )
    return torch.cat(rows, dim=2)  # (B, H, T, d)


# %%
g = torch.Generator().manual_seed(4)
q_p, k_p, v_p = torch.randn(3, 1, 2, 48, 8, generator=g)  # (B, H, T, d) each
one_pass = prefill(q_p, k_p, v_p, chunk=48, cut_at_chunk=False)
chunk_rows = {}  # (chunk, cut) -> queries with one pass's bits
for chunk in (8, 12, 16, 24, 32):
    for cut in (True, False):
        out = prefill(q_p, k_p, v_p, chunk, cut_at_chunk=cut)
        same = (out == one_pass).all(dim=-1).all(dim=1)[0]  # (T,)
        chunk_rows[chunk, cut] = int(same.sum())
print("chunk  queries with one pass's bits: chunk read apart  keys written")
for chunk in (8, 12, 16, 24, 32):
    apart, written = chunk_rows[chunk, True], chunk_rows[chunk, False]
    print(f"{chunk:>5} {apart:>32} of 48 {written:>8} of 48")

# %% [markdown]
# Read apart, chunks of 16 and 32 start on the grid and keep every bit, by
# construction. Chunks of 12 and 24, and the chunks of 8 at 8, 24 and 40, start
# inside a split: their queries are added in another order, and here they lost
# their bits (the first chunk is never cut); the chunks of 8 that start on the grid
# keep theirs. With the keys written first, every chunk size keeps every bit. `serve`
# works that way: it writes a step's keys into the pool, then reads each request's
# keys back as one sequence.
#
# ## The linear layers reduce too
#
# Attention is not the only sum. Every linear layer sums over its inputs, and a
# library's matrix product may pick another algorithm, and another order, for another
# number of rows: a single row is a matrix-vector product, many rows a
# matrix-matrix one. The cell sends one row through `nn.Linear(32, 128)` alone and as
# the first of $N$ rows, and counts the outputs whose bits differ; then the same with
# `attn_ref.serving.FixedOrderLinear`, whose every output is a `fixed_order_sum` of
# elementwise products.

# %%
torch.manual_seed(5)
layer = nn.Linear(32, 128)
fixed_layer = FixedOrderLinear(layer)  # the same weights
rows_in = torch.randn(64, 32)
linear_unlike = {}  # N -> (library, fixed order): outputs unlike alone
for N in (1, 2, 4, 16, 64):
    library = layer(rows_in[:N])[0] != layer(rows_in[:1])[0]
    ours = fixed_layer(rows_in[:N])[0] != fixed_layer(rows_in[:1])[0]
    linear_unlike[N] = (int(library.sum()), int(ours.sum()))
print("rows  outputs unlike the row alone: nn.Linear  FixedOrderLinear")
for N, (library, ours) in linear_unlike.items():
    print(f"{N:>4} {library:>35} {ours:>17}")

# %% [markdown]
# Wherever the `nn.Linear` column is not 0, the library's product gave the row other
# bits when it shared the call (the counts are this machine's; another CPU, or another
# thread count, may print others). The fixed-order layer never does, by construction.
#
# A decoder has more of this. Each layer norm sums over its row. And even an
# elementwise function can depend on the tensor a value sits in: a kernel may compute
# a single value by one code path and a vectorised run of values by another, and for
# a function such as the exact GELU (an `erf`) the paths may round differently. The
# cell applies `F.gelu` to 4 rows of 128 values at once, and to each value alone.

# %%
gelu_in = torch.randn(4, 128, generator=torch.Generator().manual_seed(7))
together_gelu = F.gelu(gelu_in)
alone_gelu = torch.stack([F.gelu(x[None])[0] for x in gelu_in.flatten()])
gelu_unlike = int((alone_gelu != together_gelu.flatten()).sum())
print(
    f"F.gelu, each value alone: {gelu_unlike} of 512 values unlike in a batch"
)

# %% [markdown]
# Whatever this machine printed, nothing promises that the two paths agree.
# `attn_ref.serving.batch_invariant(model)` copies a decoder with every `nn.Linear`,
# `nn.LayerNorm` and `nn.GELU` replaced by a version that computes each row in a fixed
# order (the GELU one row at a time, so that every row meets the same call), on the
# same weights.
#
# ## A server's tokens, flipped by the batch
#
# What does this do to a request's text? Servers often compute in bfloat16, which
# keeps 8 significant bits where float32 keeps 24, so a difference in the last bits
# weighs far more. The cell serves 8 requests of 150 new tokens, arriving 3 steps
# apart, with the model in bfloat16 and attention split by the batch
# (`num_splits=kernel_splits`), each split's output stored in bfloat16 before the
# merge as vLLM's PagedAttention stores its partitions'; then it serves each request
# alone, and compares.
#
# As on the serving pages, the model's weights are random: every claim here is about
# computing the same thing in another order, which does not depend on what the
# weights are.

# %%
torch.manual_seed(0)
model = TinyDecoder(
    vocab_size=48, context_length=256, embed_dim=32, num_layers=2, num_heads=4
)
model = model.eval().to(torch.bfloat16)
H_kv, d_k = model.blocks[0].attn.num_kv_heads, model.blocks[0].attn.head_dim
g = torch.Generator().manual_seed(6)
stream = [
    Request(
        tuple(torch.randint(0, 48, (int(length),), generator=g).tolist()),
        150,
        arrival=3 * i,
    )
    for i, length in enumerate(torch.randint(8, 17, (8,), generator=g))
]


# %% [markdown]
# <details class="example">
# <summary>The page's helpers: a pool, and a stream served together and alone</summary>
#
# `new_pool` makes an empty paged cache of bfloat16 keys and values, blocks of 16;
# `served` serves the stream with a given engine and attention, then each request
# alone, and returns the run together, and each request's logits and tokens alone.
#
# </details>


# %% tags=["deeper"]
def new_pool():
    """An empty paged cache of bfloat16 keys and values, for the model."""
    return PagedKVCache(2, 400, 16, H_kv, d_k, dtype=torch.bfloat16)


def served(engine, **attention):
    """The stream together, then each request alone."""
    together = serve(engine, stream, new_pool(), chunk_size=16, **attention)
    alone = [
        serve(engine, [r], new_pool(), chunk_size=16, **attention)
        for r in stream
    ]
    return (
        together,
        [run.logits[0] for run in alone],
        [run.tokens[0] for run in alone],
    )


# %% tags=["plot"]
by_batch, by_batch_logits, by_batch_tokens = served(
    model, num_splits=kernel_splits
)
flipped = {}  # request -> the first new token that differs from alone
for i in range(len(stream)):
    differ = (by_batch.tokens[i] != by_batch_tokens[i]).nonzero().flatten()
    if len(differ):
        flipped[i] = int(differ[0])
print(
    f"requests whose tokens differ from decoding alone: {len(flipped)} of"
    f" {len(stream)}"
)
print(wrap(f"first token that differs, by request: {flipped}"))

# %% [markdown]
# Each request decoded the same prompt with the same weights; only the batch around it
# changed, and any request listed above wrote other text from the listed token on.
# The number is this machine's (a count of flips is chaotic: one bit elsewhere moves
# it), but not an accident: Thinking Machines' post reports 80 different completions
# out of 1,000 identical requests ("Tell me about Richard Feynman") to
# Qwen/Qwen3-235B-A22B-Instruct-2507 at temperature 0.
#
# A greedy token flips where the two best logits are nearly tied, so that a
# difference in the last bits reorders them. The plot shows, for the requests decoded
# alone, the gap between the best and second-best logit at every step, and where the
# batched run first chose otherwise.

# %% tags=["plot"]
gaps = [  # (steps,) per request: best minus second-best logit, alone
    (lambda top: top[:, 0] - top[:, 1])(lg.float().topk(2, dim=-1).values)
    for lg in by_batch_logits
]
all_gaps = torch.cat(gaps)
flip_gaps = torch.tensor([gaps[i][step].item() for i, step in flipped.items()])
fig, ax = plt.subplots(figsize=(4.5, 3.0), layout="constrained")
bins = np.linspace(0, all_gaps.max().item(), 40)
ax.hist(all_gaps.numpy(), bins=bins, color="C0", label="every step")
for x_flip in flip_gaps.numpy():
    ax.axvline(x_flip, color="C1", linewidth=1.5)
ax.plot([], [], color="C1", label="first flip of a request")
ax.set(xlabel="best minus second-best logit", ylabel="steps")
ax.legend()
figure_to_svg(
    fig,
    alt="A histogram of the gap between the two best logits over every"
    " decoding step, most of them far from zero, with a vertical line at the"
    " gap of each"
    " request's first flipped token: "
    + ", ".join(f"{x:.3f}" for x in flip_gaps.tolist())
    + ".",
)
print(f"median gap over all steps:  {all_gaps.median().item():.3f}")
if flipped:
    print(f"largest gap at a first flip: {flip_gaps.max().item():.3f}")

# %% [markdown]
# Any flip sits at the far left: a step where the two best logits were nearly tied,
# so that the batch's other bits could swap them. In bfloat16 two logits can even be
# exactly equal: `argmax` then takes the first of them, and a batched run whose last
# bits differ can break the tie the other way (exercise 3 prints each flip's gap). From
# there on the two runs feed different tokens, and nothing brings them back together.
#
# A fixed split size removes attention's part. Does it make the server invariant?

# %%
fixed_run, fixed_logits, fixed_tokens = served(model, split_size=16)
same_logits = sum(
    torch.equal(fixed_run.logits[i], fixed_logits[i])
    for i in range(len(stream))
)
same_tokens = sum(
    torch.equal(fixed_run.tokens[i], fixed_tokens[i])
    for i in range(len(stream))
)
print(
    f"splits of 16: identical logits {same_logits} of {len(stream)},"
    f" identical tokens {same_tokens} of {len(stream)}"
)

# %% [markdown]
# A fixed split size removes the flips that came from attention, but it does not make
# the server invariant by construction: the library's bfloat16 matrix products and
# norms still sum in an order of their own choosing, which may change with the number
# of rows in a step, as the float32 products above did. Whether any logits moved is
# this machine's count, and another CPU may print another. Exercise 4 makes the whole
# server batch invariant, by construction.
#
# ## Summary
#
# - Float addition is not associative, so a sum's bits depend on its order; every
#   order is as accurate, none is the same.
# - A kernel that picks its split count from the batch gives a request other bits in
#   another batch; a fixed split *size* puts the boundaries at absolute key positions,
#   the same in every batch.
# - A chunk read apart from the cache must start on the split grid; writing its keys
#   into the cache first removes the condition.
# - Linear layers and norms reduce too, and even an elementwise GELU may take another
#   code path; computed row by row in a fixed order, with attention at a fixed split
#   size over keys written first, the whole forward pass of a request is the same
#   bits in any batch.
# - The greedy tokens that flip without this are those whose two best logits were
#   nearly or exactly tied; in bfloat16 such steps are common enough (exercise 3
#   prints how common here) that a long decode is likely to meet one.
#
# ## Common pitfalls
#
# **1. Testing invariance with `torch.allclose`.** Two outputs that differ in their
# last bits pass `allclose`, and the test that was to catch batch dependence passes
# with it. The cell compares the row of a batch of 2 with the row alone, from
# [the batch picks the split count](#the-batch-picks-the-split-count).

# %%
print("allclose:", torch.allclose(counted[2], counted[1]))
print("equal:   ", torch.equal(counted[2], counted[1]))

# %% [markdown]
# Invariance is a claim about bits: test it with `torch.equal`, and a tolerance only
# for the claim that the output is right.
#
# **2. A fixed number of splits.** It makes the split independent of the batch, but
# not of the number of keys: the boundaries of 4 splits over 48 keys are not those
# over 20. A prompt's query at position 19 meets 48 keys in one pass over the prompt
# and 20 keys when it is decoded alone. The cell counts the queries of the 48-token
# prompt whose bits are the same both ways, with 4 splits and with splits of 16.


# %%
def decode_rows(q, k, v, split_size=None, num_splits=None):
    """Each query alone over its own keys, as a decoding step sees them."""
    rows = []
    for p in range(q.shape[2]):
        count = num_splits and min(num_splits, p + 1)  # never more than keys
        rows.append(
            split_kv_attention(
                q[:, :, p : p + 1],
                k[:, :, : p + 1],
                v[:, :, : p + 1],
                torch.ones(1, p + 1, dtype=torch.bool),
                split_size=split_size,
                num_splits=count,
            )
        )
    return torch.cat(rows, dim=2)  # (B, H, T, d)


causal48 = torch.ones(48, 48, dtype=torch.bool).tril()
for split in ({"num_splits": 4}, {"split_size": 16}):
    prompt_rows = split_kv_attention(q_p, k_p, v_p, causal48, **split)
    alone_rows = decode_rows(q_p, k_p, v_p, **split)
    same = (prompt_rows == alone_rows).all(dim=-1).all(dim=1)[0]  # (T,)
    print(f"{split}: {int(same.sum())} of 48 queries with the same bits")

# %% [markdown]
# With 4 splits, position 0 has a single key either way and position 47 sees the same
# 48 keys: they agree by construction; any other query that agrees does so by the luck
# of rounding. With
# splits of 16 all agree by construction. Fix: `split_size=`, never `num_splits=`.
#
# **3. Calling a deterministic server batch invariant.** Here, running the same batch
# twice repeats every bit: these kernels are deterministic, as most GPU kernels of a
# forward pass are (Thinking Machines' post: "there is usually not a single atomic
# add present"). A reproducibility test that replays one batch passes, while the same
# request in another batch can differ. The cell serves the first two requests of the
# stream twice, with the batch's split count, and compares the first one's logits with
# its run alone (the second line shows whether they differed here).

# %%
pair = stream[:2]
first_run = serve(model, pair, new_pool(), num_splits=kernel_splits)
second_run = serve(model, pair, new_pool(), num_splits=kernel_splits)
print(
    "the same batch twice, equal logits:",
    torch.equal(first_run.logits[0], second_run.logits[0]),
)
print(
    "request 0 in the batch and alone, equal logits:",
    torch.equal(first_run.logits[0], by_batch_logits[0]),
)

# %% [markdown]
# Determinism is the same output for the same *batch*; batch invariance is the same
# output for the same *request*. Thinking Machines' point: the forward pass is run-to-run
# deterministic, yet "from the perspective of anybody using the inference server, the
# results are nondeterministic", because the batch around a request changes. Fix:
# test a request alone and in another batch with `torch.equal`, as exercise 4 does.
# [`torch.use_deterministic_algorithms(True)`](https://docs.pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html)
# is no fix either: it promises the same output "given the same input", and the batch
# is part of the input.
#
# ## Exercises
#
# **1. Other split sizes.** Compute the decoding row of
# [the batch picks the split count](#the-batch-picks-the-split-count) alone, and in
# one call beside 7 other requests' rows (random queries, keys and values of the same
# shape), with splits of 4, 32 and 128 keys. Check that its bits are the same, and
# print how many splits each size makes of its 300 keys.

# %% tags=["solution"]
g = torch.Generator().manual_seed(8)
crowd_q = torch.cat([q_row, torch.randn(7, 4, 1, 16, generator=g)])
crowd_k = torch.cat([k_row, torch.randn(7, 4, 300, 16, generator=g)])
crowd_v = torch.cat([v_row, torch.randn(7, 4, 300, 16, generator=g)])
for size in (4, 32, 128):
    alone = split_kv_attention(q_row, k_row, v_row, sees_row, split_size=size)
    beside = split_kv_attention(
        crowd_q, crowd_k, crowd_v, sees_row, split_size=size
    )
    same = torch.equal(beside[:1], alone)
    n = len(split_bounds(300, split_size=size)) - 1
    print(
        f"splits of {size:>3}: {n:>2} splits, same bits beside others: {same}"
    )

# %% [markdown]
# **2. Which chunks may be read apart?** With the chunk read apart from the cache,
# find every chunk size from 4 to 48 that keeps all 48 queries' bits.

# %% tags=["solution"]
keep_all = [
    chunk
    for chunk in range(4, 49)
    if torch.equal(prefill(q_p, k_p, v_p, chunk, cut_at_chunk=True), one_pass)
]
print("chunk sizes that keep every bit:", keep_all)

# %% [markdown]
# Multiples of 16 keep every bit by construction: every chunk starts on the grid.
# Here no other size did.
#
# **3. How close was each flip?** For each request whose tokens flipped, print the gap
# between the best two logits at its first flipped token, from its run alone, and
# what fraction of all steps had a gap that small or smaller.

# %% tags=["solution"]
for i, step in flipped.items():
    gap = gaps[i][step].item()
    share = (all_gaps <= gap).float().mean().item()
    print(
        f"request {i}: gap {gap:.4f}, smaller or equal at {share:.1%} of steps"
    )

# %% [markdown]
# **4. Make `serve` batch invariant.** Serve the stream so that every request gets the
# same logits, bit for bit, together, alone, and in another batch (the requests in
# reverse order of arrival, chunks of 5 tokens). Use what this page built.

# %% tags=["solution"]
# linear layers, norms and GELUs in a fixed order
invariant = batch_invariant(model)
short = [Request(r.prompt, 40, arrival=r.arrival) for r in stream]
reverse = [
    Request(r.prompt, 40, arrival=3 * (len(short) - 1 - i))
    for i, r in enumerate(short)
]
runs = {
    "together": serve(invariant, short, new_pool(), split_size=16).logits,
    "reversed": serve(
        invariant, reverse, new_pool(), chunk_size=5, split_size=16
    ).logits,
    "alone": {
        i: serve(invariant, [r], new_pool(), split_size=16).logits[0]
        for i, r in enumerate(short)
    },
}
identical = all(
    torch.equal(runs["together"][i], runs[name][i])
    for name in ("reversed", "alone")
    for i in range(len(short))
)
print("identical logits in every batch:", identical)

# %% [markdown]
# ## References
#
# - Horace He and Thinking Machines Lab. [Defeating Nondeterminism in LLM
#   Inference](https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/).
#   2025. Batch invariance; RMSNorm, matrix multiplication and attention made
#   batch-invariant; a fixed split size for attention, 1,000 keys split as
#   256 + 256 + 256 + 232 rather than four splits of 250; the KV cache updated before
#   the attention kernel; 80 unique completions of 1,000 identical requests at
#   temperature 0 (Qwen/Qwen3-235B-A22B-Instruct-2507), and one with batch-invariant
#   kernels; `torch.mm(a[:1], b)` differing from `torch.mm(a, b)[:1]`. Its companion
#   library: [batch_invariant_ops](https://github.com/thinking-machines-lab/batch_invariant_ops).
# - [Dao-AILab/flash-attention #1897](https://github.com/Dao-AILab/flash-attention/issues/1897).
#   "Is FlashAttention Kernel already batch invariant?"; Tri Dao: "I don't think it's
#   batch invariant unless you fix the split-KV size."
# - [flashinfer-ai/flashinfer #1675](https://github.com/flashinfer-ai/flashinfer/pull/1675).
#   "Batch-size invariant FA2 Prefill & Decode": "introduces a fixed split size to
#   produce exact precision when batch size changes."
# - Tri Dao. FlashAttention's [`num_splits_heuristic`](https://github.com/Dao-AILab/flash-attention/blob/765fbd928364e298a38a5e4b5c540d30daa1aecb/csrc/flash_attn/flash_api.cpp):
#   the split count that best fills the GPU's processors for `batch * heads` blocks
#   of queries; "If we have enough to almost fill the SMs, then just use 1 split".
# - vLLM. [PagedAttention's
#   kernel choice](https://github.com/vllm-project/vllm/blob/5da3a322a03e030fc0cfb8c164402600d1bfbd0e/vllm/attention/ops/paged_attn.py):
#   V1 (one pass) or V2 (partitions of 512, partial outputs in the output's dtype), V1
#   when `max_seq_len <= 8192 and (max_num_partitions == 1 or num_seqs * num_heads >
#   512)`. And its [batch invariance
#   mode](https://docs.vllm.ai/en/latest/features/batch_invariance/).
# - The SGLang Team. [Towards Deterministic Inference in SGLang and Reproducible RL
#   Training](https://lmsys.org/blog/2025-09-22-sglang-deterministic/). 2025.
#   Deterministic inference "while maintaining compatibility with chunked prefill,
#   CUDA graphs, radix cache, and non-greedy sampling"; chunked prefill truncated at
#   multiples of the split size, with its FlashInfer backend.
# - Tri Dao, Daniel Haziza, Francisco Massa, Grigory Sizov. [Flash-Decoding for
#   long-context inference](https://pytorch.org/blog/flash-decoding/). 2023. Split-K
#   decoding and its merge by log-sum-exp.
# - David Goldberg. [What Every Computer Scientist Should Know About Floating-Point
#   Arithmetic](https://docs.oracle.com/cd/E19957-01/806-3568/ncg_goldberg.html). 1991.
#   "Due to roundoff errors, the associative laws of algebra do not necessarily hold
#   for floating-point numbers."
#
# Next: [Prefix caching](prefix_caching.md) keeps the keys and values of finished
# requests for the next request with the same start, and relies on this page to give
# it the very same bits.

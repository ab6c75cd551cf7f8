# %% [markdown]
# # Attention across processes: ring attention, zigzag, Ulysses and all-gather
#
# A sequence can outgrow one device: its keys and values, its activations, the work of
# attending to them. *Context parallelism* splits the sequence itself over $R$ devices,
# here $R$ processes on one machine. Each holds $T / R$ of the tokens, and every query
# must still meet every earlier key, wherever that key lives. This page builds the three
# ways it is done in practice, and runs each on real processes joined by
# `torch.distributed`:
#
# - *ring attention* (Liu et al., 2023): blocks of keys and values travel round a ring of
#   processes, and each merges what it has seen with the online softmax;
# - the *zigzag* layout, which gives every process the same share of a causal mask's work;
# - Llama 3's *all-gather* of the keys and values, and DeepSpeed-*Ulysses*, which trades
#   the sequence for the heads with an all-to-all.
#
# Each gives the output and the gradients of attention in one process, to float
# rounding, and the page checks it. It also measures what each process computes, sends
# and holds. It assumes tiled attention and the log-sum-exp merge
# ([Attention without the T×T matrix](efficient_attention.md), and split-K on
# [Serving long contexts](serving_long_contexts.md)), FlashAttention's backward pass
# ([Training attention](backward_pass.md)) and grouped key/value heads
# ([Generating text with a KV cache](kv_cache.md)). Shapes follow the site's
# [notation](../notation.md).
#
# Here is ring attention on 4 processes, drawn from a run of this page's code. Each
# process, a *rank*, keeps its own queries ($Q_r$) and holds one block of keys and
# values at a time ($KV_b$, coloured by the rank it came from). At each step a rank
# attends its queries to the block it holds and passes the block on, clockwise. After 4
# steps every rank has met every block. Under a causal mask a block whose keys all come
# after the rank's queries is skipped (hatched), but it still travels through the rank.

# %% tags=["plot"]
import torch

from attn_ref.context_parallel import launch, ring_attention, shard
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.plotting import figure_to_svg

torch.set_num_threads(1)  # results that do not depend on the machine's cores
RANKS = 10.0  # the colour map's range: rank r drawn in tab10's colour r

g = torch.Generator().manual_seed(0)
x16 = torch.randn(1, 1, 16, 4, generator=g)  # (B, H, T, d): 4 tokens a rank
picture_runs = launch(  # each rank returns (output, state)
    ring_attention,
    [(shard(x16, "contiguous", 4, r),) * 3 for r in range(4)],
    layout="contiguous",
)
picture_pairs = [
    state.pairs for _, state in picture_runs
]  # (step, q, k chunk)
corners = {0: (0.3, 1.2), 1: (3.1, 1.2), 2: (3.1, 3.2), 3: (0.3, 3.2)}
fig, ax = canvas(10.2, 10.6, scale=0.5)
for step in range(4):
    x0, y0 = 5.1 * (step % 2), 5.2 * (step // 2)
    note(ax, x0 + 2.55, y0 + 0.45, f"step {step}", fontsize=12)
    for r, (x, y) in corners.items():
        owner = (r - step) % 4
        computed = (step, r, owner) in picture_pairs[r]  # or held, skipped
        box = grid(
            ax,
            [[r + 0.5, owner + 0.5]],
            x0 + x,
            y0 + y,
            cmap="tab10",
            vmax=RANKS,
            labels=[[f"Q{r}", f"KV{owner}"]],
            mask=[[True, computed]],  # skipped: hatched, named below
            cell=0.8,
        )
        if not computed:
            # Mid grey: the dark drawing keeps words over the grid as they
            # are, and this one sits on hatched grey in both schemes.
            at = (box.x + 1.2, box.y + 0.4)
            note(ax, *at, f"KV{owner}", fontsize=10, color="0.5")
        name_y = box.y - 0.25 if r < 2 else box.y + box.height + 0.3
        note(ax, box.center[0], name_y, f"rank {r}", fontsize=10)
    for r in range(4):  # the ring: each rank passes its block to the next
        (xa, ya), (xb, yb) = corners[r], corners[(r + 1) % 4]
        start = {0: (xa + 1.6, ya + 0.4), 1: (xa + 0.8, ya + 0.8)}
        start |= {2: (xa, ya + 0.4), 3: (xa + 0.8, ya)}
        end = {0: (xb, yb + 0.4), 1: (xb + 0.8, yb)}
        end |= {2: (xb + 1.6, yb + 0.4), 3: (xb + 0.8, yb + 0.8)}
        (sx, sy), (ex, ey) = start[r], end[r]
        arrow(ax, (x0 + sx, y0 + sy), (x0 + ex, y0 + ey))
note(ax, 5.1, 10.2, "KVb: rank b's keys and values; hatched: skipped",
     fontsize=10)  # fmt: skip
skipped = [
    (step, r)
    for r in range(4)
    for step in range(4)
    if (step, r, (r - step) % 4) not in picture_pairs[r]
]
figure_to_svg(
    fig,
    alt="Four panels, steps 0 to 3 of ring attention on 4 ranks in a ring, "
    "each passing to the next clockwise. Rank r keeps its queries Q r and "
    "holds the keys and values of rank (r - step) mod 4. Skipped under the "
    "causal mask (hatched), as (step, rank): "
    + ", ".join(f"({s}, {r})" for s, r in skipped),
)

# %% [markdown]
# Rank 0 holds the first tokens, so its queries only ever need its own keys: it skips
# three of its four steps, while rank 3 works at every step. The section on zigzag
# fixes that. First, the ring itself.
#
# ## Splitting the sequence
#
# Rank $r$ of $R$ holds a *shard* of the sequence: here the $r$-th quarter, in order.
# `shard` cuts a tensor for one rank, along the token dimension, and `unshard` puts the
# ranks' shards back together.

# %%
import torch

from attn_ref.context_parallel import shard

T, R = 16, 4
positions = torch.arange(T)  # one number per token: its place in the sequence
for r in range(R):
    mine = shard(positions, "contiguous", R, r, dim=0)
    print(f"rank {r} holds tokens", mine.tolist())

# %% [markdown]
# Almost everything in a transformer layer works token by token: the projections that
# make queries, keys and values, the MLP, the norms. Each rank does those for its own
# tokens and never talks to another. Attention is the exception. Query $i$ needs keys
# $0, \dots, i$, so rank 3's queries need keys from every rank.
#
# ## The ring, followed in one process
#
# Before starting any process, follow one rank through the ring by hand. Rank 2 of 4
# holds queries 8 to 11. At step $s$ it holds the block of rank $(2 - s) \bmod 4$:
# its own, then rank 1's, rank 0's and rank 3's. For each block it computes attention
# over that block alone, with `tiled_attention`: its own block with the causal mask,
# an earlier block without one (each of its keys comes before each query), a later
# block not at all. That gives a partial output $O_s$ and, for each query, the
# log-sum-exp $\lambda_s$ of its scores in the block.
#
# Partial results merge as the blocks of the online softmax do. Two parts, with
# $\lambda = \log\left(e^{\lambda_1} + e^{\lambda_2}\right)$, give
#
# $$
# O = e^{\lambda_1 - \lambda} \, O_1 + e^{\lambda_2 - \lambda} \, O_2 ,
# $$
#
# each weighted by its share of the softmax's denominator. `merge_partials` computes
# this; [split-K decoding](serving_long_contexts.md#split-k-decoding) merges its parts
# the same way. The loop below prints, after each step, how far the merged output is
# from causal attention over all 16 tokens.

# %%
import torch
import torch.nn.functional as F

from attn_ref.context_parallel import shard
from attn_ref.serving import merge_partials
from attn_ref.tiled import tiled_attention

g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 1, 16, 8, generator=g) for _ in range(3))
expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
R, rank = 4, 2  # 4 ranks of 4 tokens; follow rank 2
q2 = shard(q, "contiguous", R, rank)  # (1, 1, 4, 8): its queries
out, lse = torch.zeros(1, 1, 4, 8), torch.full((1, 1, 4), -torch.inf)
for step in range(R):
    b = (rank - step) % R  # the block rank 2 holds at this step
    if b > rank:  # all of its keys come after all of rank 2's queries
        print(f"step {step}: block {b} skipped")
        continue
    kb, vb = (shard(x, "contiguous", R, b) for x in (k, v))
    part, state = tiled_attention(q2, kb, vb, is_causal=b == rank)
    out, lse = merge_partials(  # the running result and this block's
        torch.stack([out, part]), torch.stack([lse, state.logsumexp])
    )
    gap = (out - shard(expected, "contiguous", R, rank)).abs().max()
    print(f"step {step}: block {b}, largest error so far {gap:.1e}")

# %% [markdown]
# After its own block, rank 2's output is attention over keys 8 to 11 only, and after
# rank 1's over keys 4 to 11: both far from the answer, which needs keys 0 to 11.
# After rank 0's block, the last it needs, the error is float rounding. The order of
# the blocks does not matter, since the merge is the softmax's sum, regrouped.
#
# A rank never holds the whole sequence's keys and values, only its own block and the
# one or two passing through, and no rank ever holds the $T \times T$ scores. That is
# ring attention's point: the memory of one rank grows with its own share of the
# sequence, so $R$ ranks can hold a sequence $R$ times longer (Liu et al. train on
# sequences "up to device count times longer").
#
# ## On real processes
#
# `torch.distributed` joins $R$ processes into a *process group*. Each knows its rank
# and the group's size, and calls collective operations with the others, or sends a
# tensor to one of them. The *gloo* backend, which ships with PyTorch, does it on CPUs
# over TCP. Ring attention needs only two calls per step: `isend` the block this rank
# holds to rank $r + 1$, and `irecv` the next block from rank $r - 1$. Both return at
# once, so the rank attends to its block while the next one travels. That is the
# overlap of communication with computation in Liu et al.'s Algorithm 1.
#
# `attn_ref.context_parallel.launch` starts the ranks on this machine and returns what
# each returned. Each rank runs the function it is given on its own arguments; here,
# `forward_backward` runs `ring_attention` on the rank's shards, then the backward pass
# of the sum of `output * d_out`. The main process cuts the inputs, then puts the
# outputs and gradients back together.

# %%
import torch

from attn_ref.context_parallel import (
    forward_backward,
    launch,
    ring_attention,
    shard,
    unshard,
)

g = torch.Generator().manual_seed(1)
q, k, v, d_out = (
    torch.randn(1, 4, 64, 16, generator=g, dtype=torch.float64)
    for _ in range(4)
)  # (B, H, T, d)
R, layout = 4, "contiguous"
ranks = [[shard(x, layout, R, r) for x in (q, k, v, d_out)] for r in range(R)]
results = launch(
    forward_backward, [(ring_attention, *xs) for xs in ranks], layout=layout
)
out, dq, dk, dv = (
    unshard([result[i] for result in results], layout) for i in range(4)
)
print(len(results), "ranks; output", tuple(out.shape), "dK", tuple(dk.shape))

# %% [markdown]
# Are these the output and gradients of attention over the whole sequence? The check
# below compares them with PyTorch's `scaled_dot_product_attention` and with
# `attn_ref`'s own, differentiated by autograd, for 2 and 4 ranks and both layouts
# (the zigzag layout comes later), in float64.


# %% tags=["check"]
import torch.nn.functional as F

from attn_ref import scaled_dot_product_attention
from attn_ref.context_parallel import LAYOUTS
from attn_ref.multihead import repeat_kv_heads


def single_process(attention, q, k, v, d_out):
    """Output and gradients of causal attention in one process, by autograd."""
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    out = attention(*leaves)
    return (out.detach(), *torch.autograd.grad((out * d_out).sum(), leaves))


def pytorch_causal(q, k, v):
    return F.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True
    )


def attn_ref_causal(q, k, v):
    keys, values = (repeat_kv_heads(x, q.shape[1]) for x in (k, v))
    return scaled_dot_product_attention(q, keys, values, is_causal=True)[0]


def on_ranks(attention, R, layout, tensors, **options):
    """The output and gradients of attention on R ranks, put together."""
    shards = [[shard(x, layout, R, r) for x in tensors] for r in range(R)]
    results = launch(
        forward_backward,
        [(attention, *xs) for xs in shards],
        layout=layout,
        **options,
    )
    return [unshard([res[i] for res in results], layout) for i in range(4)]


def largest_errors(attention, tensors, runs):
    """The largest errors of output and gradients, per run and reference."""
    references = {
        "PyTorch": single_process(pytorch_causal, *tensors),
        "attn_ref": single_process(attn_ref_causal, *tensors),
    }
    rows = {}
    for R, layout in runs:
        got = on_ranks(attention, R, layout, tensors)
        for name, expected in references.items():
            rows[R, layout, name] = [
                float((a - b).abs().max())
                for a, b in zip(got, expected, strict=True)
            ]
    return rows


runs = [(R, layout) for R in (2, 4) for layout in LAYOUTS]
ring_errors = largest_errors(ring_attention, (q, k, v, d_out), runs)
print(" R  layout      against       O      dQ      dK      dV")
for (R, layout, name), errors in ring_errors.items():
    line = " ".join(f"{e:7.0e}" for e in errors)
    print(f"{R:>2}  {layout:<10}  {name:<8}  {line}")

# %% [markdown]
# Every difference is float64 rounding. The test suite checks the same equality in
# float32, on every run, within bounds derived from the arithmetic of each step.
#
# <details class="note">
# <summary>Going deeper: how <code>launch</code> starts the ranks, and the loop each runs</summary>
#
# `launch` starts one process per rank from a *fork server*: a process that imported
# PyTorch and `attn_ref` once, and copies itself for each rank (Python's `forkserver`
# start method; `spawn` where there is none). A rank can only run a function that it
# can import by name, which is why the ranks' functions live in `attn_ref` rather than
# in this notebook. A script that calls `launch` needs Python's
# `if __name__ == "__main__":` guard, since each rank imports the script first.
#
# The ranks meet through a key-value store on a port that the operating system chose
# free. Each joins a gloo process group with a timeout: a collective that waits longer
# for another rank fails with gloo's message, and `launch` stops every rank that runs
# past its limit, so a hung rank becomes an error rather than a hang. Each rank computes
# on one thread. Here is the forward pass of `ring_attention`, as each rank runs it:
#
# </details>

# %% tags=["deeper"]
import inspect

from attn_ref import context_parallel

print(inspect.getsource(context_parallel._ring_forward))

# %% [markdown]
# ## The backward pass: gradients travel home
#
# The backward pass recomputes the weights from the final log-sum-exp of each query,
# as FlashAttention's does (`flash_attention_backward`). So a rank can work out its
# queries' share of the gradients one block at a time, in any order. For the block of
# keys and values it holds, from rank $b$, its queries give
#
# $$
# dK_b^{(r)} = \text{scale} \cdot dS^\top Q_r , \qquad dV_b^{(r)} = P^\top dO_r ,
# $$
#
# where $P$ and $dS$ are the weights and score gradients between its queries and
# block $b$'s keys. Its $dQ_r$ stays with it. The gradients of block $b$ are the sum of
# every rank's share, $dK_b = \sum_r dK_b^{(r)}$, and they belong to rank $b$, which
# holds $K_b$.
#
# So the backward pass goes round the ring again, and each block carries two more
# tensors: the $dK_b$ and $dV_b$ gathered so far. At each step a rank adds its share
# and passes them on with the block. After $R$ steps the sums have visited every rank,
# and one last hop brings them home. The gradients printed above include this trip:
# $dK$ and $dV$ equal single-process attention's. Keys and values make $R - 1$ hops,
# their gradients $R$.
#
# ## Zigzag: the same work on every rank
#
# With a causal mask, query $i$ sees $i + 1$ keys. In the contiguous layout rank 0's
# queries see few keys and rank $R - 1$'s see many, so the last rank works while the
# others wait for it. The zigzag layout cuts the sequence into $2R$ chunks and gives
# rank $r$ chunks $r$ and $2R - 1 - r$: one from the start and its mirror from the end.
# Llama 3 trains with this assignment (Llama Team, 2024, section 3.3.2), and
# ring-flash-attention calls it zigzag.
#
# The picture shows the causal scores in chunks, each chunk of queries coloured by
# the rank that holds it, for 4 ranks. A hatched chunk needs no work.

# %% tags=["plot"]
import numpy as np

from attn_ref.context_parallel import chunk_ids, num_chunks

fig, ax = canvas(10.2, 6.2)
counts = {}  # layout: the chunks of scores each rank computes
for layout, x0 in (("contiguous", 0.9), ("zigzag", 5.9)):
    chunks = num_chunks(layout, 4)
    owner = {c: r for r in range(4) for c in chunk_ids(layout, 4, r)}
    colours = np.array(
        [[owner[a] + 0.5] * chunks for a in range(chunks)]
    )  # row a: the rank holding query chunk a
    visible = np.tri(chunks, dtype=bool)  # key chunk b <= query chunk a
    cell = 4.0 / chunks
    grid(
        ax, colours, x0, 1.3, cmap="tab10", vmax=RANKS, mask=visible,
        cell=cell, label=f"{layout}: {chunks} chunks",
    )  # fmt: skip
    counts[layout] = [
        int(sum(visible[a].sum() for a in chunk_ids(layout, 4, r)))
        for r in range(4)
    ]
    for a in range(chunks):
        note(ax, x0 - 0.15, 1.3 + (a + 0.5) * cell, f"{owner[a]}",
             fontsize=9, ha="right")  # fmt: skip
    note(ax, x0 + 2.0, 5.75, "chunks per rank: "
         + " ".join(str(c) for c in counts[layout]), fontsize=10)  # fmt: skip
figure_to_svg(
    fig,
    alt="Causal scores cut into chunks for 4 ranks, each row of chunks "
    "coloured by the rank holding its queries, chunks above the diagonal "
    "hatched. Contiguous, 4 chunks: ranks hold rows 0, 1, 2, 3 and compute "
    + ", ".join(map(str, counts["contiguous"]))
    + " chunks. Zigzag, 8 chunks: rows 0 to 7 belong to ranks 0, 1, 2, 3, 3, "
    "2, 1, 0, and each rank computes "
    + ", ".join(map(str, counts["zigzag"]))
    + " chunks, two of them on the diagonal.",
)

# %% [markdown]
# A contiguous rank $r$ computes $r + 1$ chunks, one on the diagonal. A zigzag rank
# computes $r + 1$ chunks for its early chunk and $2R - r$ for its late one: $2R + 1$
# whatever $r$ is, two of them on the diagonal. Its chunks are half as long, so each
# zigzag rank does $1 / R$ of the work: the average of the contiguous ranks'.
#
# Below, the real runs: 4 ranks attend 4,096 tokens (2 heads of width 64) in each
# layout, in tiles of 128 by 128. Each rank counts the tiles it computed, and the CPU
# time it spent on its own arithmetic.

# %% tags=["plot", "measured"]
import matplotlib.pyplot as plt

from attn_ref.context_parallel import cost_on_rank

g = torch.Generator().manual_seed(2)
qkv_long = [torch.randn(1, 2, 4_096, 64, generator=g) for _ in range(3)]
balance = {}  # layout: each rank's RankCost
for layout in LAYOUTS:
    shards = [[shard(x, layout, 4, r) for x in qkv_long] for r in range(4)]
    balance[layout] = launch(
        cost_on_rank,
        [("ring", *xs) for xs in shards],
        layout=layout,
        block_size=128,
    )
tiles_per_rank = {
    layout: [c.tiles_computed for c in costs]
    for layout, costs in balance.items()
}
print("rank        tiles        arithmetic (s)")
print("      contig.  zigzag    contig.  zigzag")
for r in range(4):
    c, z = balance["contiguous"][r], balance["zigzag"][r]
    print(
        f"{r:>4} {c.tiles_computed:>8} {z.tiles_computed:>7}",
        f"{c.compute_seconds:>10.2f} {z.compute_seconds:>7.2f}",
    )
busiest = {layout: max(tiles) for layout, tiles in tiles_per_rank.items()}
print(
    "busiest rank:", busiest["contiguous"], "tiles contiguous,",
    busiest["zigzag"], "zigzag; the same", sum(tiles_per_rank["zigzag"]),
    "in all",
)  # fmt: skip
fig, ax = plt.subplots(figsize=(4.6, 3.4), layout="constrained")
for offset, (layout, tiles) in zip(
    (-0.2, 0.2), tiles_per_rank.items(), strict=True
):
    ax.bar(np.arange(4) + offset, tiles, width=0.4, label=layout)
ax.set(xlabel="rank", ylabel="tiles computed", xticks=range(4))
ax.legend(loc="upper left")
figure_to_svg(
    fig,
    alt="Bars of tiles computed per rank, 4 ranks: contiguous "
    + ", ".join(map(str, tiles_per_rank["contiguous"]))
    + "; zigzag "
    + ", ".join(map(str, tiles_per_rank["zigzag"]))
    + ".",
)

# %% [markdown]
# The layouts compute the same tiles in all. Contiguous ranks get more the later
# their tokens; zigzag ranks all get the same number, fewer than the contiguous
# layout's last rank. Each rank's arithmetic time follows its tiles.
#
# What the model waits for is the slowest rank: a rank that finishes early has
# nothing to do until the next layer needs every rank's output. Timing that needs a
# core for each rank, and this machine has two, so the run below uses 2 ranks, on
# 8,192 tokens in tiles of 256. It prints each rank's tiles, its arithmetic, and the
# time from its call to its return.

# %% tags=["check", "measured"]
g = torch.Generator().manual_seed(5)
qkv_wall = [torch.randn(1, 2, 8_192, 64, generator=g) for _ in range(3)]
walls = {}  # layout: each rank's RankCost
for layout in LAYOUTS:
    shards = [[shard(x, layout, 2, r) for x in qkv_wall] for r in range(2)]
    walls[layout] = launch(
        cost_on_rank,
        [("ring", *xs) for xs in shards],
        layout=layout,
        block_size=256,
    )
print("layout      rank  tiles  arithmetic (s)  call (s)")
for layout, costs in walls.items():
    for r, c in enumerate(costs):
        print(
            f"{layout:<11} {r:>4} {c.tiles_computed:>6}",
            f"{c.compute_seconds:>15.2f} {c.wall_seconds:>9.2f}",
        )
for name, field in (
    ("arithmetic", "compute_seconds"),
    ("call", "wall_seconds"),
):
    slowest = {
        layout: max(getattr(c, field) for c in costs)
        for layout, costs in walls.items()
    }
    print(
        f"slowest {name}: contiguous {slowest['contiguous']:.2f} s,",
        f"zigzag {slowest['zigzag']:.2f} s",
    )

# %% [markdown]
# In the contiguous layout rank 1 does most of the arithmetic; in the zigzag layout
# the two ranks share it. With a core for each rank and nothing else to run, a call
# takes about its rank's arithmetic plus the hops, and the model waits for the
# slowest rank: the first of the last two lines. The calls' times are what the
# machine that built this page measured. When other programs share its cores, as
# they may while the site builds, the ranks also wait for a core, and their calls
# take longer than their arithmetic. Another machine prints other times, but the
# same tiles.
#
# ## All-gather and Ulysses
#
# The ring is one of three ways to bring keys to queries. The other two use collective
# operations, which involve every rank at once.
#
# **All-gather** (Llama 3). Every rank gathers every rank's keys and values, then
# attends its own queries to all of them. Llama 3's report gives two reasons to prefer
# it to the ring: masks other than causal (such as one document per sequence) are
# easier, and with grouped-query attention the keys and values are much smaller than
# the queries, so gathering them costs little next to the attention itself. Its
# backward pass sends each rank's share of the other blocks' $dK$ and $dV$ to their
# owners (a *reduce-scatter*). The price is memory: each rank holds the keys and
# values of the whole sequence.
#
# **Ulysses** (Jacobs et al., 2023). Each rank holds all $H$ heads of its $T / R$
# tokens. An *all-to-all* sends rank $j$ the $j$-th group of $H / R$ heads, from every
# rank. Afterwards each rank holds the whole sequence, for $H / R$ heads, and attends
# as one process would, head by head. A second all-to-all sends each rank's tokens
# back. Here it is for 4 ranks and 4 heads:

# %% tags=["plot"]
fig, ax = canvas(10.6, 6.4)
token_owner = np.repeat(np.arange(4), 1)[:, None] * np.ones((1, 4))  # (T, H)
head_owner = np.ones((4, 1)) * np.arange(4)[None, :]
for owners, x0, title in (
    (token_owner, 0.9, "before: rank r holds\nits tokens, all heads"),
    (head_owner, 6.5, "after: rank r holds\nall tokens, head r"),
):
    grid(
        ax, owners + 0.5, x0, 1.6, cmap="tab10", vmax=RANKS,
        labels=[[f"{int(o)}" for o in row] for row in owners],
        column_names=[f"h{h}" for h in range(4)],
    )  # fmt: skip
    note(ax, x0 + 2.0, 0.5, title, fontsize=10)
for t in range(4):
    note(
        ax,
        0.75,
        2.1 + t,
        f"tokens {4 * t}–{4 * t + 3}",
        fontsize=9,
        ha="right",
    )
arrow(ax, (5.1, 3.6), (6.3, 3.6))
note(ax, 5.7, 3.1, "all-to-all", fontsize=10)
note(ax, 5.3, 6.0, "each cell: the rank that holds it", fontsize=10)
figure_to_svg(
    fig,
    alt="Two 4 by 4 grids of 16 tokens (rows, 4 per rank) by 4 heads "
    "(columns), each cell coloured by the rank that holds it. Before the "
    "all-to-all, rows are coloured by rank: rank r holds its 4 tokens for "
    "every head. After, columns are: rank r holds head r for all 16 tokens.",
)

# %% [markdown]
# Each rank keeps one of the $R$ pieces it had and sends the other $R - 1$. With fewer
# key/value heads than ranks, each rank is sent a copy of the key/value head its query
# heads read. Both methods give attention over the whole sequence; the check below
# runs them as the ring was run, with 4 query heads sharing 2 key/value heads.

# %% tags=["check"]
gqa = [q, k[:, :2], v[:, :2], d_out]  # 4 query heads, 2 key/value heads
collective_errors = {}
for method in ("allgather", "ulysses"):
    attention = getattr(context_parallel, f"{method}_attention")
    collective_errors[method] = largest_errors(attention, gqa, runs)
print("method     R  layout      against       O      dQ      dK      dV")
for method, rows in collective_errors.items():
    for (R, layout, name), errors in rows.items():
        line = " ".join(f"{e:7.0e}" for e in errors)
        print(f"{method:<9} {R:>2}  {layout:<10}  {name:<8}  {line}")

# %% [markdown]
# **When Ulysses runs out of heads.** Ulysses gives each rank $H / R$ heads, so it
# cannot use more ranks than the model has heads, nor a number of ranks that does not
# divide them. Here 2 heads meet 4 ranks; each rank refuses before it communicates,
# and `launch` raises a `RankError` with the error of the first rank to fail.

# %%
import textwrap

import torch

from attn_ref.context_parallel import RankError, launch, ulysses_attention

x = torch.zeros(1, 2, 8, 16)  # (B, H, T / R, d): 2 heads, on each of 4 ranks
try:
    launch(ulysses_attention, [(x, x, x)] * 4)
except RankError as error:  # every rank fails alike: what it raised
    print(textwrap.fill(error.error, 79))

# %% [markdown]
# The ring and the all-gather split the sequence, not the heads, so they have no such
# limit. Fang and Zhao's unified sequence parallelism (USP) combines Ulysses and ring
# attention in one scheme; this page keeps to the three.
#
# ## What each rank sends
#
# Let $n = T / R$ be a rank's tokens, $d$ the head width, and $b = B \, n \, d$ the
# numbers in one head of one rank's tokens (4 bytes each in float32). In the forward
# pass:
#
# - the ring passes $R - 1$ blocks of keys and values: $2 (R - 1) H_{kv} \, b$;
# - the all-gather sends each rank's keys and values to the $R - 1$ others (a ring
#   all-gather sends one block per step), the same $2 (R - 1) H_{kv} \, b$;
# - Ulysses sends, of $Q$, $K$, $V$ and then $O$, all but the $1 / R$ it keeps:
#   $\frac{R - 1}{R} \left(2 H + 2 H'_{kv}\right) b$, with $H'_{kv} = \max(H_{kv}, R)$
#   counting copies of key/value heads.
#
# Since $b$ holds $T / R$ tokens, the ring and the all-gather send $(R - 1) / R$ of the
# whole sequence's keys and values: more ranks do not make that smaller, it grows
# towards all of them. Ulysses' bytes shrink like $1 / R$, so they stay the same when
# $T$ and $R$ grow together: the DeepSpeed team's argument for it. But Ulysses sends
# the queries and the outputs, $H$ heads each, where the others send only the
# $H_{kv}$ key/value heads, and grouped-query attention makes $H_{kv}$ small.
#
# The runs below measure it. Each rank reads from Linux how many bytes its process
# wrote while the forward pass ran (`wchar` in `/proc/self/io`, which counts what
# gloo writes to its sockets), beside the formula, `bytes_sent_per_rank`. Inputs are
# float32, 8 query heads of width 16.

# %% tags=["check", "measured"]
from attn_ref.context_parallel import METHODS, bytes_sent_per_rank

configs = [  # (T, R, H, H_kv)
    (512, 2, 8, 8), (1_024, 2, 8, 8), (1_024, 4, 8, 8),
    (1_024, 4, 4, 4), (1_024, 4, 8, 2),
]  # fmt: skip
sent = {}  # (T, R, H, H_kv, method): (measured, formula) bytes per rank
for T, R, H, H_kv in configs:
    g = torch.Generator().manual_seed(3)
    q_s, k_s, v_s = (
        torch.randn(1, heads, T, 16, generator=g) for heads in (H, H_kv, H_kv)
    )
    for method in METHODS:
        shards = [
            [shard(x, "zigzag", R, r) for x in (q_s, k_s, v_s)]
            for r in range(R)
        ]
        costs = launch(cost_on_rank, [(method, *xs) for xs in shards])
        formula = bytes_sent_per_rank(method, T, R, H, H_kv, 16)
        sent[T, R, H, H_kv, method] = (
            max(c.bytes_written for c in costs),
            formula,
        )
print("    T  R  H  H_kv   method     measured    formula  (KiB per rank)")
for (T, R, H, H_kv, method), (measured, formula) in sent.items():
    print(
        f"{T:>5} {R:>2} {H:>2} {H_kv:>4}   {method:<9}",
        f"{measured / 1024:>9.2f} {formula / 1024:>10.2f}",
    )

# %% [markdown]
# What each process wrote is the formula's bytes plus a little: gloo adds a header to
# every message it sends (the test suite checks the measured bytes against the formula
# with that allowance). Doubling $T$ doubles every method's bytes. Going from 2 to 4
# ranks raises the ring's and the all-gather's, from $2 H_{kv} b$ to $6 H_{kv} b$ on a
# shard half as long, and lowers Ulysses'. Halving the query and key/value heads
# together halves every method's bytes. With 2 key/value heads for 8 query heads, the ring and the all-gather send a
# quarter of what they sent with 8, while Ulysses still sends all the queries and
# outputs. The formula, drawn for more ranks than this
# machine runs:

# %% tags=["plot"]
R_axis = [2, 4, 8, 16, 32, 64]
fig, ax = plt.subplots(figsize=(4.8, 3.8), layout="constrained")
styles = {"ring": "o-", "ulysses": "s-"}
fewer = {}  # H_kv: the ranks from which Ulysses sends less than the ring
for H_kv, colour in ((8, "C0"), (2, "C1")):
    sends = {
        method: [  # the all-gather sends the ring's bytes
            bytes_sent_per_rank(method, 2**16, R, 64, H_kv, 128) / 2**20
            for R in R_axis
        ]
        for method in ("ring", "ulysses")
    }
    for method, mib in sends.items():
        name = "ring, all-gather" if method == "ring" else "Ulysses"
        ax.loglog(
            R_axis, mib, styles[method], color=colour,
            label=f"{name}, H_kv = {H_kv}",
        )  # fmt: skip
    pairs = zip(R_axis, sends["ulysses"], sends["ring"], strict=True)
    fewer[H_kv] = [R for R, ulysses, ring in pairs if ulysses < ring]
    print(
        f"H_kv = {H_kv}: Ulysses sends less than the ring at R =", fewer[H_kv]
    )
ax.set_xticks(R_axis, R_axis)
ax.set_yticks([64, 128, 256, 512, 1024], [64, 128, 256, 512, 1024])
ax.minorticks_off()
ax.set(xlabel="ranks R", ylabel="MiB sent per rank, forward")
fig.legend(loc="outside lower center", ncols=2)
figure_to_svg(
    fig,
    alt="Log-log plot of MiB each rank sends in one forward pass against the "
    "number of ranks, 2 to 64, for 65,536 tokens and 64 query heads of width "
    "128 in float32: the ring's and all-gather's bytes rise towards a "
    "constant, Ulysses' fall. Ulysses sends less than the ring at R = "
    + (", ".join(map(str, fewer[8])) or "none")
    + " with 8 key/value heads, and at R = "
    + (", ".join(map(str, fewer[2])) or "none of these")
    + " with 2.",
)

# %% [markdown]
# For this sequence of 65,536 tokens and 64 query heads, Ulysses sends less than the
# ring only with enough ranks, and with fewer key/value heads it needs more of them
# (the lines printed above the plot). Bytes are not time, either. The ring overlaps
# its hops with its arithmetic, and Liu et al. work out how large a block must be for
# the hops to hide behind the attention (section 3 of their paper). The all-gather
# and Ulysses' all-to-all come before the attention that needs their results, so
# their time is in the open; Llama 3's report says so of its all-gather, and finds it
# small beside the attention's $O(T^2)$ work.
#
# ## What each rank holds
#
# Each rank's memory is the other half of the story. The cell below makes each rank's
# shards of a 512-token sequence (16 heads of width 256, float32) and runs one forward
# pass, on 1, 2, 4 and 8 ranks; one process runs the three methods alike. Each rank
# measures how far its process's resident memory rose, at its peak
# (`peak_memory_here`, as [`peak_memory`](efficient_attention.md#memory-measured)
# measures it), and the table shows the largest rank's. A *shard* is one rank's part
# of one tensor, such as its queries.

# %% tags=["plot", "measured"]
from attn_ref.context_parallel import working_set_on_rank

T_mem, H_mem, d_mem, R_mem = 512, 16, 256, (1, 2, 4, 8)
held = {}  # (method, R): MiB, the largest of the ranks'
for method in METHODS:
    for R in R_mem:
        if R == 1 and method != "ring":
            held[method, 1] = held["ring", 1]  # one process: no communication
            continue
        peaks = launch(
            working_set_on_rank,
            [(method, 1, H_mem, H_mem, T_mem, d_mem)] * R,
            block_size=32,
        )
        held[method, R] = max(peaks) / 2**20
shard_mib = {R: T_mem // R * H_mem * d_mem * 4 / 2**20 for R in R_mem}
print("ranks  shard (MiB)   ring  all-gather  Ulysses   (MiB per rank)")
for R in R_mem:
    row = " ".join(f"{held[m, R]:>9.2f}" for m in METHODS)
    print(f"{R:>5} {shard_mib[R]:>12.2f} {row}")
print("in shards:", *(f"R = {R}: ring {held['ring', R] / shard_mib[R]:.1f},"
      for R in R_mem[1:]))  # fmt: skip
fig, ax = plt.subplots(figsize=(4.6, 3.8), layout="constrained")
for method, marker in zip(METHODS, "oxs", strict=True):
    name = {"allgather": "all-gather", "ulysses": "Ulysses"}.get(
        method, method
    )
    mib = [held[method, R] for R in R_mem]
    ax.loglog(R_mem, mib, marker + "-", label=name)
falling = [
    held["ring", 8] * 8 / R for R in R_mem
]  # T / R, through the ring's R = 8
ax.loglog(R_mem, falling, "k--", lw=1, label="falls as T/R")
ax.set_xticks(R_mem, R_mem)
ax.set_yticks([8, 16, 32, 64], [8, 16, 32, 64])
ax.minorticks_off()
ax.set(xlabel="ranks R", ylabel="peak MiB per rank")
fig.legend(loc="outside lower center", ncols=2)
figure_to_svg(
    fig,
    alt="Log-log plot of peak memory per rank against the number of ranks, "
    "1, 2, 4 and 8, for the ring, the all-gather and Ulysses, beside a line "
    "that falls as T/R through the ring's value at 8 ranks: "
    + "; ".join(
        f"{m} " + ", ".join(f"{held[m, R]:.1f}" for R in R_mem) + " MiB"
        for m in METHODS
    ),
)

# %% [markdown]
# Every tensor a ring or Ulysses rank holds has a shard's size: its own queries, keys,
# values and output, blocks in transit, the merge's temporaries (Ulysses holds all
# $T$ tokens, but for $H / R$ heads). So their memory falls as
# $T / R$ once the number of shards in flight stops growing: the ring holds one block
# in transit with 2 ranks, two (the one in use and the next) from 3 ranks on. Liu et
# al. count six blocks a host must hold: its queries, the current keys and values, the
# arriving ones, and its output. This implementation holds a few more, since its
# caller keeps the rank's own keys and values and the merge makes temporaries (the
# line under the table counts them).
#
# The all-gather's memory falls more slowly, towards a floor: each rank holds the
# keys and values of the whole sequence, whatever $R$ is. With grouped-query
# attention those are a fraction of the queries: the smallness that Llama 3's report
# counts on, there for the time the all-gather takes.
#
# ## Summary
#
# - Context parallelism gives each of $R$ ranks $T / R$ tokens. Only attention needs
#   other ranks' data: the keys and values of earlier tokens.
# - Ring attention passes blocks of keys and values round the ring and merges partial
#   outputs by their log-sum-exp, exactly. Its backward pass sends the blocks round
#   again, with their $dK$ and $dV$, which end where the block started.
# - Under a causal mask, contiguous shards give the last rank the most work. Zigzag
#   shards, chunks $r$ and $2R - 1 - r$, give every rank the same number of tiles.
# - The all-gather sends what the ring sends, but holds every key and value at once.
#   Ulysses sends all but $1 / R$ of its queries, keys, values and outputs, holds the
#   whole sequence for $H / R$ heads, and needs $R$ to divide $H$.
#
# ## Common pitfalls
#
# **1. Adding or averaging the partial outputs.** Each partial output is normalised by
# its own block's softmax sum, so `(out_a + out_b) / 2` gives every block the same
# weight, whatever share of the softmax it holds. The symptom: an output that is close
# but wrong, and only on ranks that merge more than one block. The fix is the
# log-sum-exp weighting above. For rank 2 of the walk-through:


# %% tags=["check"]
def rank_two_parts():
    """Rank 2's partial outputs over blocks 0, 1 and 2 of the walk-through."""
    parts = [
        tiled_attention(
            q16[..., tokens(2), :],
            k16[..., tokens(b), :],
            v16[..., tokens(b), :],
            is_causal=b == 2,
        )
        for b in (0, 1, 2)
    ]
    return [p for p, _ in parts], [s.logsumexp for _, s in parts]


def tokens(r):
    return slice(4 * r, 4 * r + 4)


g = torch.Generator().manual_seed(0)
q16, k16, v16 = (torch.randn(1, 1, 16, 8, generator=g) for _ in range(3))
rank_two = F.scaled_dot_product_attention(q16, k16, v16, is_causal=True)[
    ..., tokens(2), :
]
parts, lses = rank_two_parts()
merged, _ = merge_partials(torch.stack(parts), torch.stack(lses))
averaged = torch.stack(parts).mean(dim=0)
merge_gaps = {
    "average": float((averaged - rank_two).abs().max()),
    "log-sum-exp": float((merged - rank_two).abs().max()),
}
for name, gap in merge_gaps.items():
    print(f"{name:<12} largest error {gap:.1e}")

# %% [markdown]
# **2. A causal mask by local index.** In the zigzag layout a rank's tokens are not
# consecutive: rank 0 of 4 holds tokens 0 to 1 and 14 to 15 of 16. Code that builds
# the causal mask from the rank's own row numbers (`is_causal=True` over its shard)
# hides the wrong keys. The symptom: a wrong output for the late chunk only, with no
# error raised. The fix is to compare positions in the whole sequence
# (`token_positions`), as `attn_ref.context_parallel` does by chunk. Rotary embeddings
# need the same positions.

# %% tags=["check"]
order = torch.cat(
    [context_parallel.token_positions(16, "zigzag", 4, r) for r in range(4)]
)
q_z, k_z, v_z = (x[..., order, :] for x in (q16, k16, v16))  # zigzag order
rank0_rows = slice(0, 4)  # rank 0: tokens 0, 1, 14, 15
truth = F.scaled_dot_product_attention(q16, k16, v16, is_causal=True)
expected_rank0 = truth[..., order[rank0_rows], :]
# by local index: row i sees rows 0..i of the gathered keys
local = F.scaled_dot_product_attention(
    q_z[..., rank0_rows, :], k_z, v_z, is_causal=True
)
by_position = F.scaled_dot_product_attention(
    q_z[..., rank0_rows, :], k_z, v_z,
    attn_mask=order[None, :] <= order[rank0_rows, None],
)  # fmt: skip
local_gap = (local - expected_rank0).abs().amax(dim=(0, 1, 3))
position_gap = float((by_position - expected_rank0).abs().max())
print("by local index, error per token:", [f"{e:.1e}" for e in local_gap])
print(f"by position, largest error: {position_gap:.1e}")

# %% [markdown]
# **3. Keeping $dK$ and $dV$ where they were computed.** A backward pass that lets each
# rank add up only its own queries' gradients for its own keys forgets the share of
# every later query on other ranks. The symptom: gradients of keys and values too
# small, most of all for the early tokens, which most queries see; the output and
# $dQ$ look right. The fix is to send every share to the block's owner. For the
# contiguous layout of the walk-through, rank 0's keys:

# %% tags=["check"]
leaves = [x.clone().requires_grad_() for x in (q16, k16, v16)]
full = F.scaled_dot_product_attention(*leaves, is_causal=True)
(dk_all,) = torch.autograd.grad(full.sum(), leaves[1])
own = [x.clone().requires_grad_() for x in (q16, k16, v16)]
out_own = F.scaled_dot_product_attention(*own, is_causal=True)[
    ..., tokens(0), :
]
(dk_own,) = torch.autograd.grad(out_own.sum(), own[1])  # rank 0's queries only
kept_gap = float(
    (dk_own[..., tokens(0), :] - dk_all[..., tokens(0), :]).abs().max()
)
size = float(dk_all[..., tokens(0), :].abs().max())
print(f"rank 0's dK: largest {size:.2f}, off by up to {kept_gap:.2f} if kept")

# %% [markdown]
# **4. A collective that one rank skips.** Every rank must call the same collectives
# in the same order. A line such as `if rank == 0: dist.all_gather(...)`, perhaps to
# log something, leaves rank 0 waiting for ranks that never come. The symptom is a
# job that hangs without a word for as long as the group's timeout, PyTorch's
# default for gloo unless it is set (printed below). Here rank 0 enters a barrier and
# rank 1 returns at once; a timeout of one second turns the hang into gloo's error,
# on the rank that waited.

# %% tags=["check"]
import operator
import textwrap

import torch.distributed as dist
from torch.distributed.constants import default_pg_timeout

print("the default timeout:", default_pg_timeout)
try:
    launch(operator.call, [(dist.barrier,), (int,)], timeout=1)
except RankError as error:
    hang_message = str(error)
    print(textwrap.fill(hang_message, 79))

# %% [markdown]
# ## Exercises
#
# **1. Zigzag for 8 ranks.** Count, with `chunk_ids`, the pairs of chunks each of 8
# ranks computes under the causal mask (query chunk $a$, key chunk $b \le a$) in each
# layout. Is the zigzag count $2R + 1$ on every rank?

# %% tags=["solution"]
for layout in LAYOUTS:
    pairs = [
        sum(a + 1 for a in chunk_ids(layout, 8, r))  # key chunks 0..a
        for r in range(8)
    ]
    print(f"{layout:<10}", pairs)

# %% [markdown]
# **2. Llama 3 70B.** Its layers have 64 query heads and 8 key/value heads, and a
# model dimension of 8,192, so heads of width 128 (Table 3 of its report). For 131,072 tokens in 16-bit numbers, how many MiB does
# each rank send in one forward pass of one layer with the ring and with Ulysses, for
# 8 and for 16 ranks? Which sends less?

# %% tags=["solution"]
for R in (8, 16):
    ring, ulysses = (
        bytes_sent_per_rank(m, 131_072, R, 64, 8, 128, itemsize=2) / 2**20
        for m in ("ring", "ulysses")
    )
    print(f"R = {R:>2}: ring {ring:6.1f} MiB, Ulysses {ulysses:6.1f} MiB")
# The ring sends 2 (R - 1) H_kv b, Ulysses (R - 1) / R (2H + 2 max(H_kv, R)) b
# (max: copies of key/value heads when there are fewer than ranks). So Ulysses
# sends less once H + max(H_kv, R) < R H_kv.

# %% [markdown]
# **3. Ulysses with fewer key/value heads than ranks.** Run `ulysses_attention` on 4
# ranks with 8 query heads and 2 key/value heads, and compare its output with
# PyTorch's (`enable_gqa=True`). How many bytes does each rank send, against the
# formula?

# %% tags=["solution"]
g = torch.Generator().manual_seed(4)
q8 = torch.randn(1, 8, 32, 16, generator=g)
k2, v2 = (torch.randn(1, 2, 32, 16, generator=g) for _ in range(2))
shards = [[shard(x, "zigzag", 4, r) for x in (q8, k2, v2)] for r in range(4)]
outputs = launch(ulysses_attention, shards)
out8 = unshard([o for o, _ in outputs], "zigzag")
expected8 = F.scaled_dot_product_attention(
    q8, k2, v2, is_causal=True, enable_gqa=True
)
print(f"largest difference: {(out8 - expected8).abs().max():.1e}")
print("bytes sent:", outputs[0][1].bytes_sent,
      "formula:", bytes_sent_per_rank("ulysses", 32, 4, 8, 2, 16))  # fmt: skip
# Each rank gets a copy of the one key/value head its 2 query heads read: 4
# key/value heads are sent where the model has 2.

# %% [markdown]
# **4. Where the all-gather's memory goes.** For the memory runs above (512 tokens, 16
# heads of width 256, float32), how many MiB of keys and values does an all-gather
# rank hold once it has gathered them, and how many does a ring rank hold (its own
# block, the one in use and the next, from 3 ranks on), for 2, 4 and 8 ranks?

# %% tags=["solution"]
whole = T_mem * H_mem * d_mem * 4 / 2**20  # one tensor, every token: MiB
for R in (2, 4, 8):
    gathered = 2 * whole  # K and V for every token
    in_transit = 2 if R > 2 else 1  # blocks of K and V besides its own
    ring_kv = 2 * whole / R * (1 + in_transit)
    print(f"R = {R}: all-gather {gathered:.0f} MiB, ring {ring_kv:.1f} MiB")

# %% [markdown]
# ## References
#
# - Hao Liu, Matei Zaharia, Pieter Abbeel. [Ring Attention with Blockwise Transformers
#   for Near-Infinite Context](https://arxiv.org/abs/2310.01889). 2023. Blocks of
#   keys and values passed to the next host while the current one is attended
#   (Algorithm 1, with `jax.lax.ppermute`), the condition for the hops to hide behind
#   the arithmetic, and the six blocks a host holds (section 3).
# - Sam Ade Jacobs, Masahiro Tanaka, Chengming Zhang, Minjia Zhang, Shuaiwen Leon Song,
#   Samyam Rajbhandari, Yuxiong He. [DeepSpeed Ulysses: System Optimizations for
#   Enabling Training of Extreme Long Sequence Transformer
#   Models](https://arxiv.org/abs/2309.14509). 2023. The all-to-all over heads, and its
#   communication volume, constant when $T$ and $R$ grow together; also told in
#   [the DeepSpeed blog](https://github.com/microsoft/DeepSpeed/tree/master/blogs/deepspeed-ulysses).
# - Llama Team, AI @ Meta. [The Llama 3 Herd of Models](https://arxiv.org/abs/2407.21783).
#   2024. Section 3.3.2, "Context parallelism for long sequences": $2 \times CP$ chunks,
#   rank $i$ holding chunks $i$ and $2 \times CP - 1 - i$; an all-gather of $K$ and $V$,
#   and its two reasons. Table 3: the models' heads.
# - Zilin Zhu. [ring-flash-attention](https://github.com/zhuzilin/ring-flash-attention):
#   ring attention with FlashAttention's kernels on GPUs, its zigzag layout
#   ([issue #2](https://github.com/zhuzilin/ring-flash-attention/issues/2)) and a
#   Llama 3 style all-gather; and a reader's question there, which of Ulysses, zigzag
#   and all-gather is best
#   ([issue #81](https://github.com/zhuzilin/ring-flash-attention/issues/81)).
# - PyTorch. [attention-gym](https://github.com/meta-pytorch/attention-gym), whose
#   `examples/ring_attention.py` runs a ring of FlexAttention calls on GPUs with
#   contiguous shards, and passes $dK$ and $dV$ with the blocks in the backward pass.
# - Nouamane Tazi, Ferdinand Mom, Haojun Zhao, Phuc Nguyen, Mohamed Mekkouri, Leandro
#   von Werra, Thomas Wolf. [The Ultra-Scale Playbook: Training LLMs on GPU
#   Clusters](https://huggingface.co/spaces/nanotron/ultrascale-playbook). 2025.
#   Context parallelism, ring attention and zigzag, pictured; its "All-to-All (Ring)"
#   is the ring's passing from rank to rank, not the all-to-all collective of Ulysses.
# - Jiarui Fang, Shangchun Zhao. [USP: A Unified Sequence Parallelism Approach for
#   Long Context Generative AI](https://arxiv.org/abs/2405.07719). 2024. DeepSpeed-Ulysses
#   and ring attention in one scheme, and their communication and memory compared.
# - PyTorch. [Distributed communication
#   package](https://docs.pytorch.org/docs/stable/distributed.html): process groups,
#   the gloo backend, `isend`, `irecv`, `all_gather` and `all_to_all`.
#
# Next: [Attention bugs seen in the wild](../practice/bugs.md), each reproduced and
# caught by a property any attention must have.

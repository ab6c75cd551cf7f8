# %% [markdown]
# # Serving attention: many requests at once, in paged memory
#
# A server generates text for many requests at once. They arrive at different times,
# with prompts and answers of different lengths, and each wants its tokens back as if
# it had the model to itself. This page builds how a server runs attention for them:
# prompts fed in chunks, batches padded and packed, keys and values kept in the
# fixed-size blocks of a paged cache, and a scheduler that lets requests join and leave
# the batch at every step. Each mechanism is checked to give every request exactly the
# tokens it gets when decoded alone, and the memory each one takes is counted.
#
# It assumes the KV cache and its alignment trap ([Generating text with a KV
# cache](kv_cache.md)). Shapes follow the site's [notation](../notation.md): `(B, H, T,
# d_k)` for heads, $L$ queries and $S$ keys.
#
# The picture is the paged cache this page builds. Keys and values live in a *pool* of
# blocks of 4 positions, allocated once. Each request has a *block table*: its blocks,
# in order. Request `a` holds 9 positions in blocks 0, 1 and 3, which are not adjacent.
# Requests `c` and `d` start with the same 4-token prompt, so both tables point at
# block 2, which counts two users. Blocks 6 and 7 are free.

# %% tags=["plot"]
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.plotting import figure_to_svg
from attn_ref.serving import PagedKVCache

TAB10 = {"cmap": "tab10", "vmax": 10}  # value i + 0.5: tab10's i-th colour


def draw_pool(pool):
    """The pool's blocks coloured by owner, their users, each block table."""
    names = list(pool.tables)
    blocks = range(pool.num_blocks)
    users = [[r for r in names if b in pool.tables[r]] for b in blocks]
    colour = {r: i + 0.5 for i, r in enumerate(names)}
    owner = [colour[u[0]] if len(u) == 1 else len(names) + 0.5 for u in users]
    fig, ax = canvas(10, 6.4)
    for b in blocks:
        note(ax, 2 + b, 0.6, str(b), fontsize=10)
        note(ax, 2 + b, 2.4, str(pool.ref_counts[b]), fontsize=10)
    note(ax, 1.3, 0.6, "block", ha="right", fontsize=10)
    note(ax, 1.3, 1.5, "pool", ha="right")
    note(ax, 1.3, 2.4, "users", ha="right", fontsize=10)
    note(ax, 0.2, 3.6, "block\ntables", ha="left", fontsize=10)
    pool_row = [bool(u) for u in users]
    labels = ["+".join(u) for u in users]
    grid(ax, owner, 1.5, 1, **TAB10, mask=pool_row, labels=labels)
    x = 0.5
    for r in names:
        table = pool.tables[r]
        ids = [str(b) for b in table]
        box = grid(ax, [colour[r]] * len(table), x, 4.6, **TAB10, labels=ids)
        text = f"{r}: {pool.lengths[r]} positions"
        note(ax, box.center[0], 6.0, text, fontsize=10)
        for i, b in enumerate(table):
            arrow(ax, (x + i + 0.5, 4.6), (2 + b, 2.7))
        x += len(table) + 0.7
    return fig


# A pool of 8 blocks of 4 positions, for 2 layers of 4 heads of 8
pool = PagedKVCache(
    num_layers=2, num_blocks=8, block_size=4, num_kv_heads=4, head_dim=8
)
pool.reserve("a", 6)  # 6 positions: 2 blocks
pool.reserve("b", 3)  # 1 block
pool.reserve("a", 3)  # a grows to 9 positions: a third block
pool.release("b")  # b finishes: its block goes back to the free list
pool.reserve("c", 5)  # c gets b's block back first
pool.fork("c", "d")  # d starts with c's positions, sharing its blocks
pool.truncate("d", 4)  # and keeps the 4 of the shared prompt
pool.reserve("d", 3)  # then writes its own, in a block of its own
figure_to_svg(
    draw_pool(pool),
    alt="A pool of 8 blocks in a row, coloured by the request that owns them:"
    f" a holds blocks {pool.tables['a']}, c holds {pool.tables['c']}, d holds"
    f" {pool.tables['d']}; block 2 is shared by c and d and counts 2 users;"
    f" blocks {sorted(pool.free)} are free. Below, each request's block table"
    " with an arrow from each entry to its block in the pool.",
)

# %% [markdown]
# As on the KV cache page, the model's weights are random and never trained. Every
# claim here is about computing the same thing in another layout, which does not
# depend on what the weights are.

# %%
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import torch

from attn_ref.cache import KVCache
from attn_ref.decoder import TinyDecoder, generate
from attn_ref.masks import causal_mask, document_causal_mask
from attn_ref.serving import (
    Request,
    attention,
    generate_packed,
    generate_padded,
    run_decoder,
    serve,
)

torch.set_grad_enabled(False)  # generation only: no gradients
# one thread: results that do not depend on the machine's cores
torch.set_num_threads(1)

# %% [markdown]
# ## A model, and each request decoded alone
#
# The model is the KV cache page's `TinyDecoder`, smaller: 2 blocks of width 32 with 4
# heads, a vocabulary of 48 token ids and room for 96 positions. A request is a prompt
# and a number of tokens to generate greedily (`attn_ref.serving.Request`). The
# reference for everything below is `attn_ref.decoder.generate` without a cache: one
# request at a time, the whole text run again at every step.
#
# <details class="example">
# <summary>The page's helpers: random requests, a request decoded alone, a pool</summary>
#
# `random_requests` draws requests of random lengths and arrival steps; `alone`
# decodes one request by itself, without a cache, and keeps its logits too;
# `new_pool` makes an empty paged cache shaped for the model.
#
# </details>


# %% tags=["deeper"]
def random_requests(n, seed, prompt=(2, 24), new=(2, 24), spread=0):
    """n requests of random lengths, arriving over `spread` steps."""
    g = torch.Generator().manual_seed(seed)

    def draw(low, high):
        return int(torch.randint(low, high + 1, (), generator=g))

    def token_ids(length):
        return tuple(torch.randint(0, 48, (length,), generator=g).tolist())

    return [
        Request(token_ids(draw(*prompt)), draw(*new), arrival=draw(0, spread))
        for _ in range(n)
    ]


def alone(request):
    """The new tokens of one request decoded by itself, and their logits."""
    prompt = torch.tensor([request.prompt])  # (1, T)
    n = request.max_new_tokens
    tokens, logits = generate(model, prompt, n, use_cache=False)
    return tokens[0, len(request.prompt) :], logits[0]  # (n,), (n, vocab)


def new_pool(num_blocks, block_size=4):
    """An empty paged cache shaped for the model."""
    return PagedKVCache(model.num_layers, num_blocks, block_size, H_kv, d_k)


def wrap(text):
    """Printed text in lines of at most 79 characters."""
    return textwrap.fill(text, width=79, subsequent_indent="    ")


# %%
torch.manual_seed(0)
model = TinyDecoder(
    vocab_size=48,
    context_length=96,
    embed_dim=32,
    num_layers=2,
    num_heads=4,
)
model.eval()
attn = model.blocks[0].attn
H, H_kv, d_k = attn.num_heads, attn.num_kv_heads, attn.head_dim

batch = random_requests(4, seed=1)
expected, expected_logits = zip(*(alone(r) for r in batch), strict=True)
for r, tokens in zip(batch, expected, strict=True):
    label = f"prompt of {len(r.prompt):>2}, {r.max_new_tokens:>2} new:"
    print(wrap(f"{label} {tokens.tolist()}"))

# %% [markdown]
# ## One forward pass, any layout
#
# Every mechanism on this page changes one thing: which keys each query sees, and
# where those keys are kept. So `attn_ref.serving.run_decoder` runs the model's layers
# with two changes. Each token brings its own position, and a function
# `attend(layer, q, k, v)` does the attention: it stores the new keys and values where
# it keeps them and returns the output. Below, `attend` keeps nothing and uses a
# causal mask: that is the model's own forward pass.

# %%
tokens = torch.tensor([batch[0].prompt])  # (B=1, T)
T = tokens.shape[1]


def plain_causal(layer, q, k, v):
    return attention(q, k, v, causal_mask(T))  # (B, H, T, d_k)


ours = run_decoder(model, tokens, torch.arange(T)[None], plain_causal)
gap = (ours - model(tokens)).abs().max()
print(f"largest |run_decoder - model| logit: {gap:.1e}")

# %% [markdown]
# ## Chunked prefill
#
# A server reads a long prompt in *chunks*: a few hundred tokens per forward pass,
# with the cache filled by the chunks before. SARATHI (Agrawal et al., 2023)
# introduced it to mix a chunk of one request's prompt with other requests' decoding
# steps in the same pass. Each chunk is $L$ new queries against $S$ keys: the cached
# ones, then its own. Its queries are the *last* $L$ positions, so its causal mask is
# aligned to the bottom-right corner, `causal_mask(L, S, lower_right=True)`.
#
# `chunked` feeds a prompt through a `KVCache` in chunks, with either alignment.


# %%
def chunked(prompt, chunk, lower_right):
    cache = KVCache(model.num_layers)
    logits = []
    for start in range(0, prompt.shape[1], chunk):
        piece = prompt[:, start : start + chunk]  # (1, L)
        L, S = piece.shape[1], start + piece.shape[1]
        mask = causal_mask(L, S, lower_right=lower_right)  # (L, S)

        def attend(layer, q, k, v, mask=mask, cache=cache):
            keys, values = cache.update(layer, k, v)  # (1, H_kv, S, d_k)
            return attention(q, keys, values, mask)

        positions = torch.arange(start, S)[None]  # (1, L)
        logits.append(run_decoder(model, piece, positions, attend))
    return torch.cat(logits, dim=1)  # (1, T, vocab)


# %% [markdown]
# A prompt of 20 tokens goes in chunks of 8, once with each alignment, and the logits
# are compared with one pass over the whole prompt. The second chunk has 8 queries
# and 16 keys; its bottom-right mask is printed first.

# %%
g = torch.Generator().manual_seed(2)
prompt = torch.randint(0, 48, (1, 20), generator=g)  # (1, T)
one_pass = model(prompt)  # (1, 20, vocab)
print(causal_mask(8, 16, lower_right=True).int().numpy())
corner_gaps = {}  # lower_right -> largest logit difference from one pass
for lower_right in (True, False):
    gap = (chunked(prompt, 8, lower_right) - one_pass).abs().max()
    corner_gaps[lower_right] = gap
    corner = "bottom-right" if lower_right else "top-left    "
    print(f"{corner} chunks: largest |chunked - one pass| logit = {gap:.1e}")

# %% [markdown]
# With the bottom-right mask, chunks give the one pass's logits up to float rounding.
# With the top-left one, the first chunk is right (nothing is cached yet, the corners
# coincide) and every later chunk is wrong: its first query sees only the first keys
# of the prompt. [Common pitfalls](#common-pitfalls) comes back to it.
#
# ## A batch of ragged requests: padded, then packed
#
# The simplest batch pads every prompt to the longest and stacks them into one `(B,
# T)` tensor (top of the picture, for prompts of 3, 2 and 4 tokens; hatched cells are
# padding). A query sees the keys of its own row up to its own position, so padding is
# never seen; but it is computed, and so is every row at every step, even a row whose
# request has finished.
#
# *Packing* removes the padding. The prompts are laid end to end in one sequence
# (batch size 1), and a *document mask* keeps them apart (bottom of the picture): a
# query sees the keys of its own request at earlier positions, and nothing else.
# FlashAttention's "varlen" functions take this layout, described by the cumulative
# lengths of the requests. After the prompts, each step packs one token per request
# still running, and a finished request simply drops out.

# %% tags=["plot"]
lengths = [3, 2, 4]
seq = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])  # (9,)
pos = torch.cat([torch.arange(n) for n in lengths])  # (9,)
doc_mask = document_causal_mask(seq, pos)  # (9, 9)
fig, ax = canvas(10, 14.6)
note(ax, 0.2, 0.5, "padded: B = 3 rows of T = 4", ha="left")
rows = [[i + 0.5] * 4 for i in range(3)]  # request i's colour
real = [[p < n for p in range(4)] for n in lengths]  # False: padding
words = [[str(p) for p in range(4)]] * 3
grid(ax, rows, 0.5, 1, **TAB10, mask=real, labels=words)
note(ax, 0.2, 4.7, "packed: 1 row of 9", ha="left")
grid(ax, seq + 0.5, 0.5, 5.2, **TAB10, labels=pos.tolist())
note(ax, 0.2, 7.0, "document mask: row = query, column = key", ha="left")
colours = (seq[:, None] + 0.5).expand(9, 9)  # each query's request
grid(ax, colours, 0.5, 7.5, **TAB10, mask=doc_mask, cell=0.75)
figure_to_svg(
    fig,
    alt="Three prompts of 3, 2 and 4 tokens, coloured by request. Padded:"
    " three rows of 4 positions, 3 cells of padding hatched. Packed: one row"
    " of 9 positions. Below, the packed sequence's 9 by 9 document mask: a"
    " causal triangle of each request's colour on the diagonal, every other"
    " cell hatched.",
)

# %% [markdown]
# `attn_ref.serving.generate_padded` and `generate_packed` decode the page's four
# requests each way.

# %%
padded = generate_padded(model, batch)
packed = generate_packed(model, batch)
for name, tokens in (("padded", padded), ("packed", packed)):
    same = [torch.equal(a, b) for a, b in zip(tokens, expected, strict=True)]
    print(f"{name} batch, identical tokens per request:", same)
steps = max(r.max_new_tokens for r in batch)
T_pad = max(len(r.prompt) for r in batch)
computed = len(batch) * (T_pad + steps - 1)  # every row, every step
useful = sum(len(r.prompt) + r.max_new_tokens - 1 for r in batch)
print(f"token positions computed: padded {computed}, packed {useful}")

# %% [markdown]
# Both give every request its own tokens: the padding never leaks into attention. The
# padded batch computes rows of padding and of finished requests; the packed one
# computes only real tokens. Its cache, though, is one long sequence of keys, every
# request's mixed in order of arrival. Which slots can a new request use, and when
# does a finished one give its slots back?
#
# ## A paged KV cache
#
# vLLM (Kwon et al., 2023) manages the cache as an operating system manages memory, in
# pages. Its PagedAttention splits the cache into *blocks* of a fixed number of
# positions, allocated once as a pool; a *free list* holds the blocks no request uses.
# Position $p$ of a request lives in block `table[p // block_size]` of its block table,
# at slot `p % block_size`. A request takes a block from the free list when it needs
# one. `attn_ref.serving.PagedKVCache` does this, for every layer at once; the picture
# at the top of the page is one, after these steps:
#
# 1. `a` reserves 6 positions (blocks 0 and 1), `b` reserves 3 (block 2), and `a`
#    grows to 9 (block 3);
# 2. `b` finishes and is released: block 2 goes back to the free list, and is the
#    first that `c` gets when it reserves 5 positions (blocks 2 and 4);
# 3. `d` *forks* `c` (it shares `c`'s blocks, each block's *reference count* counting
#    its users), keeps the first 4 positions, a shared prompt, and writes 3 of its own
#    in a new block.
#
# A block returns to the free list only when its count drops to zero. A request that
# must write into a shared block that is partly filled copies it first (*copy on
# write*), as vLLM does.

# %%
print("block tables:", pool.tables, " free list:", pool.free)
print("users of each block:", pool.ref_counts)
p = 6  # where a's position 6 lives
block, slot = pool.tables["a"][p // 4], p % 4
print(f"a's position {p}: block {block}, slot {slot}")
print(f"one block: {new_pool(1).block_nbytes} bytes of keys and values")

# %% [markdown]
# Does attention through the tables give what a contiguous cache gives?
# `attn_ref.serving.serve` runs a batch on a paged cache: every step packs the running
# requests' new tokens into one forward pass, writes their keys and values into their
# blocks, and reads each request's keys back through its table. With all requests
# arriving at step 0 and enough blocks, it decodes them together.

# %%
paged_pool = new_pool(num_blocks=32)
paged = serve(model, batch, paged_pool)
same = [torch.equal(paged.tokens[i], expected[i]) for i in range(len(batch))]
print("paged batch, identical tokens per request:", same)
# the logits of each request decoded alone with a contiguous KVCache
contiguous = [
    generate(model, torch.tensor([r.prompt]), r.max_new_tokens)[1][0]
    for r in batch
]
gaps = [(paged.logits[i] - c).abs().max() for i, c in enumerate(contiguous)]
logit_gap = max(gaps)
print(f"largest |paged - contiguous cache| logit: {logit_gap:.1e}")
print(f"blocks free after the batch: {paged_pool.num_free} of 32")

# %% [markdown]
# Same tokens, and the logits agree with the contiguous `KVCache` up to float
# rounding. When the batch is done, every block is back on the free list.
#
# A paged cache adds ways to go wrong. A block table can point at a block that was
# freed and may now hold another request's keys; a request can be longer than the
# whole pool. Reading garbage would silently give wrong tokens, so `PagedKVCache`
# refuses both, naming what is wrong.

# %%
broken = new_pool(num_blocks=8)
broken.reserve("c", 5)
broken.tables["c"].append(broken.free[-1])  # a stale entry: a free block
for bad in (lambda: broken.gather(0, "c"), lambda: broken.reserve("d", 40)):
    try:
        bad()
    except ValueError as error:
        print(wrap(f"ValueError: {error}"))

# %% [markdown]
# ## Memory: reserving against paging
#
# Before paging, a server gave each request one contiguous slab, reserved when the
# request started. It cannot know how long the answer will be, so it reserves for the
# longest a request may grow to. vLLM's announcement (Kwon and Li, 2023) puts the cost
# of that at "60% – 80%" of the cache memory wasted "due to fragmentation and
# over-reservation", and the waste of paging at "under 4%", since only a request's
# last block is partly empty.
#
# To measure it here, a stream of 40 requests with varied lengths arrives over 60
# steps, and `serve` runs it on a pool large enough never to turn one away. Its log
# records, at every step, how many positions each running request holds. From one
# log, the memory each policy would hold at that step is computed:
#
# - **reserve the context**: every running request holds a slab of the model's full
#   context, 96 positions. The vLLM paper's baseline "Orca (Max)" reserves this way,
#   "up to the maximum sequence length of the model, i.e., 2048 tokens";
# - **reserve the request's own maximum**: the slab is sized for this request's
#   prompt plus its `max_new_tokens`, as if the server knew the answer's length, like
#   the paper's "Orca (Oracle)", which it calls "infeasible to achieve in practice";
# - **paged**: the blocks the request holds, for blocks of 4, 8 and 16 positions.
#
# Waste is the share of the held memory that holds no key or value, over all steps.

# %%
stream = random_requests(40, seed=3, prompt=(4, 40), new=(4, 48), spread=60)
stream_alone, stream_logits = zip(*(alone(r) for r in stream), strict=True)
streamed = serve(model, stream, new_pool(num_blocks=1024))

# %% tags=["plot"]
# one {request: positions it holds} per step
lengths_log = [s["lengths"] for s in streamed.steps]
stored = sum(sum(held.values()) for held in lengths_log)
held = {
    "reserve the context": sum(96 * len(h) for h in lengths_log),
    "reserve own maximum": sum(
        stream[i].max_length for h in lengths_log for i in h
    ),
}
for block in (4, 8, 16):
    held[f"paged, blocks of {block:>2}"] = sum(
        sum(-(-n // block) * block for n in h.values()) for h in lengths_log
    )
waste = {policy: 1 - stored / slots for policy, slots in held.items()}
steps = len(streamed.steps)
print(f"{steps} steps; positions stored, summed over steps: {stored:,}")
for policy, share in waste.items():
    print(f"{policy:<22} holds {held[policy]:>7,}: waste {share:6.1%}")
same = [torch.equal(streamed.tokens[i], t) for i, t in enumerate(stream_alone)]
print("every request identical to decoding it alone:", all(same))

# %% [markdown]
# Reserving the full context wastes most of the memory, as vLLM reports for earlier
# systems: its paper's profiling found that "only 20.4% - 38.2% of the KV cache memory
# is used to store the actual token states" (its Figure 2). Even a server that knew
# each answer's length in advance would waste a large share, because a slab is
# reserved whole at the start while the tokens that fill it arrive one per step.
# Paging holds only what is written, plus the empty end of each request's last block.
#
# <details class="note">
# <summary>Going deeper: how these figures differ from vLLM's</summary>
#
# vLLM's figures come from real models (OPT-13B and larger) on requests drawn from the
# ShareGPT and Alpaca datasets, and vLLM's default block holds 16 positions. The
# longer the requests, the smaller the share of one partly empty block. Here requests
# are a few dozen tokens, so that block weighs more, and the waste grows with the
# block size (compare the three paged rows). The paper notes the same on its shorter
# requests: "larger block sizes significantly degrade the performance since the
# sequences become shorter than the block sizes". The count also leaves out what a
# real allocator adds to reservation: external fragmentation between slabs of
# different sizes, which paging removes too.
#
# </details>
#
# ## Two requests sharing a prompt
#
# Requests often start with the same text: a system prompt, or several answers
# sampled from one prompt. Their keys and values for that text are the same, so
# paging can store them once, as requests `c` and `d` of the picture do.
# `serve(..., share_prefix=n)` lets a request whose first $n$ prompt tokens equal
# those of a running request start from that request's blocks. Below, six requests
# share a prefix of 30 tokens and add 6 to 16 tokens of their own. The first runs
# alone for a step and fills the prefix; the others arrive one step later.

# %%
g = torch.Generator().manual_seed(4)
prefix = tuple(torch.randint(0, 48, (30,), generator=g).tolist())
shared_stream = []
for i in range(6):
    own = tuple(torch.randint(0, 48, (6 + 2 * i,), generator=g).tolist())
    shared_stream.append(Request(prefix + own, 8, arrival=int(i > 0)))
runs = {}  # share_prefix -> what serve returned
for share in (0, 30):
    shared_pool = new_pool(num_blocks=256, block_size=4)
    runs[share] = serve(model, shared_stream, shared_pool, share_prefix=share)

# %% tags=["plot"]
peak_blocks = {
    share: max(s["blocks"] for s in run.steps) for share, run in runs.items()
}
saved = peak_blocks[0] - peak_blocks[30]
full_blocks = 30 // 4  # blocks the prefix fills completely
print(
    f"peak blocks in use: {peak_blocks[0]} without sharing,",
    f"{peak_blocks[30]} with it",
)
saved_bytes = saved * shared_pool.block_nbytes
print(
    f"blocks saved: {saved} ({saved / peak_blocks[0]:.0%}),"
    f" bytes saved: {saved_bytes:,}"
)
print(
    f"five later requests x {full_blocks} full prefix blocks"
    f" = {5 * full_blocks}"
)
# sharing changes nothing, and both are the request alone
same_shared = all(
    torch.equal(runs[30].tokens[i], runs[0].tokens[i])
    and torch.equal(runs[0].tokens[i], alone(r)[0])
    for i, r in enumerate(shared_stream)
)
print("identical tokens, with and without sharing, and alone:", same_shared)

# %% [markdown]
# The prefix fills its blocks of 4 completely but for the last one, which holds only
# 2 of its 4 positions. Each later request shares all of them at first. When it writes
# its own tokens, the partly filled block is copied, so it keeps sharing only the full
# ones. At the peak all six requests run at once, so the saving is five times the full
# blocks of the prefix; the cell prints both counts. Here the blocks are shared only
# while their first request runs; [Prefix caching](prefix_caching.md) keeps them after
# it finishes, for any later request with the same start.
#
# ## Continuous batching
#
# A server does not wait for a batch to finish before starting the next. Orca (Yu et
# al., 2022) introduced *iteration-level* scheduling: the batch is reformed at every
# step, so a request joins as soon as it arrives and there is room, and leaves as soon
# as it has its tokens. `serve` schedules this way, with a pool of limited size:
#
# 1. it retires the requests that have all their tokens, and frees their blocks;
# 2. it admits waiting requests that have arrived, first come first served, while the
#    free list has the blocks for their prompt and one block to spare for each running
#    request;
# 3. when a running request needs a new block and none is free, it *preempts* the
#    request admitted last: frees its blocks and puts it back in the queue, to
#    recompute its keys when it is readmitted (vLLM calls this recomputation).
#
# Here the same stream of 40 requests runs on a pool of only 48 blocks of 4
# positions, prompts fed in chunks of at most 16 tokens. For comparison, *static*
# batching admits new requests only when the batch is empty.

# %%
schedules = {}  # static -> what serve returned
for static in (False, True):
    pool_48 = new_pool(48)
    schedules[static] = serve(
        model, stream, pool_48, chunk_size=16, static=static
    )

# %% tags=["plot"]
print(
    "batching    steps  running  blocks in use  arrival to finish  preempted"
)
for static, run in schedules.items():
    name = "static" if static else "continuous"
    waits = [run.finished_at[i] - r.arrival for i, r in enumerate(stream)]
    running = np.mean([len(s["running"]) for s in run.steps])
    blocks = np.mean([s["blocks"] for s in run.steps])
    preempted = sum(len(s["preempted"]) for s in run.steps)
    print(
        f"{name:<10} {len(run.steps):>6} {running:>8.1f} {blocks:>14.1f}"
        f" {np.mean(waits):>18.1f} {preempted:>10}"
    )
print(
    "continuous batching, identical tokens per request:",
    all(
        torch.equal(schedules[False].tokens[i], t)
        for i, t in enumerate(stream_alone)
    ),
)

# %% tags=["plot"]
fig, axes = plt.subplots(
    3, 1, figsize=(4.5, 7.2), sharex=True, layout="constrained"
)
for ax, static in zip(axes[:2], (False, True), strict=True):
    run = schedules[static]
    order = sorted(range(len(stream)), key=lambda i: stream[i].arrival)
    for row, i in enumerate(order):
        ran = [s["step"] for s in run.steps if i in s["running"]]
        ax.hlines(row, stream[i].arrival, ran[0], color="0.6", lw=1)
        ax.broken_barh([(s, 1) for s in ran], (row - 0.4, 0.8), color="C0")
    name = "static" if static else "continuous"
    ax.set(ylabel="request", title=f"{name}: grey waits, blue runs")
    ax.set_ylim(len(stream), -1)
for static, colour in ((False, "C0"), (True, "C1")):
    run = schedules[static]
    blocks_used = [s["blocks"] for s in run.steps]
    steps_run = [s["step"] for s in run.steps]
    axes[2].step(steps_run, blocks_used, where="post", color=colour)
axes[2].axhline(48, color="k", linestyle="--")
axes[2].text(0, 49, "the pool's 48 blocks", va="bottom")
axes[2].set(xlabel="step", ylabel="blocks in use", ylim=(0, 60))
axes[2].set_title("continuous (blue) and static (orange)")
figure_to_svg(
    fig,
    alt=f"Two timelines of the 40 requests, one row each in order of arrival:"
    f" continuous batching finishes in {len(schedules[False].steps)} steps,"
    f" static batching in {len(schedules[True].steps)}, its requests waiting"
    " longer before they run. Below, the blocks in use at each step, never"
    " above the pool's 48, and lower under static batching while a batch"
    " drains.",
)

# %% [markdown]
# The blocks in use never exceed the pool, and the batch changes from step to step.
# Under static batching, a request that finishes early still gives its blocks back at
# once; what waits is the queue. A request that arrives while a batch runs cannot
# start before that batch's longest request finishes, so the freed blocks sit unused
# (fewer blocks in use on average), the stream takes more steps, and requests spend
# longer from arrival to finish, as the table shows. Every request still gets exactly
# its own tokens, whatever batch it ran in, whether it was preempted or not.
#
# <details class="note">
# <summary>Going deeper: why batching changes no token here, and when it can</summary>
#
# A request's logits depend only on its own tokens: every layer's attention sees
# only its own keys, and every other operation works on one position at a time. So
# batching, packing, chunking and paging change only the shapes of the matrix
# products, which can change the order in which float sums are added. That moves the
# logits by float rounding. The greedy choice is the largest logit, so it stays the
# same as long as that movement is smaller than the gap between the best and the
# second-best logit. The cell below measures both, over every step of every request
# this page decoded: the logits of each layout against decoding alone, and the
# smallest gap.
#
# That margin holds on this page's requests and on the seeds the test suite tries;
# nothing guarantees it. A step where two tokens are nearly tied can flip from one
# batch to another, and from then on the request's text differs. Servers see this:
# vLLM ships a batch-invariance mode (`VLLM_BATCH_INVARIANT=1`), which "ensures that
# the output of a model is deterministic and independent of the batch size or the
# order of requests in a batch", at some cost in speed. [Batch
# invariance](batch_invariance.md) finds where a request's bits come to depend on its
# batch, counts the tokens that flip, and makes every request the same bits in any
# batch.
#
# </details>

# %% tags=["deeper"]
layouts = {  # name -> (requests, logits of each, logits of each alone)
    "paged batch": (batch, paged.logits, expected_logits),
    "stream, 1,024 blocks": (stream, streamed.logits, stream_logits),
    "stream, 48 blocks": (stream, schedules[False].logits, stream_logits),
}
moved, margin = 0.0, float("inf")
for requests, logits, reference in layouts.values():
    for i in range(len(requests)):
        moved = max(moved, (logits[i] - reference[i]).abs().max().item())
        top2 = reference[i].topk(2, dim=-1).values  # (steps, 2)
        margin = min(margin, (top2[:, 0] - top2[:, 1]).min().item())
print(f"largest logit difference from decoding alone: {moved:.1e}")
print(f"smallest gap between the best two logits:     {margin:.1e}")

# %% [markdown]
# ## Summary
#
# - Chunked prefill gives the one-pass result if each chunk's causal mask is aligned
#   to the bottom-right corner.
# - A padded batch computes padding and finished rows; a packed batch with a document
#   mask computes only real tokens. Both give each request its own tokens.
# - A paged cache keeps keys and values in fixed-size blocks found through a block
#   table; on this page's stream, paging held far less memory than reserving, and a
#   shared prompt is stored once.
# - Continuous batching reforms the batch at every step, admits a request when blocks
#   are free and preempts when they run out; each request's tokens stay its own.
#
# ## Common pitfalls
#
# **1. `F.scaled_dot_product_attention(q, keys, values, is_causal=True)` for a
# chunk.** With a cache, a chunk has fewer queries than keys, and `is_causal=True`
# aligns the causal mask to the top-left corner: the chunk's first query sees the
# first key of the prompt and nothing after it. [Chunked prefill](#chunked-prefill)
# printed what that does to the logits (its top-left line). A chunk needs the
# bottom-right mask, `causal_mask(L, S, lower_right=True)`. The same mistake with
# one query at a time is [the alignment trap](kv_cache.md#the-alignment-trap) of
# the KV cache page, and PyTorch's issue is told in [a causal mask in the wrong
# corner](../practice/bugs.md#a-causal-mask-in-the-wrong-corner).
#
# **2. `pool.free.extend(pool.tables.pop(request))` when a request finishes.** It
# gives back every block the request used, shared or not. A request that shares a
# prompt with it still reads those blocks, and the next request to take one
# overwrites its keys: wrong tokens, and no error. The cell lets a child request
# share its parent's two blocks, releases the parent either way, then lets a new
# request take two blocks and write its keys.


# %%
def release_all(pool, request):  # the mistake
    pool.free.extend(pool.tables.pop(request))


def child_keys_overwritten(release):
    pool = new_pool(num_blocks=4)
    pool.reserve("parent", 8)  # 8 positions: 2 blocks
    ones = torch.ones(H_kv, 8, d_k)  # (H_kv, positions, d_k)
    pool.write(0, "parent", range(8), ones, ones)
    pool.fork("parent", "child")  # the child shares both blocks
    release(pool, "parent")
    pool.reserve("new", 8)  # a new request takes 2 blocks
    pool.write(0, "new", range(8), 0 * ones, 0 * ones)
    return not torch.equal(pool.gather(0, "child")[0], ones)


for release in (release_all, PagedKVCache.release):
    print(f"{release.__name__}: the child's keys overwritten:", end=" ")
    print(child_keys_overwritten(release))

# %% [markdown]
# `PagedKVCache.release` gives a block back only when no request uses it: that is what
# the reference counts are for.
#
# ## Exercises
#
# **1. Chunk sizes.** Feed the 20-token prompt in chunks of 1, 3, 7 and 20 tokens,
# with the bottom-right mask, and print the largest logit difference from one pass.


# %% tags=["solution"]
def chunk_gap(c):
    return (chunked(prompt, c, True) - one_pass).abs().max().item()


chunk_gaps = {c: chunk_gap(c) for c in (1, 3, 7, 20)}
for c, gap in chunk_gaps.items():
    print(f"chunks of {c:>2}: {gap:.1e}")

# %% [markdown]
# **2. How many blocks?** A request of $n$ positions takes $\lceil n / b \rceil$
# blocks of $b$ positions and wastes the rest of its last block. For the stream
# above, print the blocks each request holds when it finishes, with $b = 16$, and
# the positions they waste.

# %% tags=["solution"]
# the positions each request holds at the end
final = [r.max_length for r in stream]
blocks_16 = [-(-n // 16) for n in final]
print(wrap(f"blocks: {blocks_16}"))
print(
    "wasted positions:",
    sum(16 * b - n for b, n in zip(blocks_16, final, strict=True)),
    "of",
    16 * sum(blocks_16),
)

# %% [markdown]
# **3. A request too long for the pool.** Serve one request whose prompt and output
# need more positions than a pool of 4 blocks of 4 holds, and print the error.

# %% tags=["solution"]
tiny_pool = new_pool(4)
try:
    serve(model, [Request(tuple(range(12)), 8)], tiny_pool)
except ValueError as error:
    print(wrap(f"ValueError: {error}"))

# %% [markdown]
# **4. A tighter pool.** Serve the stream with a pool of only 24 blocks, just enough
# for its longest request. Count the preemptions, and check that every request still
# gets its own tokens.

# %% tags=["solution"]
tight = serve(model, stream, new_pool(24), chunk_size=16)
print("preemptions:", sum(len(s["preempted"]) for s in tight.steps))
print(
    "identical tokens:",
    all(torch.equal(tight.tokens[i], t) for i, t in enumerate(stream_alone)),
)

# %% [markdown]
# ## References
#
# - Woosuk Kwon, Zhuohan Li, Siyuan Zhuang, Ying Sheng, Lianmin Zheng, Cody Hao Yu,
#   Joseph E. Gonzalez, Hao Zhang, Ion Stoica. [Efficient Memory Management for Large
#   Language Model Serving with PagedAttention](https://arxiv.org/abs/2309.06180).
#   SOSP 2023. Blocks, block tables, reference counts and copy on write; preemption
#   by recomputation ("we simply recompute the KV cache when the preempted sequences
#   are rescheduled", section 4.5); the baselines Orca (Max) and Orca (Oracle)
#   (section 6.1); the default block size of 16 (section 7.2).
# - Woosuk Kwon, Zhuohan Li. [vLLM: Easy, Fast, and Cheap LLM Serving with
#   PagedAttention](https://blog.vllm.ai/2023/06/20/vllm.html). 2023. The figures
#   quoted above: existing systems "waste 60% – 80% of memory due to fragmentation
#   and over-reservation"; with PagedAttention, "memory waste only happens in the
#   last block of a sequence", "a mere waste of under 4%".
# - vLLM. [Batch
#   Invariance](https://docs.vllm.ai/en/latest/features/batch_invariance/). The mode
#   that makes a request's output independent of its batch, enabled with
#   `VLLM_BATCH_INVARIANT=1`.
# - Amey Agrawal, Ashish Panwar, Jayashree Mohan, Nipun Kwatra, Bhargav S. Gulavani,
#   Ramachandran Ramjee. [SARATHI: Efficient LLM Inference by Piggybacking Decodes
#   with Chunked Prefills](https://arxiv.org/abs/2308.16369). 2023. "chunked-prefills,
#   which splits a prefill request into equal sized chunks".
# - Gyeong-In Yu, Joo Seong Jeong, Geon-Woo Kim, Soojeong Kim, Byung-Gon Chun.
#   [Orca: A Distributed Serving System for Transformer-Based Generative
#   Models](https://www.usenix.org/conference/osdi22/presentation/yu). OSDI 2022.
#   Iteration-level scheduling.
# - Tri Dao. [FlashAttention-2](https://arxiv.org/abs/2307.08691). 2023; its
#   library's `flash_attn_varlen_func` takes packed sequences described by
#   `cu_seqlens`, their cumulative lengths.
#
# Next: [Serving long contexts](serving_long_contexts.md) bounds the cache of one long
# sequence, writes masks as functions, and shows why decoding is limited by memory.
# After it, [Speculative decoding](speculative_decoding.md) runs one request on this
# paged cache with a drafter, checking several guessed tokens per forward pass and
# truncating the request's blocks when guesses are rejected.

# %% [markdown]
# # Serving long contexts: bounded caches, masks as functions, and memory-bound decoding
#
# [Serving attention](serving_batches.md) keeps every key of every request. For long
# texts that is the problem: the cache grows with every token. This page bounds it.
# A sliding window keeps only the last keys, in a rolling buffer of fixed size, and
# attention sinks keep the first few beside them. Both are masks, and the page then
# writes masks as functions, in the interface of PyTorch's FlexAttention, with a *block
# mask* that lets tiled attention skip the tiles a mask leaves empty. Last, it counts
# why one decoding step is limited by memory rather than arithmetic, and splits the
# keys of one step across workers, as Flash-Decoding does.
#
# It assumes the KV cache ([Generating text with a KV cache](kv_cache.md)), tiled
# attention and the online softmax ([Attention without the T×T
# matrix](efficient_attention.md)), and the serving page. Shapes follow the site's
# [notation](../notation.md).
#
# The picture is the page's first idea. Each row is a query, each column a key; a
# coloured cell is a key the query sees. With a window of 4 and 2 attention sinks,
# query $i$ sees itself and the 3 keys before it (orange), and the first 2 positions
# (blue), whatever $i$ is. So a cache of 6 slots is enough: the bottom row is the
# buffer when query 10 arrives. Its window rolls through slots 2 to 5, and position 10
# has just overwritten position 6, which no later query sees. (The picture's folded
# code also holds the page's imports.)

# %% tags=["plot"]
import itertools
import math
import textwrap
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.colors import ListedColormap
from torch.nn.attention import flex_attention as torch_flex

from attn_ref.decoder import TinyDecoder, kv_cache_bytes
from attn_ref.diagrams import canvas, grid, note
from attn_ref.masks import sliding_window_mask
from attn_ref.plotting import figure_to_svg
from attn_ref.serving import (
    Request,
    attention,
    attention_intensity,
    create_block_mask,
    flex_attention,
    generate_windowed,
    merge_partials,
    run_decoder,
    split_k_attention,
)

torch.set_grad_enabled(False)  # inference only: no gradients
# one thread: results that do not depend on the machine's cores
torch.set_num_threads(1)
# FlexAttention run eagerly (without torch.compile) warns that it is
# unfused: on a CPU reference that is what we want.
UNFUSED = ".*flex_attention called without torch.compile"
warnings.filterwarnings("ignore", message=UNFUSED)


def wrap(text):
    """Printed text in lines of at most 79 characters."""
    return textwrap.fill(text, width=79, subsequent_indent="    ")


TAB10 = {"cmap": "tab10", "vmax": 10}  # value i + 0.5: tab10's i-th colour
T_pic, W_pic, sinks_pic = 11, 4, 2
positions = torch.arange(T_pic)
sink_mask = sliding_window_mask(positions, positions, W_pic, sinks_pic)
is_sink = positions < sinks_pic  # (T,)
colours = torch.where(is_sink, 0.5, 1.5).expand(T_pic, T_pic)  # blue, orange
# the rolling buffer: position p in slot p (a sink) or sinks + (p - sinks) % W
buffer = {}
for p in range(T_pic):
    slot = p if p < sinks_pic else sinks_pic + (p - sinks_pic) % W_pic
    buffer[slot] = p
held = [buffer[slot] for slot in range(sinks_pic + W_pic)]
fig, ax = canvas(9.8, 13.4)
note(ax, 1.4, 0.4, "key position", ha="left", fontsize=10)
note(ax, 0.3, 5.5, "query position", rotation=90, fontsize=10)
for j in range(T_pic):
    note(ax, 1.4 + 0.75 * (j + 0.5), 1.0, str(j), fontsize=10)
    note(ax, 1.0, 1.3 + 0.75 * (j + 0.5), str(j), fontsize=10)
grid(ax, colours, 1.4, 1.3, **TAB10, mask=sink_mask, cell=0.75)
buffer_words = f"the buffer at query {T_pic - 1}, slot by slot:"
note(ax, 0.2, 10.6, buffer_words, ha="left")
held_colours = [0.5 if p < sinks_pic else 1.5 for p in held]
grid(ax, held_colours, 1.4, 11.1, **TAB10, labels=held, cell=0.75)
for slot in range(sinks_pic + W_pic):
    note(ax, 1.4 + 0.75 * (slot + 0.5), 12.3, str(slot), fontsize=10)
note(ax, 1.2, 12.3, "slot", ha="right", fontsize=10)
figure_to_svg(
    fig,
    alt=f"An {T_pic} by {T_pic} mask, row = query, column = key: each query"
    f" sees the first {sinks_pic} positions (blue, the sinks) and itself"
    f" with the {W_pic - 1} positions before it (orange, the window); every"
    " other cell hatched. Below, the rolling buffer of"
    f" {sinks_pic + W_pic} slots when query {T_pic - 1} arrives: it holds"
    f" positions {held}.",
)

# %% [markdown]
# ## A sliding window in a rolling buffer
#
# With a *sliding window* of $W$ positions, the query at position $i$ sees the keys at
# positions $i - W + 1, \dots, i$: itself and the $W - 1$ before it. Mistral 7B uses a
# window of 4,096. Its paper describes the cache that follows: a *rolling buffer* of
# fixed size $W$, where the keys and values of position $i$ are stored at slot
# $i \bmod W$, overwriting a position no later query may see. The cache stops growing.
#
# `attn_ref.serving.generate_windowed` decodes one request this way, every layer's cache
# a buffer of $W$ slots. The reference, `masked_generate`, decodes without any cache:
# at every step it runs the whole text again, with the window written as an explicit
# `(T, T)` mask (`attn_ref.masks.sliding_window_mask`).
#
# <details class="example">
# <summary>The reference: <code>masked_generate</code>, no cache, a window mask</summary>
#
# Greedy decoding that runs the whole text at every step, through
# `attn_ref.serving.run_decoder`, with attention under the window mask (and sinks).
#
# </details>


# %% tags=["deeper"]
def masked_generate(request, window, num_sinks=0):
    """Greedy decoding, no cache: the whole text at each step, window mask."""
    tokens = list(request.prompt)
    for _ in range(request.max_new_tokens):
        T = len(tokens)
        positions = torch.arange(T)
        # (T, T): the window, and the sinks beside it
        mask = sliding_window_mask(positions, positions, window, num_sinks)

        def attend(layer, q, k, v, mask=mask):
            return attention(q, k, v, mask)

        text = torch.tensor([tokens])  # (1, T)
        logits = run_decoder(model, text, positions[None], attend)
        tokens.append(int(logits[0, -1].argmax()))
    return torch.tensor(tokens[len(request.prompt) :])


# %% [markdown]
# The model is the serving page's `TinyDecoder`, with room for 128 positions. A request
# of 24 prompt tokens and 64 new ones is decoded with a window of 16, its prompt fed in
# chunks of 10.

# %%
torch.manual_seed(0)
model = TinyDecoder(
    vocab_size=48,
    context_length=128,
    embed_dim=32,
    num_layers=2,
    num_heads=4,
)

# %%
g = torch.Generator().manual_seed(1)
request = Request(tuple(torch.randint(0, 48, (24,), generator=g).tolist()), 64)
W = 16
rolled, _, slots = generate_windowed(model, request, window=W, chunk_size=10)
reference = masked_generate(request, W)
print(
    "rolling buffer and window mask, identical tokens:",
    torch.equal(rolled, reference),
)
print(
    f"positions read: {request.max_length};",
    f"slots per layer in the buffer: {slots}",
)
full_attention = masked_generate(request, window=request.max_length)
print(
    "full attention gives other tokens:",
    not torch.equal(rolled, full_attention),
)

# %% [markdown]
# The buffer gives the window mask's tokens, with a cache of $W$ slots per layer for a
# text several times longer. A chunk of the prompt can overwrite slots that its own
# later queries no longer need. The last line checks that the window matters: without
# it the model chooses other tokens.
#
# What the buffer saves, for Mistral 7B's shape (32 layers, 8 key/value heads of 128,
# 16-bit numbers; see the [KV cache page](kv_cache.md) for the sources):

# %%
for tokens in (4_096, 32_768, 131_072):
    full = kv_cache_bytes(32, 8, 128, tokens) / 2**30
    window = kv_cache_bytes(32, 8, 128, min(tokens, 4_096)) / 2**30
    print(
        f"{tokens:>7,} tokens: full cache {full:>4g} GiB,",
        f"rolling buffer {window:g}",
    )

# %% [markdown]
# Mistral's paper words the window two ways: each token attends "to all hidden states
# from the previous layer with positions between $i - W$ and $i$" (section 2), and "to
# at most $W$ tokens" (Figure 1). The two differ by one position; this page uses the
# second, $W$ positions counting the query itself.
#
# ## Attention sinks
#
# A window forgets the start of the text. Xiao et al. (2023) found that models put a
# large share of their attention on the first tokens, whatever those tokens say, and
# that evicting them from a window cache breaks the model. Their StreamingLLM keeps
# the keys and values of a few first tokens, the *attention sinks*, beside the window:
# "with just 4 initial tokens sufficing". The mask is the window's, plus the first
# columns, as in the picture at the top. In the buffer, the first `num_sinks` slots
# hold the sinks for good, and the window rolls through the others. Decoding with 4
# sinks and a window of 12 gives the tokens of that mask:

# %%
sunk, _, sink_slots = generate_windowed(model, request, window=12, num_sinks=4)
print(
    "4 sinks + window of 12, identical tokens:",
    torch.equal(sunk, masked_generate(request, 12, num_sinks=4)),
)
print("slots per layer:", sink_slots)

# %% [markdown]
# One difference from StreamingLLM: it gives the tokens in its cache new positions,
# "the positions within the cache rather than those in the original text", which
# works with relative encodings such as RoPE and ALiBi. This page's model learns
# absolute positions, so its keys keep their original ones; the claim checked here is
# only that the buffer computes what the mask says.
#
# ## Masks as functions
#
# Causal, sliding window, sinks, the document mask of packed requests: each is a rule
# on the pair (query position, key position). PyTorch's FlexAttention takes that rule
# as a function, `mask_mod(b, h, q_idx, kv_idx)`, true where the query may see the
# key; and a second function, `score_mod(score, b, h, q_idx, kv_idx)`, that changes a
# score before the softmax. `create_block_mask` evaluates the mask once and records,
# for every tile of the score matrix, whether it is *empty* (all masked), *partial*
# or *full*. The attention kernel skips empty tiles and needs no mask on full ones.
#
# `attn_ref.serving.create_block_mask` and `attn_ref.serving.flex_attention` are a CPU
# reference of that interface. The loop is `attn_ref.tiled.tiled_attention`'s, with
# two changes: each tile's scores go through `score_mod`, and the block mask decides
# whether the tile is skipped, masked, or left as it is. Here is the causal mask over
# 6 positions in tiles of 2 (0 empty, 1 partial, 2 full):


# %%
def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


print(create_block_mask(causal, 1, 1, 6, 6, block_size=2).kinds[0, 0].numpy())

# %% [markdown]
# Six masks and score changes, on one sequence of 256 positions with 4 heads of 16, in
# tiles of 32 by 32: **causal**; a **sliding window** of 48 positions; a **document**
# mask over four packed documents, causal within each; a **prefix-LM**, whose first 64
# positions (the prefix) see each other both ways, the rest causal; **ALiBi**, causal,
# where a score gets $m_h \cdot (j - i)$ added, a penalty growing with the distance,
# with slope $m_h = 2^{-8(h+1)/H}$ for head $h$ (see the page on
# [positions](../concepts/positions.md)); and **soft-capping**, causal, where a score
# $s$ becomes $c \tanh(s / c)$, with $c = 2$, so no score exceeds $c$ in size.

# %%
L = 256
# (L,): the document of each position
doc = torch.tensor([0] * 50 + [1] * 90 + [2] * 36 + [3] * 80)
slopes = 2.0 ** (-8 * torch.arange(1, 5) / 4)  # (H,) ALiBi slopes


def sliding(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 48)


def document(b, h, q_idx, kv_idx):
    return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)


def prefix_lm(b, h, q_idx, kv_idx):
    return (kv_idx < 64) | (q_idx >= kv_idx)


def alibi(score, b, h, q_idx, kv_idx):
    return score + slopes[h] * (kv_idx - q_idx)


def soft_cap(score, b, h, q_idx, kv_idx):
    return 2.0 * torch.tanh(score / 2.0)


# %% [markdown]
# Each runs through `attn_ref`'s reference and through PyTorch's own
# `torch.nn.attention.flex_attention.flex_attention`, run eagerly on the CPU, on the
# same random queries, keys and values. For each, the table gives the share of tiles
# of each kind, the share skipped, the largest difference between the two outputs,
# and whether PyTorch's `BlockMask` counts the same tiles as ours.

# %% tags=["plot"]
g = torch.Generator().manual_seed(2)
# (B, H, L, d_k) each
q, k, v = (2 * torch.randn(1, 4, L, 16, generator=g) for _ in range(3))


def torch_block_mask(mask_mod, L):
    """PyTorch's block mask for one sequence, all heads alike, tiles of 32."""
    make = torch_flex.create_block_mask
    return make(mask_mod, 1, 1, L, L, "cpu", BLOCK_SIZE=32)


def compare(mask_mod, score_mod):
    """attn_ref's flex_attention against PyTorch's: outputs, tiles per kind."""
    ours_mask = create_block_mask(mask_mod, 1, 1, L, L, block_size=32)
    ours, state = flex_attention(q, k, v, score_mod, block_mask=ours_mask)
    theirs_mask = torch_block_mask(mask_mod, L)
    theirs = torch_flex.flex_attention(
        q, k, v, score_mod, block_mask=theirs_mask
    )
    kinds = ours_mask.kinds[0, 0]  # (query blocks, key blocks)
    rows, cols = torch.arange(L)[:, None], torch.arange(L)[None, :]
    # PyTorch counts, per block of queries, its partial tiles and its full ones
    agree = all(
        torch.equal((kinds == kind).sum(-1), counts[0, 0])  # (query blocks,)
        for kind, counts in (
            (1, theirs_mask.kv_num_blocks),
            (2, theirs_mask.full_kv_num_blocks),
        )
    )
    tiles = state.tiles_computed + state.tiles_skipped
    return {
        "kinds": kinds,
        "seen": mask_mod(0, 0, rows, cols),  # (L, L)
        "fractions": [ours_mask.fraction(kind) for kind in (0, 1, 2)],
        "skipped": state.tiles_skipped / tiles,
        "error": (ours - theirs).abs().max().item(),
        "agree": agree,
        "output": ours,
    }


flex_results = {
    name: compare(mask_mod, score_mod)
    for name, (mask_mod, score_mod) in {
        "causal": (causal, None),
        "sliding window": (sliding, None),
        "document": (document, None),
        "prefix-LM": (prefix_lm, None),
        "ALiBi": (causal, alibi),
        "soft-capping": (causal, soft_cap),
    }.items()
}
print(
    f"{'':<15} empty partial  full  skipped  |ours - PyTorch|  agree on tiles"
)
for name, r in flex_results.items():
    fractions = " ".join(f"{f:5.2f}" for f in r["fractions"])
    skipped, error, agree = r["skipped"], r["error"], r["agree"]
    print(
        f"{name:<15} {fractions} {skipped:8.1%} {error:>16.1e} {agree!s:>15}"
    )
largest = max(r["error"] for r in flex_results.values())
print(f"largest |attn_ref - flex_attention| over the six: {largest:.1e}")

# %% [markdown]
# The outputs agree with PyTorch's to float32 rounding, and so do the block masks:
# PyTorch's `BlockMask` stores, per block of queries, the number of partial tiles
# (`kv_num_blocks`) and of full ones (`full_kv_num_blocks`), and they match ours.
#
# The picture shows the tiles of the four masks (ALiBi and soft-capping have the causal
# mask's). Each panel is the $256 \times 256$ score matrix in tiles of 32. A grey tile
# is empty and skipped; a green tile is full and needs no mask; a partial tile is
# computed, its visible entries dark blue and its masked ones pale blue.

# %% tags=["plot"]
TILE_COLOURS = ListedColormap(["0.6", "#aec7e8", "#1f77b4", "#2ca02c"])
fig, axes = plt.subplots(2, 2, figsize=(4.5, 4.8), layout="constrained")
pictured = ["causal", "sliding window", "document", "prefix-LM"]
for ax, name in zip(axes.flat, pictured, strict=True):
    kinds = flex_results[name]["kinds"]  # (8, 8): 0 empty, 1 partial, 2 full
    kind = kinds.repeat_interleave(32, 0).repeat_interleave(32, 1)  # (L, L)
    seen = flex_results[name]["seen"]  # (L, L)
    # 0 skipped, 1 masked in a partial tile, 2 seen in it, 3 in a full tile
    shade = torch.where(
        kind == 1, 1 + seen.int(), torch.where(kind == 2, 3, 0)
    )
    ax.imshow(shade, cmap=TILE_COLOURS, vmin=-0.5, vmax=3.5)
    ax.set_xticks(np.arange(32, L, 32) - 0.5, minor=True)
    ax.set_yticks(np.arange(32, L, 32) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=0.8)
    ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
    skipped = flex_results[name]["skipped"]
    ax.set_title(f"{name}\n{skipped:.0%} skipped", fontsize=11)
figure_to_svg(
    fig,
    alt="Four 256 by 256 score matrices in 8 by 8 tiles, causal, sliding"
    " window, document and prefix-LM, each tile grey when skipped, green when"
    " full, and blue when partial, pale blue where masked. Shares skipped: "
    + ", ".join(f"{n} {flex_results[n]['skipped']:.0%}" for n in pictured)
    + ".",
)

# %% [markdown]
# The skipped share is the empty share: nearly half the tiles for causal attention,
# most of them for the sliding window and the document mask, and fewer for the
# prefix-LM, whose prefix columns are visible to every query. A score change skips
# nothing by itself; ALiBi and soft-capping skip what their causal mask skips.
#
# A mask function has a fixed signature. One with the wrong one is refused when the
# block mask is made, before any attention runs:

# %%
try:
    create_block_mask(lambda q_idx, kv_idx: q_idx >= kv_idx, 1, 1, 8, 8)
except TypeError as error:
    print(wrap(f"TypeError: {error}"))

# %% [markdown]
# <details class="note">
# <summary>Going deeper: how FlexAttention gets its speed</summary>
#
# Run eagerly, as here, PyTorch's `flex_attention` is a reference too: it warns that it
# "materializes the full scores matrix". Under `torch.compile`, it turns `score_mod`
# and `mask_mod` into code inside one fused tiled kernel, and uses the block mask to
# skip empty tiles and to leave the mask out of full ones, as the loop here does in
# Python. Compiling it takes far longer than this page may spend when the site is
# built, so the page compares with the eager function.
#
# </details>
#
# ## Decoding is limited by memory
#
# A GPU does many multiply-adds for every byte it reads from memory; work that does too
# few per byte waits on memory instead. The number that decides is the *arithmetic
# intensity*, multiply-adds per byte read. For attention over one sequence, $L$
# queries against $S$ keys in $H$ heads of size $d_k$ do $2 H d_k$ multiply-adds for
# every (query, key) pair a query meets ($Q K^\top$, then the weights times $V$), and
# read $b (H L d_k + 2 H_{kv} S d_k)$ bytes, for $b$ bytes per number
# (`attn_ref.serving.attention_intensity`).
#
# Without a mask the pairs are all $L S$. A causal prefill of $T$ tokens meets only
# $T (T + 1) / 2$ of its $T^2$ pairs, about half, for the same bytes. The table
# compares a prefill of $T$ tokens ($L = S = T$), counted both ways, with one decoding
# step after $T$ tokens ($L = 1$, $S = T$: every key, mask or not), for the 7B-class
# shape with 32 and with 8 key/value heads.

# %%
columns = ("every pair", "causal", "H_kv = 32", "H_kv = 8")
print(f"{'':7} {'prefill, H_kv = 32':^23} {'decode, one step':^23}")
print(f"{'T':>7}", *(f"{name:>11}" for name in columns))
intensities = {}  # T -> (prefill, causal prefill, decode 32, decode 8)
for T in (512, 4_096, 32_768):
    intensities[T] = (
        attention_intensity(T, T, 32, 32, 128),
        attention_intensity(T, T, 32, 32, 128, causal=True),
        attention_intensity(1, T, 32, 32, 128),
        attention_intensity(1, T, 32, 8, 128),
    )
    print(f"{T:>7,}", *(f"{x:>11.2f}" for x in intensities[T]))

# %% [markdown]
# A prefill does more work per byte the longer the prompt: every key is used by many
# queries, and the causal mask halves that work without changing the trend. A
# decoding step reads every key and value of the cache to use each one for a single
# query per head: about $H / (H_{kv} b)$ multiply-adds per byte, whatever the length.
# Grouped-query attention raises it by the group size, since every key read then
# serves a whole group of query heads. Batching more requests does not help attention,
# unlike the weight matrices: each request reads its own cache. That is why the memory
# a cache takes and the time a step takes grow together.
#
# ## Split-K decoding
#
# A decoding step has one query per head and sequence. Tiled attention parallelises
# over blocks of queries, so with one query there is little to share among a GPU's
# processors. Flash-Decoding (Dao et al., 2023) splits the *keys* instead: each worker
# attends the query to its own share of the keys and returns its output $O_i$ and the
# log-sum-exp $\lambda_i$ of its scores. The merge is the online softmax's rule: with
# $\lambda = \log \sum_i e^{\lambda_i}$,
#
# $$
# O = \sum_i e^{\lambda_i - \lambda} \, O_i ,
# $$
#
# each part weighted by its share of the softmax's denominator
# (`attn_ref.serving.merge_partials`). `attn_ref.serving.split_k_attention` splits a
# step's 1,000 keys over 1 to 8 workers; the result is compared with PyTorch's
# `scaled_dot_product_attention`.

# %%
g = torch.Generator().manual_seed(3)
q1 = torch.randn(2, 8, 1, 64, generator=g)  # (B, H, 1, d_k): one decoding step
# (B, H, S, d_k) each
keys, values = torch.randn(2, 2, 8, 1000, 64, generator=g)
sdpa = F.scaled_dot_product_attention(q1, keys, values)
split_errors = {}
for splits in (1, 2, 3, 8):
    out, partial = split_k_attention(q1, keys, values, num_splits=splits)
    split_errors[splits] = (out - sdpa).abs().max().item()
    print(
        f"num_splits = {splits}:",
        f"largest |split-K - SDPA| = {split_errors[splits]:.1e}",
    )
naive = partial.mean(dim=0)  # averaging the 8 parts, ignoring their weights
print(
    f"plain average of the 8 parts instead: {(naive - sdpa).abs().max():.2f}"
)

# %% [markdown]
# Every split count gives SDPA's output to float32 rounding, each with its own last
# bits: when a kernel picks the count from the batch, a request's output depends on
# its batch ([Batch invariance](batch_invariance.md)). A plain average of the
# parts is wrong: the parts' softmaxes have different denominators, and the
# log-sum-exps carry them. The picture shows the weights of the 8 parts of one query
# (the first head of the first sequence), $e^{\lambda_i - \lambda}$, against the
# $1/8$ a plain average gives each; yellow marks the largest share.

# %% tags=["plot"]
scores = q1 @ keys.transpose(-2, -1) / math.sqrt(64)  # (B, H, 1, S)
bounds = [round(1000 * i / 8) for i in range(9)]
parts = list(itertools.pairwise(bounds))  # (start, stop) of each worker's keys
lses = torch.stack([scores[..., a:b].logsumexp(-1) for a, b in parts])
shares = (lses - lses.logsumexp(dim=0)).exp()  # (8, B, H, 1)
first = shares[:, 0, 0, 0]  # (8,): the first head of the first sequence
top = first.max().item()
fig, ax = canvas(9.8, 5.2)
weight_words = r"merge weights $e^{\lambda_i - \lambda}$"
note(ax, 0.2, 0.5, weight_words, ha="left")
for i in range(8):
    note(ax, 2.1 + i, 1.2, str(i), fontsize=10)
note(ax, 1.4, 1.2, "worker", ha="right", fontsize=10)
grid(ax, first, 1.6, 1.6, cmap="viridis", vmax=top, decimals=2)
note(ax, 0.2, 3.4, "a plain average: 1/8 each", ha="left")
grid(
    ax, torch.full((8,), 1 / 8), 1.6, 3.8, cmap="viridis", vmax=top, decimals=2
)
figure_to_svg(
    fig,
    alt="Two rows of 8 cells, one per worker. Top: the merge weight of each"
    " part, from "
    f"{first.min():.2f} to {top:.2f}, summing to 1. Bottom: 0.12 each, the"
    " plain average's weight 1/8.",
)

# %% [markdown]
# The same merge splits a whole sequence over several processes, queries and keys
# alike: [Attention across processes](context_parallel.md).
#
# ## Summary
#
# - A sliding window of $W$ needs only the last $W$ keys: a rolling buffer of $W$
#   slots gives the window mask's tokens, with a cache that stops growing. Attention
#   sinks add a few fixed slots for the first tokens.
# - Masks and score changes can be written as functions of the indices. A block mask
#   classifies tiles as empty, partial or full, and tiled attention skips the empty
#   ones; the reference here agrees with PyTorch's `flex_attention`.
# - A decoding step reads the whole cache to do a few multiply-adds per byte: it is
#   limited by memory. Split-K spreads its keys across workers and merges the parts
#   with their log-sum-exps.
#
# ## Common pitfalls
#
# **1. `partial.mean(dim=0)` to merge split-K's parts.** A plain average gives each
# worker the same weight, but each part's softmax has its own denominator. The
# parts must be weighted by $e^{\lambda_i - \lambda}$, from their log-sum-exps.
# [Split-K decoding](#split-k-decoding) printed how far the average lands from
# SDPA's output, and pictured the weights it ignores.
#
# **2. `q_idx - kv_idx <= W` for a window of $W$.** Read as "positions between
# $i - W$ and $i$", the window has $W + 1$ keys, one more than a rolling buffer of
# $W$ slots holds: the buffer has already overwritten the oldest of them. The
# window of [the rolling buffer](#a-sliding-window-in-a-rolling-buffer) is
# `q_idx - kv_idx < W`, $W$ keys counting the query's own. The cell counts the keys
# query 40 sees under each rule, with $W = 16$.

# %%
q_idx, kv_idx = torch.tensor(40), torch.arange(41)
keys_seen = {
    "<=": int((q_idx - kv_idx <= W).sum()),
    "<": int((q_idx - kv_idx < W).sum()),
}
for rule, count in keys_seen.items():
    print(f"q_idx - kv_idx {rule:<2} W: {count} keys; the buffer holds {W}")

# %% [markdown]
# **3. Counting a prefill's work as $L S$ pairs.** With a causal mask a prefill meets
# about half its pairs; counting all of them doubles its multiply-adds and its
# intensity. The [table](#decoding-is-limited-by-memory) prints both counts.
#
# ## Exercises
#
# **1. Sinks only.** With no window to speak of (window 1) and 4 sinks, each query
# sees the 4 first positions and itself. Check that the rolling buffer still gives the
# mask's tokens.

# %% tags=["solution"]
only_sinks, _, _ = generate_windowed(model, request, window=1, num_sinks=4)
print(
    "identical tokens:",
    torch.equal(only_sinks, masked_generate(request, 1, num_sinks=4)),
)

# %% [markdown]
# **2. A dilated mask.** Write a `mask_mod` in which query $i$ sees the keys $j \le i$
# with $i - j$ even. Print the share of tiles skipped with tiles of 32, and compare
# with PyTorch's `flex_attention`.


# %% tags=["solution"]
def dilated(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & ((q_idx - kv_idx) % 2 == 0)


dilated_result = compare(dilated, None)
skipped, error = dilated_result["skipped"], dilated_result["error"]
print(f"skipped: {skipped:.1%}; largest difference from PyTorch: {error:.1e}")

# %% [markdown]
# **3. Where decoding stops being memory-bound.** Decoding $n$ tokens of one sequence
# in one step makes $L = n$. For the 7B-class shape with 8 key/value heads and
# $S = 4096$, print the intensity for $n = 1, 4, 16, 64$.

# %% tags=["solution"]
for n in (1, 4, 16, 64):
    intensity = attention_intensity(n, 4_096, 32, 8, 128)
    print(f"n = {n:>2}: {intensity:7.2f} multiply-adds per byte")

# %% [markdown]
# **4. Merging in two rounds.** Merge the 8 split-K parts in two rounds: pairs first,
# then the four results. Check that it equals merging all 8 at once.

# %% tags=["solution"]
_, partial = split_k_attention(q1, keys, values, num_splits=8)
# lses: the 8 parts' log-sum-exps, from the picture of split-K above
pairs = [
    merge_partials(partial[i : i + 2], lses[i : i + 2]) for i in range(0, 8, 2)
]
outputs, logsumexps = (
    torch.stack(parts) for parts in zip(*pairs, strict=True)
)
two_rounds, _ = merge_partials(outputs, logsumexps)
one_round, _ = merge_partials(partial, lses)
print(
    "largest |two rounds - one round|:",
    f"{(two_rounds - one_round).abs().max():.1e}",
)

# %% [markdown]
# ## References
#
# - Albert Q. Jiang et al. [Mistral 7B](https://arxiv.org/abs/2310.06825). 2023.
#   Sliding window attention with $W = 4096$, and the rolling buffer cache: "The keys
#   and values for the timestep $i$ are stored in position $i \bmod W$ of the cache"
#   (section 2).
# - Guangxuan Xiao, Yuandong Tian, Beidi Chen, Song Han, Mike Lewis. [Efficient
#   Streaming Language Models with Attention Sinks](https://arxiv.org/abs/2309.17453), 2023.
#   StreamingLLM; its reference code,
#   [mit-han-lab/streaming-llm](https://github.com/mit-han-lab/streaming-llm), keeps
#   `start_size=4` sink tokens beside the recent ones.
# - PyTorch.
#   [`torch.nn.attention.flex_attention`](https://docs.pytorch.org/docs/2.13/nn.attention.flex_attention.html):
#   `score_mod(score, batch, head, q_idx, k_idx)`, `mask_mod`, `create_block_mask`
#   and `BlockMask` (`kv_num_blocks`, `full_kv_num_blocks`).
# - Tri Dao, Daniel Haziza, Francisco Massa, Grigory Sizov.
#   [Flash-Decoding for long-context
#   inference](https://pytorch.org/blog/flash-decoding/). 2023. Split the keys and
#   values, attend to each split in parallel, write "1 extra scalar per row and per
#   split: the log-sum-exp", and reduce.
# - Ofir Press, Noah A. Smith, Mike Lewis. [Train Short, Test Long: Attention with
#   Linear Biases Enables Input Length Extrapolation](https://arxiv.org/abs/2108.12409),
#   2022: ALiBi and its head slopes.
#
# Next: [Speculative decoding](speculative_decoding.md) makes memory-bound decoding pay:
# one pass checks several guessed tokens for little more than the cost of one. Later,
# [Over budget](eviction.md) keeps a fixed number of entries per head chosen by
# importance, the attention they received, rather than by position; and
# [Fewer bytes per token](cache_compression.md) keeps every token but stores less for
# each: a latent, fewer bits, or a state of fixed size.

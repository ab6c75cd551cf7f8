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
# [Common mistakes](#common-mistakes), at the end, quotes two that are easy to make.
#
# It assumes the KV cache ([Generating text with a KV cache](kv_cache.md)), tiled
# attention and the online softmax ([Attention without the T×T
# matrix](efficient_attention.md)), and the serving page. Shapes follow the site's
# [notation](../notation.md).

# %%
import itertools
import math
import textwrap
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import flex_attention as torch_flex

from attn_ref.decoder import TinyDecoder, kv_cache_bytes
from attn_ref.masks import sliding_window_mask
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
# a buffer of $W$ slots. The reference decodes without any cache: at every step it runs
# the whole text again, with the window written as an explicit `(T, T)` mask
# (`attn_ref.masks.sliding_window_mask`).

# %%
torch.manual_seed(0)
model = TinyDecoder(
    vocab_size=48,
    context_length=128,
    embed_dim=32,
    num_layers=2,
    num_heads=4,
)
model.eval()


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
# text several times longer. The prompt went in chunks of 10 tokens, so a chunk can
# overwrite slots that its own later queries no longer need. The last line checks that
# the window matters: without it the model chooses other tokens.
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
# columns. Here, 2 sinks and a window of 4:

# %%
positions = torch.arange(10)
sink_mask = sliding_window_mask(positions, positions, window=4, num_sinks=2)
print(sink_mask.int().numpy())

# %% [markdown]
# In the buffer, the first `num_sinks` slots hold the sinks for good, and the window
# rolls through the others. Decoding with 4 sinks and a window of 12 gives the tokens
# of that mask:

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
# tiles of 32 by 32:
#
# - **causal**;
# - **sliding window** of 48 positions;
# - **document**: four packed documents, causal within each;
# - **prefix-LM**: the first 64 positions (the prefix) see each other both ways, the
#   rest is causal;
# - **ALiBi**, causal: a score gets $m_h \cdot (j - i)$ added, a penalty growing with
#   the distance, with slope $m_h = 2^{-8(h+1)/H}$ for head $h$ (see the page on
#   [positions](../concepts/positions.md));
# - **soft-capping**, causal: a score $s$ becomes $c \tanh(s / c)$, with $c = 2$, so no
#   score exceeds $c$ in size.
#
# Each runs through `attn_ref`'s reference and through PyTorch's own
# `torch.nn.attention.flex_attention.flex_attention`, run eagerly on the CPU.

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
# The skipped share is the empty share: nearly half the tiles for causal
# attention, most of them for the sliding window and the document mask, and fewer for
# the prefix-LM, whose prefix columns are visible to every query. A score change
# skips nothing by itself; ALiBi and soft-capping skip what their causal mask
# skips.
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
# queries against $S$ keys in $H$ heads of size $d_k$ do $2 H L S d_k$ multiply-adds
# ($Q K^\top$, then the weights times $V$) and read $b (H L d_k + 2 H_{kv} S d_k)$
# bytes, for $b$ bytes per number (`attn_ref.serving.attention_intensity`). The table
# compares a prefill of $T$ tokens ($L = S = T$) with one decoding step after $T$
# tokens ($L = 1$, $S = T$), for the 7B-class shape with 32 and with 8 key/value heads.

# %%
print(f"{'T':>7}  prefill (H_kv=32)  decode (H_kv=32)  decode (H_kv=8)")
intensities = {}
for T in (512, 4_096, 32_768):
    intensities[T] = (
        attention_intensity(T, T, 32, 32, 128),
        attention_intensity(1, T, 32, 32, 128),
        attention_intensity(1, T, 32, 8, 128),
    )
    print(f"{T:>7,}", *(f"{x:>16.2f}" for x in intensities[T]))

# %% [markdown]
# A prefill does more work per byte the longer the prompt: every key is used by every
# query. A decoding step reads every key and value of the cache to use each one for a
# single query per head: about $H / (H_{kv} b)$ multiply-adds per byte, whatever the
# length. Grouped-query attention raises it by the group size, since every key read
# then serves a whole group of query heads. Batching more requests does not help
# attention, unlike the weight matrices: each request reads its own cache. That is why
# the memory a cache takes and the time a step takes grow together.
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
# step's keys over 1 to 8 workers; the result is compared with PyTorch's
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
# Every split count gives SDPA's output to float32 rounding. A plain average of the
# parts is wrong: the parts' softmaxes have different denominators, and the
# log-sum-exps carry them.
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
# The page's tile figures, as this build computed them:

# %%
print("mask            tiles skipped  |attn_ref - flex_attention|")
for name, r in flex_results.items():
    print(f"{name:<15} {r['skipped']:>13.1%} {r['error']:>27.1e}")
print(f"largest difference from flex_attention: {largest:.1e}")

# %% [markdown]
# ## Common mistakes
#
# **1. `partial.mean(dim=0)` to merge split-K's parts.** A plain average gives each
# worker the same weight, but each part's softmax has its own denominator. The
# parts must be weighted by $e^{\lambda_i - \lambda}$, from their log-sum-exps.
# [Split-K decoding](#split-k-decoding) printed how far the average lands from
# SDPA's output.
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
scores = q1 @ keys.transpose(-2, -1) / math.sqrt(64)  # (B, H, 1, S)
bounds = [round(1000 * i / 8) for i in range(9)]
splits = itertools.pairwise(bounds)  # (start, stop) of each worker's keys
lses = torch.stack([scores[..., a:b].logsumexp(-1) for a, b in splits])
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
#   Streaming Language Models with Attention Sinks](https://arxiv.org/abs/2309.17453).
#   2023. StreamingLLM; its reference code,
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
#   Linear Biases Enables Input Length Extrapolation](https://arxiv.org/abs/2108.12409).
#   2022. ALiBi and its head slopes.

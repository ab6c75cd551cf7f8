# %% [markdown]
# # Prefix caching: keeping keys and values across requests
#
# Many requests to a server start the same way: a system prompt, the same few-shot
# examples, the whole conversation so far. The keys and values of those tokens were
# computed for an earlier request and thrown away when it finished. This page keeps
# them. Finished requests leave their blocks of the paged cache in a *prefix cache*,
# found again by the tokens they hold, either in a radix tree (SGLang) or in a table
# of chained block hashes (vLLM); a new request starts from the longest cached prefix
# of its prompt. Reference counts keep shared blocks alive, and an eviction policy
# decides what to drop when the pool fills; three policies are compared on three
# kinds of traffic. The tokens a server generates with the cache are checked to be
# the very same bits as without it. Last, a prefix shared by many requests is attended
# once for all of them.
#
# It assumes [Serving attention](serving_batches.md) (the paged pool, block tables,
# `serve`) and [Batch invariance](batch_invariance.md), which makes "the very same
# bits" possible. Shapes follow the site's [notation](../notation.md).
#
# The picture is a radix tree after three prompts, in blocks of 4 characters. All
# three start with "You are ", two continue with "kind"; the tree stores each shared
# run of blocks once, and each request's own blocks as a leaf. A partial last block
# ("!", "y?", "o") is not cached. Below it, the pool: every cached block counts one
# user, the tree; the request still running, "You are kind. Why?", adds one to each
# block it reads. (The picture's folded code also holds the page's imports.)

# %% tags=["plot"]
import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import torch

from attn_ref.decoder import TinyDecoder
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.plotting import figure_to_svg
from attn_ref.serving import (
    BlockHashCache,
    Entry,
    PagedKVCache,
    RadixCache,
    Request,
    attention_intensity,
    batch_invariant,
    run_decoder,
    serve,
    shared_prefix_attention,
    split_kv_attention,
)
from attn_ref.training import ALPHABET, decode, encode

torch.set_grad_enabled(False)  # inference only: no gradients
# one thread: a page that runs alike on every machine's cores
torch.set_num_threads(1)


def wrap(text):
    """Printed text in lines of at most 79 characters."""
    return textwrap.fill(text, width=79, subsequent_indent="    ")


def ids(text):
    """The token ids of a text: one per character of the site's alphabet."""
    return encode(text).tolist()


TAB10 = {"cmap": "tab10", "vmax": 10}  # value i + 0.5: tab10's i-th colour
pic_pool = PagedKVCache(
    num_layers=1, num_blocks=12, block_size=4, num_kv_heads=1, head_dim=2
)
pic_tree = RadixCache(pic_pool)
pic_prompts = ["You are kind. Hi!", "You are kind. Why?", "You are terse. Go"]
for name, text in enumerate(pic_prompts):
    prompt = ids(text)
    hit = pic_tree.match(prompt[:-1])
    if hit:
        pic_pool.share(name, hit)  # the cached blocks, shared
    pic_pool.reserve(name, len(prompt) - len(hit) * 4)
    full = len(prompt) // 4
    pic_tree.insert(prompt[: 4 * full], pic_pool.tables[name][:full])
    if name != 1:
        pic_pool.release(name)  # finished; request 1 still runs


def place(entry, depth, slots):
    """Each node's column and depth: leaves in order, parents over a child."""
    children = list(entry.children.values())
    if not children:
        slots[entry] = (len(slots), depth)
        return slots[entry][0]
    lefts = [place(child, depth + 1, slots) for child in children]
    slots[entry] = (lefts[0], depth)
    return lefts[0]


slots = {}
for child in pic_tree.root.children.values():
    place(child, 0, slots)
fig, ax = canvas(10, 12.2)
note(ax, 0.2, 0.4, "radix tree: each node a run of blocks", ha="left")
x_of = {}  # node -> (x, y) of its first cell
for entry, (column, depth) in sorted(slots.items(), key=lambda e: e[1][1]):
    x, y = 0.4 + 3.4 * column, 1.2 + 2.4 * depth
    x_of[entry] = (x, y)
    texts = [
        decode(entry.tokens[i : i + 4]) for i in range(0, len(entry.tokens), 4)
    ]
    grid(ax, [2.5] * len(texts), x, y, **TAB10, labels=texts, cell=1.3)
    for i, b in enumerate(entry.blocks):
        note(ax, x + 1.3 * (i + 0.5), y + 1.65, f"block {b}", fontsize=8)
    if entry.parent in x_of:
        px, py = x_of[entry.parent]
        arrow(ax, (px + 0.6, py + 1.9), (x + 0.6, y))
note(ax, 0.2, 8.8, "pool: block, and its users", ha="left")
users = list(pic_pool.ref_counts)  # as they are now, before any eviction
held = [0.5 if n == 1 else 1.5 for n in users]
grid(
    ax,
    held,
    0.4,
    9.4,
    **TAB10,
    labels=[str(b) for b in range(12)],
    mask=[n > 0 for n in users],
    cell=0.8,
)
for b, n in enumerate(users):
    note(ax, 0.4 + 0.8 * (b + 0.5), 10.6, str(n), fontsize=10)
figure_to_svg(
    fig,
    alt="A radix tree of blocks of 4 characters. The root's child holds"
    " 'You ' and 'are '; it has two children: 'kind', which has the leaves"
    " '. Hi' and '. Wh',"
    " and 'ters' + 'e. G'. Below, a pool of 12 blocks with their users: "
    + ", ".join(f"block {b}: {n}" for b, n in enumerate(users))
    + "; the running request's cached blocks count 2, other cached ones 1.",
)

# %% [markdown]
# ## The same prefix, the same keys
#
# A decoder's keys and values at position $p$ come from the tokens at positions
# $0, \dots, p$ and from nothing else: attention is causal, and every other operation
# works on one position at a time. Two prompts that start with the same 24 characters
# have the same keys there, whatever follows. With the batch-invariant copy of the
# model (`batch_invariant`, from [Batch invariance](batch_invariance.md)) they are the
# same bits, so a later request can use an earlier one's keys as they are.
#
# The model is the serving pages' `TinyDecoder`, reading the site's 96 characters, with
# room for 256 positions. As there, its weights are random: every claim on this page is
# about computing the same thing from other blocks, which does not depend on what the
# weights are.

# %%
torch.manual_seed(0)
model = TinyDecoder(
    vocab_size=len(ALPHABET),
    context_length=256,
    embed_dim=32,
    num_layers=2,
    num_heads=4,
).eval()
exact = batch_invariant(model)  # each row in a fixed order
H_kv = model.blocks[0].attn.num_kv_heads
d_k = model.blocks[0].attn.head_dim

# %% [markdown]
# <details class="example">
# <summary>A helper: the keys each layer computes for a text</summary>
#
# `layer_keys` runs the model over a text in one forward pass
# (`attn_ref.serving.run_decoder`, attention split at 16 keys) and keeps the keys each
# layer computes.
#
# </details>


# %% tags=["deeper"]
def layer_keys(engine, text):
    """The keys every layer computes for a text, in one forward pass."""
    tokens = torch.tensor([ids(text)])  # (1, T)
    T, kept = tokens.shape[1], []

    def attend(layer, q, k, v):
        kept.append(k)
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        return split_kv_attention(q, k, v, allowed, split_size=16)

    run_decoder(engine, tokens, torch.arange(T)[None], attend)
    return kept  # one (1, H_kv, T, d_k) per layer


# %%


first = layer_keys(exact, "System: answer briefly.\nList the steps.")
second = layer_keys(exact, "System: answer briefly.\nWhy?")
shared = [
    torch.equal(a[:, :, :24], b[:, :, :24])
    for a, b in zip(first, second, strict=True)
]
print(
    "keys of the 24 shared positions, same bits in every layer:", all(shared)
)
print(
    "keys of position 24, same bits:",
    torch.equal(first[0][:, :, 24], second[0][:, :, 24]),
)

# %% [markdown]
# ## A radix tree of blocks
#
# The paged pool keeps keys and values in blocks of `block_size` positions. A block
# can be reused only whole, and only when every token before it is the same, so a
# prefix cache stores *full* blocks and keys each by its tokens and its prefix. SGLang
# (Zheng et al., 2024) keeps them in a radix tree: a tree of token sequences whose edges
# hold runs of tokens, split where two prompts part. In the paper, and by default,
# its pages hold one token each, so its tree matches to the token; `attn_ref.serving.RadixCache` does the same at
# block granularity, on a `PagedKVCache`:
#
# - `match(tokens)` walks down from the root as long as whole blocks match and returns
#   the blocks of the longest cached prefix; where the match ends inside a node, the
#   node is split in two;
# - `insert(tokens, blocks)` stores a request's full blocks after the part already
#   cached, and takes one reference to each new block;
# - `evict(n)` drops leaves, as described [below](#reference-counts-and-eviction).
#
# The tree of the picture, and what it finds for a fourth prompt:

# %%
for entry in pic_tree.entries():
    print(
        f"{decode(entry.tokens)!r:<16} blocks {entry.blocks},"
        f" hits {entry.hits}"
    )
new_prompt = ids("You are kind. Bye")
found = pic_tree.match(new_prompt[:-1], record=False)
print(
    f"'You are kind. Bye' finds blocks {found}:",
    repr(decode(new_prompt[: 4 * len(found)])),
)

# %% [markdown]
# The fourth prompt finds the blocks of "You are kind" and computes only ". Bye".
# `match` is given the prompt without its last token: a request needs the logits
# after its last prompt token to choose its first new one, and a block read from the
# cache brings keys and values, not logits. vLLM caps a hit the same way (its
# [`get_computed_blocks`](https://github.com/vllm-project/vllm/blob/003df2961dd8830c317a61f9745ccd557da9fa06/vllm/v1/core/kv_cache_manager.py)
# sets `max_cache_hit_length = request.num_tokens - 1`).
#
# ## Chained block hashes
#
# vLLM's automatic prefix caching finds the same blocks another way. Each full block
# gets a hash made from its parent block's hash and its own tokens,
#
# $$
# h_i = \operatorname{hash}(h_{i-1},\ \text{tokens of block } i),
# $$
#
# so $h_i$ stands for every token up to the end of block $i$, and one table maps hashes
# to blocks (vLLM hashes extra keys in too: a LoRA adapter's name, image hashes, a
# cache salt). A
# prompt looks up $h_0, h_1, \dots$ until one is missing.
# `attn_ref.serving.BlockHashCache` keeps such a table. Below, both indexes store the
# blocks of 30 prompts made of 3 system prompts and short questions, then look up 30
# others; they find the same blocks for every one.
#
# <details class="example">
# <summary>A helper: prompts over three system prompts</summary>
#
# `question_prompts(seed, n)` draws `n` prompts, each one of three system prompts
# ("System: you are Ada. Answer briefly.", Bob, Cy) followed by a question of 12
# random letters and spaces.
#
# </details>


# %% tags=["deeper"]
def question_prompts(seed, n):
    """Prompts that start with one of three system prompts."""
    g = torch.Generator().manual_seed(seed)
    systems = [
        f"System: you are {x}. Answer briefly.\n" for x in ("Ada", "Bob", "Cy")
    ]
    letters = "abcdefghijklmnopqrstuvwxyz "
    prompts = []
    for _ in range(n):
        pick = int(torch.randint(0, 3, (), generator=g))
        chars = torch.randint(0, len(letters), (12,), generator=g).tolist()
        question = "".join(letters[c] for c in chars)
        prompts.append(ids(f"{systems[pick]}User: {question}?\n"))
    return prompts


# %%
stored = question_prompts(seed=1, n=30)


def filled(index_type):
    """An index on its own pool, holding the 30 stored prompts."""
    pool = PagedKVCache(2, 400, 4, H_kv, d_k)
    index = index_type(pool)
    for name, prompt in enumerate(stored):
        pool.reserve(name, len(prompt))
        full = len(prompt) // 4
        index.insert(prompt[: 4 * full], pool.tables[name][:full])
        pool.release(name)
    return index


tree, table = filled(RadixCache), filled(BlockHashCache)
lookups = question_prompts(seed=2, n=30)
same = all(
    tree.match(p[:-1], record=False) == table.match(p[:-1], record=False)
    for p in lookups
)
print(f"blocks cached: tree {tree.num_blocks}, table {table.num_blocks}")
print("the same blocks found for all 30 new prompts:", same)

# %% [markdown]
# Both hold each shared block once. The tree walks one node per run of blocks and
# splits nodes; the table looks up one hash per block and needs no structure but the
# hashes. A hash can collide, two different prefixes with one hash: vLLM's design
# notes that its key "is not 100% collision free", and vLLM now hashes with SHA-256
# by default, "the most secure choice to avoid potential hash collisions"
# ([`vllm/config/cache.py`](https://github.com/vllm-project/vllm/blob/002f10e0cfa1373a19a0d2756598a34b700d20e5/vllm/config/cache.py)).
# `BlockHashCache` keeps each entry's tokens and parent and treats a mismatch as a
# miss.
#
# ## Reference counts and eviction
#
# A cached block is used by the cache and by every running request that reads it, and
# the pool's reference counts count them all (`PagedKVCache.retain` and `drop` for the
# cache, `share` for a request that starts from cached blocks). A block returns to the
# free list only when its count falls to zero. So when the pool runs short, the cache
# may evict only blocks that no request uses (count 1, the cache's own) and that no
# cached prefix continues from (leaves): SGLang implements "an LRU eviction policy that
# recursively evicts leaf nodes", where "a node is evictable if its reference counter
# is zero". SGLang's counter counts running requests only, so its zero is this pool's
# 1. Evicting a leaf can make its parent a leaf, evictable in turn.
#
# vLLM keeps the same rule another way: its cache holds no reference, and a cached
# block no request uses sits in the free queue, still found by its hash, until an
# allocation takes it, least recently used first (a finished request's blocks are
# queued last block first, so a prefix outlives what continues it). Here both indexes
# hold a reference and evict explicitly, which lets the policy be chosen.
#
# Which leaf goes first is the policy's choice (`attn_ref.serving.POLICIES`):
#
# - **LRU**: the least recently used;
# - **LFU**: the one with the fewest hits, the least recently used among equals;
# - **SLRU** (segmented LRU): entries used once (probation) before entries used twice
#   or more (protected), least recently used first within each. Its point is to resist
#   a *scan*, a burst of one-off requests that would flush everything under LRU.
#
# In the picture, request 1 still runs: its blocks count 2 and stay. Asking the tree
# to give back blocks evicts the finished leaves first, then "You are" only once no
# child hangs from it.

# %%
print("evictable now:", [decode(e.tokens) for e in pic_tree.evictable()])
print("blocks given back:", pic_tree.evict(12), "of 12 asked")
left = [decode(e.tokens) for e in pic_tree.entries()]
print("still cached:", left, "- free blocks:", pic_pool.num_free)

# %% [markdown]
# The blocks request 1 reads cannot go: "You are ", "kind" and ". Wh" have a
# reference count of 2.
#
# ## Serving with a prefix cache
#
# `serve(..., prefix_cache=...)` puts this in the scheduler. When it admits a request,
# it shares the cached blocks of the prompt's longest prefix (but the last token) and
# feeds only the rest; after every step it stores the full blocks each running
# request has written, so that a request can hit blocks of another that still runs;
# when blocks run out, it evicts before it preempts. The cache stays in the pool
# after `serve` returns. `serve` admits requests in the order they arrive; SGLang's
# paper instead runs the waiting requests with the longest cached prefix first
# (cache-aware scheduling, §3), which raises the hit rate further.
#
# Twenty requests over three system prompts arrive two steps apart. The cell serves
# them with and without a radix cache, with the batch-invariant engine of [Batch
# invariance](batch_invariance.md) (the fixed-order copy of the model, attention split
# at a fixed 16 keys), and compares every logit.

# %%
stream = [
    Request(tuple(p), 8, arrival=2 * i)
    for i, p in enumerate(question_prompts(seed=3, n=20))
]


def new_pool(num_blocks=400):
    """An empty paged cache, blocks of 4, shaped for the model."""
    return PagedKVCache(2, num_blocks, 4, H_kv, d_k)


# %%
cached_pool = new_pool()
with_cache = serve(
    exact,
    stream,
    cached_pool,
    chunk_size=32,
    split_size=16,
    prefix_cache=RadixCache(cached_pool),
)
without = serve(exact, stream, new_pool(), chunk_size=32, split_size=16)
prompt_tokens = sum(len(r.prompt) for r in stream)
saved = sum(with_cache.cached.values())
print(
    f"prompt tokens {prompt_tokens}, found in the cache {saved}"
    f" ({saved / prompt_tokens:.0%})"
)
same_bits = all(
    torch.equal(with_cache.logits[i], without.logits[i])
    for i in range(len(stream))
)
print("every logit of every request, same bits with and without:", same_bits)

# %% [markdown]
# The cache saves most of the system prompts' prefill, and changes no bit: every
# request reads keys and values that are, bit for bit, those it would have computed,
# and its own queries are computed in the same order as without the cache.
#
# That needs the batch-invariant engine. vLLM's design notes call prefix caching
# "almost a free lunch" that "won't change model outputs", and mathematically it does
# not; but with the library's linear layers and one-pass attention, a cached block was
# computed in another forward pass, with other rows beside it, than the one that
# would recompute it. The cell serves the stream with the plain model both ways.

# %%
plain_pool = new_pool()
plain_cached = serve(
    model,
    stream,
    plain_pool,
    chunk_size=32,
    prefix_cache=RadixCache(plain_pool),
)
plain = serve(model, stream, new_pool(), chunk_size=32)
moved = max(
    (plain_cached.logits[i] - plain.logits[i]).abs().max().item()
    for i in range(len(stream))
)
same_tokens = all(
    torch.equal(plain_cached.tokens[i], plain.tokens[i])
    for i in range(len(stream))
)
print(f"plain model: largest logit moved by the cache {moved:.1e}")
print("plain model: same tokens with and without:", same_tokens)

# %% [markdown]
# The logits move in their last bits (the size printed is this machine's). Whether a
# greedy token flips depends on whether some step's two best logits were that close;
# [Batch invariance](batch_invariance.md#a-servers-tokens-flipped-by-the-batch) counts
# such flips.
#
# ## Eviction on three traces
#
# How much a cache saves depends on the traffic and on the policy, once the pool is
# too small to keep everything. Three synthetic traces, folded below, run through
# `serve` on a pool of 128 blocks of 4 positions, at most 4 requests at a time:
#
# - **system prompts and scans**: 72 requests. Most start with one of three system
#   prompts (chosen 6 : 3 : 1) and ask a short question; the last five of every
#   twelve requests are one-off documents ("Summarise: " and 110 random characters),
#   a scan: only their first two blocks are shared;
# - **multi-turn chat**: 6 conversations of 4 turns. Each turn's prompt is the whole
#   conversation so far (the model's own earlier replies included) and a new message;
#   the turns of all conversations interleave;
# - **few-shot, shuffled**: 40 requests, each an instruction, 4 of 8 worked examples
#   in a random order, and a query.
#
# Each runs with the radix tree under LRU, LFU and SLRU, and with the hash table under
# LRU. The *hit rate* is the share of prompt tokens found in the cache, and the
# prefill tokens saved are those tokens. These runs use the plain model: what the
# cache holds depends only on the tokens, not on the last bits of the logits (only a
# flipped greedy reply in the chat trace could change it).
#
# <details class="example">
# <summary>The three traces</summary>
#
# Questions and documents are random lowercase letters and spaces. The chat's replies are the
# model's own: the trace is built turn by turn, each turn served once without a cache,
# and its replies written into the next turn's prompts.
#
# </details>


# %% tags=["deeper"]
LETTERS = "abcdefghijklmnopqrstuvwxyz     "


def random_text(g, n):
    return "".join(LETTERS[i] for i in torch.randint(0, 31, (n,), generator=g))


def system_trace(seed, n=72):
    g = torch.Generator().manual_seed(seed)
    names = ("Ada", "Bob", "Cy")
    systems = [f"System: you are {x}. Answer briefly.\n" for x in names]
    popularity = torch.tensor([6.0, 3.0, 1.0])
    requests = []
    for i in range(n):
        if i % 12 >= 7:  # a burst of one-off documents
            text = "Summarise: " + random_text(g, 110)
        else:
            pick = int(torch.multinomial(popularity, 1, generator=g))
            text = systems[pick] + "User: " + random_text(g, 12) + "?\n"
        requests.append(Request(tuple(ids(text)), 4, arrival=i))
    return requests


def chat_trace(seed, conversations=6, turns=4, gap=40):
    g = torch.Generator().manual_seed(seed)
    history = [ids("System: be helpful.\n")] * conversations
    requests = []
    for turn in range(turns):
        messages = [f"User: {random_text(g, 10)}\nBot:" for _ in history]
        prompts = [h + ids(m) for h, m in zip(history, messages, strict=True)]
        replies = serve(
            model, [Request(tuple(p), 10) for p in prompts], new_pool(600)
        ).tokens
        requests += [
            Request(tuple(p), 10, arrival=turn * gap + c)
            for c, p in enumerate(prompts)
        ]
        history = [
            p + replies[c].tolist() + ids("\n") for c, p in enumerate(prompts)
        ]
    return requests


def few_shot_trace(seed, n=40, shuffled=True):
    g = torch.Generator().manual_seed(seed)
    examples = [
        f"{random_text(g, 6)} -> {random_text(g, 6)}\n" for _ in range(8)
    ]
    requests = []
    for i in range(n):
        pick = torch.randperm(8, generator=g)[:4].tolist()
        shots = "".join(
            examples[j] for j in (pick if shuffled else sorted(pick))
        )
        query = random_text(g, 6) + " ->"
        requests.append(
            Request(tuple(ids("Translate.\n" + shots + query)), 4, arrival=i)
        )
    return requests


def run_trace(requests, index_type, policy, num_blocks=128, block_size=4):
    """One trace served with a prefix cache: its hit rate and its blocks."""
    pool = PagedKVCache(2, num_blocks, block_size, H_kv, d_k)
    cache = index_type(pool, policy)
    run = serve(
        model, requests, pool, chunk_size=32, max_running=4, prefix_cache=cache
    )
    prompt = sum(len(r.prompt) for r in requests)
    saved = sum(run.cached.values())
    return {
        "hit rate": saved / prompt,
        "saved": saved,
        "prompt": prompt,
        "running": [s["blocks"] - s["cache_only"] for s in run.steps],
        "cache only": [s["cache_only"] for s in run.steps],
        "steps": [s["step"] for s in run.steps],
    }


# %% tags=["plot"]
traces = {
    "system prompts": system_trace(seed=4),
    "multi-turn chat": chat_trace(seed=5),
    "few-shot, shuffled": few_shot_trace(seed=6),
}
setups = {  # name -> (index, policy)
    "tree, LRU": (RadixCache, "lru"),
    "tree, LFU": (RadixCache, "lfu"),
    "tree, SLRU": (RadixCache, "slru"),
    "hashes, LRU": (BlockHashCache, "lru"),
}
results = {
    (trace, setup): run_trace(requests, *setups[setup])
    for trace, requests in traces.items()
    for setup in setups
}
print("trace               cache         hit rate  tokens saved  peak running")
for (trace, setup), r in results.items():
    print(
        f"{trace:<19} {setup:<12} {r['hit rate']:>9.1%} {r['saved']:>7,}"
        f" of {r['prompt']:<5,} {max(r['running']):>5} of 128"
    )

# %% [markdown]
# *Peak running* is the most blocks the running requests held at once, of the pool's
# 128; the cache lives in what they leave. The chart shows the hit rates, and the pool
# over time in the system-prompt trace: blocks running requests hold (some of them
# cached too), and blocks only the cache holds.

# %% tags=["plot"]
fig, axes = plt.subplots(2, 1, figsize=(4.6, 6.2), layout="constrained")
ax = axes[0]
width = 0.8 / len(setups)
for k, setup in enumerate(setups):
    rates = [results[trace, setup]["hit rate"] for trace in traces]
    ax.bar(
        np.arange(len(traces)) + (k - 1.5) * width,
        rates,
        width,
        label=setup,
        color=f"C{k}",
    )
ax.set_xticks(range(len(traces)), [t.replace(", ", ",\n") for t in traces])
ax.set(ylabel="hit rate", ylim=(0, 1))
ax.legend(ncols=2, fontsize=8)
for ax, setup in zip(axes[1:], ("tree, SLRU",), strict=True):
    r = results["system prompts", setup]
    ax.stackplot(
        r["steps"],
        r["running"],
        r["cache only"],
        labels=["held by running requests", "held by the cache alone"],
        colors=["C0", "C1"],
        step="post",
    )
    ax.axhline(128, color="0.5", linestyle="--")
    ax.set(
        xlabel="step",
        ylabel="blocks",
        ylim=(0, 150),
        title=f"system prompts, {setup}: the pool of 128",
    )
    ax.legend(loc="lower right", fontsize=8)
figure_to_svg(
    fig,
    alt="Top: hit rates, grouped by trace, one bar per cache. "
    + "; ".join(
        f"{trace}: "
        + ", ".join(f"{s} {results[trace, s]['hit rate']:.0%}" for s in setups)
        for trace in traces
    )
    + ". Bottom: over the steps of the system-prompt trace, blocks held by"
    " running requests and blocks held only by the cache, stacked, filling the"
    " pool of 128"
    " but never above it.",
)

# %% [markdown]
# What the table shows, on these traces (the exact numbers are this page's):
#
# - In the system-prompt trace most prompt tokens belong to the one-off documents,
#   and no cache can save any of theirs after the first two blocks, so its hit rate
#   stays low under every policy. What it
#   can save, the system prompts, is what the policy decides: a burst of documents is
#   a scan, and under LRU it pushes the rarer system prompts out; LFU and SLRU keep
#   what was used twice and let the documents' blocks go first. On each of the three
#   traces, LFU and SLRU find more than LRU.
# - The chat caches each conversation's growing history, the model's replies
#   included: a turn starts from the previous turn's prompt and reply when they are
#   still cached, and a larger pool keeps more of them (exercise 3).
# - Shuffled examples defeat a prefix cache: two prompts share blocks only up to their
#   first difference, here mostly the instruction and, sometimes, the first example.
#   Exercise 2 fixes the order.
# - The tree and the table find the same blocks; they differ in what they evict at a
#   time, a whole leaf node or a single block, so their hit rates under one policy
#   can differ a little.
#
# ## Attending to a shared prefix once
#
# When many requests decode after the same prefix, each step reads the prefix's keys
# and values once *per request*, for one query each: matrix-vector products, bound by
# memory. Attention over a split of the keys merges exactly
# ([split-K decoding](serving_long_contexts.md#split-k-decoding)), so a request's
# attention over [prefix; its own suffix] is the merge of its attention over the
# prefix and over the suffix. Hydragen (Juravsky et al., 2024) and FlashInfer's cascade
# inference compute the prefix part for all requests at once: the queries of the
# batch, stacked, against the prefix's keys, one matrix-matrix product that reads them
# once (in the ideal; a kernel reads them once per tile of queries, not once per
# request). `attn_ref.serving.shared_prefix_attention` does this, and merges with each
# request's suffix by its log-sum-exp. With $O_P$ and $O_S$ the two parts' outputs and
# $\lambda_P$, $\lambda_S$ the log-sum-exps of their *scaled* scores,
#
# $$
# O = \frac{e^{\lambda_P} O_P + e^{\lambda_S} O_S}{e^{\lambda_P} + e^{\lambda_S}}
#   = e^{\lambda_P - \lambda} O_P + e^{\lambda_S - \lambda} O_S,
# \qquad \lambda = \log\left(e^{\lambda_P} + e^{\lambda_S}\right),
# $$
#
# computed on the right, where no exponential can overflow. This is FlashInfer's merge
# operator ⊕.
#
# Eight requests share a prefix of 512 keys and have 1 to 40 of their own; the
# reference is each request's attention in float64 over its whole sequence.

# %%
g = torch.Generator().manual_seed(7)
B, H, d = 8, 8, 64
queries = torch.randn(B, H, 1, d, generator=g)  # one decoding step each
prefix_k, prefix_v = torch.randn(2, H, 512, d, generator=g)  # (H_kv, P, d)
own = [int(n) for n in torch.randint(1, 41, (B,), generator=g)]
suffix_k = [torch.randn(H, n, d, generator=g) for n in own]
suffix_v = [torch.randn(H, n, d, generator=g) for n in own]
cascade = shared_prefix_attention(
    queries, prefix_k, prefix_v, suffix_k, suffix_v
)
worst = 0.0
for b in range(B):
    k = torch.cat([prefix_k, suffix_k[b]], dim=1).double()  # (H, S, d)
    v = torch.cat([prefix_v, suffix_v[b]], dim=1).double()
    scores = queries[b].double() @ k.mT / math.sqrt(d)  # (H, 1, S)
    reference = scores.softmax(dim=-1) @ v  # (H, 1, d)
    worst = max(worst, (cascade[b].double() - reference).abs().max().item())
print(f"largest |shared-prefix attention - float64 attention|: {worst:.1e}")

# %% [markdown]
# The merge is exact; what differs is float32 rounding. The work saved is memory
# traffic. Decoding one step of $B$ requests reads the prefix's keys and values $B$
# times without the split, once with it; the multiply-adds are the same. The table
# counts the bytes one layer's attention reads for the prefix in one decoding step, in
# 16-bit numbers (each layer has its own prefix keys and values, so a step reads this
# much once per layer), for the 7B-class
# shape of the long-context page (32 query heads, 8 key/value heads of 128), a prefix
# of 4,096 tokens, and the arithmetic intensity of the prefix's attention
# (`attention_intensity`): $L = B$ queries per head against the prefix.

# %%
P, H_q, H_k, d_h = 4096, 32, 8, 128
prefix_bytes = 2 * P * H_k * d_h * 2  # keys and values, 2 bytes a number
print("   B  prefix MiB read per layer, apart  once  intensity: apart  once")
for B_req in (1, 8, 64, 256):
    apart = B_req * prefix_bytes / 2**20
    once = prefix_bytes / 2**20
    alone = attention_intensity(1, P, H_q, H_k, d_h)
    batched = attention_intensity(B_req, P, H_q, H_k, d_h)
    print(
        f"{B_req:>4} {apart:>30,.0f} {once:>5,.0f} {alone:>21.2f}"
        f" {batched:>5.1f}"
    )

# %% [markdown]
# Apart, the prefix's bytes grow with the batch and the intensity stays where decoding
# is memory-bound. Attended once, the bytes stay put and every byte serves $B$ queries
# per head: FlashInfer reports its shared-prefix decoding kernel up to 31 times faster
# than vLLM 0.2.6's PageAttention kernel this way, on an H100, for a shared prompt of
# 32,768 tokens, batches of 128 or more and suffixes of at most 256 tokens.
#
# ## Summary
#
# - A request's keys and values at a position depend only on the tokens up to it, so
#   full blocks can be reused by any later request with the same prefix.
# - A radix tree (SGLang) and chained block hashes (vLLM) find the longest cached
#   prefix in whole blocks; a request keeps its last prompt token to compute.
# - Reference counts keep a block alive while the cache or a request holds it; the
#   cache evicts unused leaves, by LRU, LFU or SLRU. Which wins depends on the traffic.
# - With the batch-invariant engine, caching changes no bit of any logit; without it,
#   the last bits move.
# - A prefix shared by many decoding requests can be attended once for all of them
#   and merged with each suffix by its log-sum-exp.
#
# ## Common pitfalls
#
# **1. A hit counter that never counts.** A frequency-aware policy ranks entries by
# their hits; if the code that finds an entry updates its time but forgets its count,
# every entry keeps the count it was stored with, and the policy sorts by time alone:
# it is LRU under another name. SGLang's RadixCache had this bug until
# [#18843](https://github.com/sgl-project/sglang/pull/18843): `node.hit_count` "was
# never incremented during `match_prefix` or `insert`", which "rendered any
# frequency-based policies (like the existing LFU) ineffective". The cell runs SLRU
# with such a tree on the three traces, next to LRU and the real SLRU.


# %%
class NeverCounts(RadixCache):
    def _touch(self, entry):  # the mistake: the time, and no hit
        entry.last_access = self.clock


never_counts = {}  # trace -> SLRU's hit rate when hits are not counted
print("trace               LRU   SLRU without hits   SLRU")
for trace, requests in traces.items():
    never_counts[trace] = run_trace(requests, NeverCounts, "slru")["hit rate"]
    lru = results[trace, "tree, LRU"]["hit rate"]
    real = results[trace, "tree, SLRU"]["hit rate"]
    print(f"{trace:<19} {lru:4.1%} {never_counts[trace]:19.1%} {real:6.1%}")

# %% [markdown]
# Nothing fails: the cache still caches, and the hit rates are plausible. They are
# exactly LRU's. A test that compares a frequency-aware policy with LRU on a scan is
# what catches it.
#
# **2. Keying a block by its own tokens.** A block's keys and values depend on every
# token before it, so its key must too. A table keyed by the block's tokens alone
# finds a block computed after another prefix, with its positions and its context,
# and serves it as the start of a new prompt. No error, and other logits. The cell
# stores one request's blocks in such a table, then serves a request whose first
# block is that request's second, and compares with serving it without a cache.


# %%
class OwnTokensOnly(BlockHashCache):
    def _path(self, tokens):  # the mistake: each block by its own tokens
        path = []
        for i in range(0, len(tokens) // 4 * 4, 4):
            entry = self.table.get(hash(tuple(tokens[i : i + 4])))
            if entry is None:
                break
            path.append(entry)
        return path

    def _add(self, parent, tokens, blocks):
        for i, block in enumerate(blocks):
            own = tuple(tokens[4 * i : 4 * i + 4])
            entry = Entry(own, [block], parent, key=hash(own))
            self.table[entry.key] = parent.children[entry.key] = entry
            parent = entry


# %%
first_request = Request(tuple(ids("You are kind. Hi")), 4)
later = Request(
    tuple(ids("are kind. Hi")), 4
)  # the first prompt's second block on
fresh = serve(exact, [later], new_pool(), split_size=16)  # no cache at all
keyed = {}  # index -> (tokens it found, the request's logits)
for index_type in (BlockHashCache, OwnTokensOnly):
    pool = new_pool()
    index = index_type(pool)
    serve(exact, [first_request], pool, split_size=16, prefix_cache=index)
    hit = serve(exact, [later], pool, split_size=16, prefix_cache=index)
    keyed[index_type.__name__] = (hit.cached[0], hit.logits[0])
    gap = (hit.logits[0] - fresh.logits[0]).abs().max().item()
    print(
        f"{index_type.__name__:<14} found {hit.cached[0]} tokens,"
        f" largest logit difference {gap:.2g}"
    )

# %% [markdown]
# Chaining each hash to its parent's (vLLM's "parent hash value") makes a block's key
# name its whole prefix.
#
# **3. Matching the whole prompt.** A prompt whose every block is cached leaves
# nothing to compute, and nothing computed means no logits to choose the first new
# token from. The cell looks up a prompt of 16 characters, four full blocks, in a tree
# that holds them.

# %%
pool = new_pool()
tree16 = RadixCache(pool)
prompt16 = ids("You are kind. Hi")
pool.reserve("r", 16)
tree16.insert(prompt16, pool.tables["r"])
pool.release("r")
whole = len(tree16.match(prompt16, record=False)) * 4
capped = len(tree16.match(prompt16[:-1], record=False)) * 4
print(f"match(prompt): {whole} of 16 cached, {16 - whole} left to compute")
print(
    f"match(prompt[:-1]): {capped} of 16 cached, {16 - capped} left to compute"
)

# %% [markdown]
# Matching all but the last token leaves its block to compute (a whole block, since a
# hit comes in whole blocks), which is what vLLM does: "When all tokens hit the cache,
# we must recompute the last token to obtain logits."
#
# ## Exercises
#
# **1. Block size.** Serve the system-prompt trace with LRU and blocks of 2, 4, 8 and 16
# positions (with pools of the same number of positions, 512), and print the hit rate.
# Only full blocks are cached: what do larger blocks lose?


# %% tags=["solution"]
def findable(prompts, size):
    """The prompt tokens a cache could find at most: each prompt's longest
    common prefix with an earlier one (but its last token), in whole blocks."""
    total = 0
    for i, prompt in enumerate(prompts):
        shared = 0
        for earlier in prompts[:i]:
            n = 0
            while n < min(len(prompt) - 1, len(earlier)) and (
                prompt[n] == earlier[n]
            ):
                n += 1
            shared = max(shared, n)
        total += shared // size * size
    return total


system_prompts = [r.prompt for r in traces["system prompts"]]
for size in (2, 4, 8, 16):
    r = run_trace(
        traces["system prompts"],
        RadixCache,
        "lru",
        num_blocks=512 // size,
        block_size=size,
    )
    most = findable(system_prompts, size) / r["prompt"]
    print(
        f"blocks of {size:>2}: hit rate {r['hit rate']:.1%},"
        f" at most {most:.1%}"
    )

# %% [markdown]
# Every prompt's partial last block is computed again, and so is the part of a shared
# prefix that ends inside a block, so the most a cache could find (the second
# number) falls as the block doubles. The hit rate stays below that bound but need
# not follow it: with the pool fixed at 512 positions, the block size also changes
# what eviction keeps and when blocks are stored. Smaller blocks cost more entries
# and more lookups instead.

# %% [markdown]
# **2. Examples in a fixed order.** Build the few-shot trace with each request's
# examples sorted, and compare its hit rate under LRU with the shuffled trace's.

# %% tags=["solution"]
ordered = few_shot_trace(seed=6, shuffled=False)
fixed_rate = run_trace(ordered, RadixCache, "lru")["hit rate"]
shuffled_rate = results["few-shot, shuffled", "tree, LRU"]["hit rate"]
print(f"shuffled {shuffled_rate:.1%}, sorted {fixed_rate:.1%}")

# %% [markdown]
# **3. A bigger pool.** Serve the chat trace with LRU and SLRU on pools of 96 to 256
# blocks. Where do the policies stop mattering?

# %% tags=["solution"]
for blocks in (96, 128, 192, 256):
    rates = [
        run_trace(
            traces["multi-turn chat"], RadixCache, policy, num_blocks=blocks
        )["hit rate"]
        for policy in ("lru", "slru")
    ]
    print(f"{blocks:>3} blocks: LRU {rates[0]:.1%}, SLRU {rates[1]:.1%}")

# %% [markdown]
# **4. FlashInfer's setting.** For a prefix of 32,768 tokens, 32 heads of 128 (no
# grouping) and 256 requests, print the bytes one layer reads for the prefix in one
# decoding step, in GiB, with and without attending it once.

# %% tags=["solution"]
per_copy = 2 * 32_768 * 32 * 128 * 2  # keys and values in 16 bits
print(
    f"apart: {256 * per_copy / 2**30:,.0f} GiB,"
    f" once: {per_copy / 2**30:.1f} GiB"
)

# %% [markdown]
# ## References
#
# - Lianmin Zheng, Liangsheng Yin, Zhiqiang Xie, Chuyue Sun, Jeff Huang, Cody Hao Yu,
#   Shiyi Cao, Christos Kozyrakis, Ion Stoica, Joseph E. Gonzalez, Clark Barrett, Ying
#   Sheng. [SGLang: Efficient Execution of Structured Language Model
#   Programs](https://arxiv.org/abs/2312.07104). NeurIPS 2024. RadixAttention: the KV
#   cache of all requests in a radix tree, "an LRU eviction policy that recursively
#   evicts leaf nodes", a reference counter per node, "evictable if its reference
#   counter is zero".
# - vLLM. [Automatic Prefix Caching](https://docs.vllm.ai/en/latest/design/prefix_caching/).
#   Block hashes from the "parent hash value" and the "block tokens"; "we only cache
#   full blocks"; collisions and SHA-256; the free queue evicting least recently used
#   blocks first. And its [`get_computed_blocks`](https://github.com/vllm-project/vllm/blob/003df2961dd8830c317a61f9745ccd557da9fa06/vllm/v1/core/kv_cache_manager.py):
#   "When all tokens hit the cache, we must recompute the last token to obtain logits."
# - [sgl-project/sglang #18843](https://github.com/sgl-project/sglang/pull/18843).
#   "Add SLRU eviction policy & fix RadixCache hit_count bug": probation below 2 hits,
#   protected at 2 or more; the hit count that was never incremented. SGLang's
#   [eviction strategies](https://github.com/sgl-project/sglang/blob/008b79d2358b08adf9b6c879625030f890c8c4e2/python/sglang/srt/mem_cache/evict_policy.py)
#   rank a node by its last access (LRU) or by its hits, then its last access (LFU).
# - Jordan Juravsky, Bradley Brown, Ryan Ehrlich, Daniel Y. Fu, Christopher Ré, Azalia
#   Mirhoseini. [Hydragen: High-Throughput LLM Inference with Shared
#   Prefixes](https://arxiv.org/abs/2402.05099). 2024. Attention over the shared prefix
#   and the unique suffixes computed separately, the prefix part "batching queries
#   together across sequences".
# - Zihao Ye, Ruihang Lai, Bo-Ru Lu, Chien-Yu Lin, Size Zheng, Lequn Chen, Tianqi Chen,
#   Luis Ceze. [Cascade Inference: Memory Bandwidth Efficient Shared Prefix Batch
#   Decoding](https://flashinfer.ai/2024/02/02/cascade-inference.html). 2024. The merge
#   of attention states by their log-sum-exp; "up to 31x speedup" over vLLM's
#   PageAttention for a shared prompt of 32,768 tokens.
#
# Next: [Attention bugs seen in the wild](../practice/bugs.md) collects mistakes that
# real projects shipped, each with the check that catches it.

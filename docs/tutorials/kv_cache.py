# %% [markdown]
# # Generating text with a KV cache, and grouped-query attention
#
# A language model writes one token at a time. It reads the text so far, predicts
# the next token, appends it and starts again. Done naively, every step runs the
# whole model over the whole text once more. This page builds a tiny decoder,
# lets it generate with and without a *key/value cache*, and shows that the cache
# changes nothing but the cost. It then counts and times that cost. It shows the mask
# mistake that breaks cached attention with PyTorch's `is_causal`. Last, it computes how
# much memory a cache takes in real models, and shrinks it with multi-query and
# grouped-query attention.
#
# It assumes causal self-attention
# ([Self-attention with a causal mask](causal_self_attention.md)), multi-head attention
# ([Scaled dot-product attention, step by step](scaled_dot_product_step_by_step.md)) and
# the block a model stacks ([The transformer block](../concepts/transformer_block.md)).
# Shapes follow the site's [notation](../notation.md): `(B, T, C)` for tokens,
# `(B, H, T, d_k)` for heads.
#
# The model's weights are random, drawn with a fixed seed, and it is never trained.
# This page claims two things: cached and uncached generation agree, and the cost grows
# as counted. Neither depends on what the weights are. Training a model that writes
# readable text would take far longer than the few seconds this page may spend when the
# site is built. So the text it writes is gibberish, on purpose.
#
# Here is the idea on the page's model, for a prompt of 4 characters and 3 generated
# ones (layer 0, head 0; the model and its numbers are built in the next sections).
# Each key is drawn as 6 of its 16 numbers, red above zero and blue below; each weight
# in viridis, from dark purple (0) to yellow (1); hatched where nothing is computed.

# %% tags=["plot"]
import string

import torch

from attn_ref.cache import KVCache
from attn_ref.decoder import TinyDecoder
from attn_ref.diagrams import Box, canvas, grid, note, outline
from attn_ref.masks import causal_mask
from attn_ref.plotting import figure_to_svg

torch.set_grad_enabled(False)  # generation only: no gradients
VOCAB = string.ascii_lowercase + string.ascii_uppercase + string.digits + " ."
torch.manual_seed(0)  # the model of the section "A tiny decoder"
model = TinyDecoder(len(VOCAB), 512, 64, num_layers=4, num_heads=4).eval()
calls = []  # per call of the model: layer 0's weights of head 0, (L, S)
hook = model.blocks[0].attn.register_forward_hook(
    lambda module, inputs, output: calls.append(output[1][0, 0])
)
picture_cache = KVCache(model.num_layers)
picture_tokens = torch.tensor([[VOCAB.index(ch) for ch in "the "]])
# the prompt first: 4 positions at once
logits = model(picture_tokens, picture_cache)
for _ in range(3):  # then one generated token at a time
    new = logits[:, -1:].argmax(dim=-1)  # (B, 1): the greedy choice
    picture_tokens = torch.cat([picture_tokens, new], dim=1)
    logits = model(new, picture_cache)
hook.remove()
del hook  # a handle, not data to keep
T_pic = picture_tokens.shape[1]
picture_weights = torch.zeros(T_pic, T_pic)  # row t: query t's weights
computed = torch.zeros(T_pic, T_pic, dtype=torch.bool)  # hatched: not computed
row = 0
for w in calls:
    L_call, S_call = w.shape  # queries of this call, keys so far
    picture_weights[row : row + L_call, :S_call] = w
    visible = causal_mask(L_call, S_call, lower_right=True)
    computed[row : row + L_call, :S_call] = visible
    row += L_call
chars = ["␣" if VOCAB[i] == " " else VOCAB[i] for i in picture_tokens[0]]
fig, ax = canvas(10, 5.8)
keys = grid(ax, picture_cache.keys[0][0, 0, :, :6], 1.9, 1.4, cell=0.5)
note(ax, keys.center[0], 0.5, "cached keys")
note(ax, keys.center[0], 0.95, "(layer 0, head 0)", fontsize=10)
box = grid(
    ax, picture_weights, 5.4, 1.4, cmap="viridis", mask=computed, cell=0.5
)
note(ax, box.center[0], 0.5, "weights each call")
note(ax, box.center[0], 0.95, "computes", fontsize=10)
for t, ch in enumerate(chars):
    note(ax, 9.2, 1.65 + 0.5 * t, ch)  # the query's token
    note(ax, box.x + 0.25 + 0.5 * t, 5.2, ch, fontsize=10)  # the key's
row = 0
for n, w in enumerate(calls):
    rows = w.shape[0]
    outline(
        ax, Box(keys.x, 1.4 + 0.5 * row, keys.width, 0.5 * rows), width=1.5
    )
    outline(
        ax,
        Box(box.x, 1.4 + 0.5 * row, 0.5 * w.shape[1], 0.5 * rows),
        width=1.5,
    )
    step = "prompt" if n == 0 else f"step {n}"
    note(ax, 1.75, 1.4 + 0.5 * (row + rows / 2), step, ha="right", fontsize=10)
    row += rows
figure_to_svg(
    fig,
    alt="Left, the cached keys of layer 0, head 0, one row per position: the "
    "prompt's 4 rows, written by the first call, then one row more at each of "
    "3 steps. Right, the weights each call computes: the prompt's 4 by 4 "
    "causal block at once, then one row per step over every key so far: "
    + ", ".join(
        f"step {n}: 1 query × {w.shape[1]} keys"
        for n, w in enumerate(calls[1:], 1)
    ),
)

# %% [markdown]
# The first call runs the prompt: it computes 4 keys (and 4 values, not drawn)
# and the prompt's 4 by 4 block of causal weights. Each later step runs one new token:
# it appends one key and one value to the cache, and computes one row of weights, its
# query against every key so far. The rows already in the cache never change, and no
# row of weights is ever computed twice. Without the cache, every step would recompute
# every row on the right.

# %%
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import torch.nn.functional as F

from attn_ref.decoder import decoding_flops, generate, kv_cache_bytes
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.measure import cpu_time_ms
from attn_ref.multihead import MultiHeadAttention, repeat_kv_heads

torch.set_num_threads(1)  # results that do not depend on the machine's cores

# %% [markdown]
# ## A tiny decoder
#
# `attn_ref.TinyDecoder` is a decoder-only transformer reduced to its parts. A
# token embedding and a learned position embedding are added. A few blocks
# follow, each a causal multi-head attention and a small MLP, both in
# pre-norm form (`x + attn(norm(x))`, then `x + mlp(norm(x))`), as
# [the transformer block](../concepts/transformer_block.md) shows. A final norm and
# a linear head turn every position's vector into one *logit* per vocabulary entry:
# a score for each possible next token. The vocabulary here is a set of characters,
# so that tokens print as text.

# %%
VOCAB = string.ascii_lowercase + string.ascii_uppercase + string.digits + " ."


def encode(text):
    return torch.tensor([[VOCAB.index(ch) for ch in text]])  # (B=1, T)


def decode(ids):
    return "".join(VOCAB[i] for i in ids.tolist())


torch.manual_seed(0)
model = TinyDecoder(
    vocab_size=len(VOCAB),
    context_length=512,
    embed_dim=64,
    num_layers=4,
    num_heads=4,
).eval()
n_parameters = sum(p.numel() for p in model.parameters())
print(f"vocabulary: {len(VOCAB)} tokens; parameters: {n_parameters:,}")
print(f"{model.num_layers} blocks like this one:\n{model.blocks[0]}")

# %% [markdown]
# ## Greedy generation, with and without the cache
#
# `attn_ref.generate` decodes *greedily*: at each step it appends the token with the
# largest logit. Without a cache, each step calls the model on the whole text so
# far and keeps the last position's logits. With a cache, the first step calls it
# on the prompt, and every later step on the one token chosen last. Both return the
# tokens and, for every step, the logits the new token was chosen from.

# %%
prompt = encode("the cache ")
cached_tokens, cached_logits = generate(model, prompt, 20, use_cache=True)
plain_tokens, plain_logits = generate(model, prompt, 20, use_cache=False)
print("with the cache:", repr(decode(cached_tokens[0])))
print("without:       ", repr(decode(plain_tokens[0])))
print("identical tokens:", torch.equal(cached_tokens, plain_tokens))
difference = (cached_logits - plain_logits).abs().max()
print(
    f"largest |logit difference| over the {cached_logits.shape[1]} steps: "
    f"{difference:.1e}"
)
best_two = cached_logits.topk(
    2, dim=-1
).values  # (B, steps, 2): the two largest logits of each step
gap = (best_two[..., 0] - best_two[..., 1]).min()
print(f"smallest gap between the best and the second-best logit: {gap:.1e}")

# %% [markdown]
# The tokens are identical. The logits agree up to the last bits of a float32
# number. The two runs multiply matrices of different shapes, so the same sums can
# be added up in a different order, and float addition is not associative. That
# rounding is far smaller than the smallest gap between the winning logit and the
# runner-up, so it never changes which token wins.
#
# ## What the cache holds, and why it is allowed
#
# In each attention layer, a new token needs the keys and values of every earlier
# position. The cache keeps them: for each layer, one tensor of keys and one of
# values, of shape `(B, H_kv, T, d_k)` (here `H_kv` equals the number of heads `H`).
# `KVCache.update` appends the new positions of a layer and returns all of them.

# %%
cache = KVCache(model.num_layers)
model(prompt, cache)  # the prompt fills the cache
print(
    "after the prompt:",
    cache.length,
    "positions; layer 0 keys",
    tuple(cache.keys[0].shape),
)
model(encode("x"), cache)  # one more token: one more position in every layer
print(
    "after one token: ",
    cache.length,
    "positions; layer 0 keys",
    tuple(cache.keys[0].shape),
)
print("bytes held:", cache.nbytes)

# %% [markdown]
# Keeping old keys and values is only correct if appending a token never changes
# them. Causal attention guarantees this. Position $i$ attends to positions $0, \dots, i$
# only, so its output in a layer depends on tokens $0, \dots, i$ and on nothing
# later. By induction over the layers, so does every vector computed at
# position $i$, its keys and values included. The cell below checks it. It runs
# the model on the prompt, then on the prompt plus one more token, and compares
# the keys and values both runs computed for the prompt's positions.

# %%
short, longer = KVCache(model.num_layers), KVCache(model.num_layers)
model(prompt, short)
model(torch.cat([prompt, encode("x")], dim=1), longer)
T0 = prompt.shape[1]
moved = max(
    (new[:, :, :T0] - old).abs().max()
    for new, old in zip(
        longer.keys + longer.values, short.keys + short.values, strict=True
    )
)
print(
    "largest change of a cached key or value when a token is appended:",
    f"{moved:.1e}",
)

# %% [markdown]
# The change printed is at most float32 rounding. It can be exactly zero: the new
# token reaches the earlier positions only through a weight of exactly
# $e^{-\infty} = 0$, and if the matrix routines add each earlier row's numbers in the
# same order in both runs, they give the same bits. A routine that splits a product of
# 11 rows differently from one of 10 may change the last bits, for the same reason as
# above.
#
# ## Counting the work per token
#
# Take one generated token, when the text is $t$ tokens long, in a model of width $C$.
# A matrix product of shapes $(a, b)$ and $(b, c)$ costs $2 a b c$ operations: a
# multiply and an add for each term.
#
# - **Without a cache**, the model runs on all $t$ positions. Per layer, the four
#   projections and the MLP cost $24 C^2$ operations per position, $t \cdot 24 C^2$ in
#   all. Attention compares $t$ queries with $t$ keys ($Q K^\top$) and mixes $t$ values
#   for each ($A V$): $4 t^2 C$ more. The cost grows like $t^2$.
# - **With a cache**, the model runs on one position: $24 C^2$ for the projections and
#   the MLP, and $4 t C$ for one query against $t$ cached keys. The cost grows like $t$.
#
# The output head adds $2 C \lvert \mathcal{V} \rvert$ per position it runs on, for a
# vocabulary $\mathcal{V}$ ([notation](../notation.md)).
# `attn_ref.decoding_flops` adds these up. The site's tests check it against PyTorch's
# `FlopCounterMode`, which counts the operations of every matrix product that actually
# runs, for random model shapes and lengths.

# %% tags=["plot"]
C = model.blocks[0].attn.embed_dim
print("    t  without cache  with cache  ratio  attention's share without")
for t in (16, 64, 256, 512):
    plain, cached = (
        decoding_flops(model, t, use_cache=False),
        decoding_flops(model, t, use_cache=True),
    )
    attention = (
        model.num_layers * 4 * t * t * C
    )  # the 4 t^2 C term of every layer
    print(
        f"{t:>5} {plain:>14,} {cached:>11,} {plain / cached:>6.0f}"
        f" {attention / plain:>26.0%}"
    )

# %% [markdown]
# Without the cache, a step does exactly $t$ times the work of a cached step: the
# same computation, for $t$ positions instead of one. The attention term,
# quadratic in $t$, is a small share of the work at short lengths and the larger
# share at long ones.
#
# ## Measuring the time per token
#
# Counted operations are not time. For each length $t$ below, the cell times the
# step that produces token $t + 1$, both ways. Without a cache, that is one call on
# all $t$ tokens. With a cache, the cache already holds $t - 1$ positions and the
# call is on the last token. Each time is the least CPU time of five runs
# (`attn_ref.measure.cpu_time_ms`), which does not count the moments when other programs have
# the processor. The caches are slices of one cache, filled once with the longest text:
# by the argument above, its first $t - 1$ positions are the cache of the first $t - 1$
# tokens, up to float rounding.


# %% tags=["plot", "measured"]
lengths = [8, 16, 32, 64, 128, 256, 512]
longest = torch.randint(
    0, len(VOCAB), (1, lengths[-1]), generator=torch.Generator().manual_seed(0)
)


full_cache = KVCache(model.num_layers)
model(
    longest[:, :-1], full_cache
)  # keys and values of every position but the last, computed once


def time_per_token(t):
    def cached_step():  # the first t - 1 tokens' cache: slices of the full one
        keys, values = (
            [x[:, :, : t - 1] for x in xs]
            for xs in (full_cache.keys, full_cache.values)
        )
        model(longest[:, t - 1 : t], KVCache(model.num_layers, keys, values))

    return cpu_time_ms(lambda: model(longest[:, :t])), cpu_time_ms(cached_step)


time_per_token(lengths[0])  # warm-up: the first calls are slower
timings = np.array(
    [time_per_token(t) for t in lengths]
)  # (lengths, 2) milliseconds
speedups = timings[:, 0] / timings[:, 1]
print("    t  without cache  with cache  speed-up")
for t, (plain_ms, cached_ms), speedup in zip(
    lengths, timings, speedups, strict=True
):
    print(f"{t:>5} {plain_ms:>10.2f} ms {cached_ms:>8.2f} ms {speedup:>8.1f}x")
growth = [
    np.polyfit(np.log(lengths[-3:]), np.log(timings[-3:, way]), 1)[0]
    for way in (0, 1)
]
print(
    f"time grows like t^{growth[0]:.2f} without the cache, "
    f"t^{growth[1]:.2f} with it (three longest t)"
)

# %% tags=["plot", "measured"]
fig, ax = plt.subplots(figsize=(4.6, 3.6), layout="constrained")
ax.loglog(lengths, timings[:, 0], "o-", label="without cache")
ax.loglog(lengths, timings[:, 1], "s-", label="with cache")
ax.set_xticks(lengths, lengths)
ax.minorticks_off()
ax.set(
    xlabel="tokens so far, t",
    ylabel="CPU time for the next token (ms)",
    title="Time per generated token",
)
ax.legend()
figure_to_svg(
    fig,
    alt=f"Log-log plot of the time per token against t, from {lengths[0]} to "
    f"{lengths[-1]}: {timings[0, 0]:.2f} to {timings[-1, 0]:.1f} ms without a "
    f"cache, {timings[0, 1]:.2f} to {timings[-1, 1]:.2f} ms with one.",
)

# %% [markdown]
# These times are the ones of the machine that built this page; yours will differ, and
# so may their shape. What the count predicts, and what to look for in the table: at
# short lengths the speed-up should almost vanish. A cached step of this tiny model does
# very little arithmetic, so its time is mostly fixed cost: Python, and launching many
# small tensor operations, each with a cost of its own however small its input. So the
# cached time should grow slowly with $t$. An uncached step on a few tokens costs about
# the same fixed amount, and the cached step can even be the slower one: in every layer
# it also appends to the cache, which copies it (`KVCache` concatenates). The cache pays
# off once the arithmetic it saves outweighs that fixed cost: for long texts, and in big
# models, whose matrix products are large.

# %% [markdown]
# ## What the cache costs
#
# Every layer keeps one key and one value vector per key/value head and per
# position, so a cache takes
#
# $$
# \begin{aligned}
# &2 \times \text{layers} \times H_{kv} \times d_k \\
# &\quad \times \text{tokens} \times \text{bytes per number}
# \end{aligned}
# $$
#
# bytes for one sequence. First, the formula against a real cache: the tiny model's,
# after the generation above (every token but the last, which is chosen, never read).

# %%
cache = KVCache(model.num_layers)
model(cached_tokens[:, :-1], cache)
attn = model.blocks[0].attn
formula = kv_cache_bytes(
    model.num_layers,
    attn.num_kv_heads,
    attn.head_dim,
    cache.length,
    bytes_per_number=4,
)
print(
    f"sum of the cached tensors' bytes: {cache.nbytes};",
    f"formula, float32: {formula}",
)

# %% [markdown]
# The same formula for real shapes, with 16-bit numbers. The first three rows keep
# the shape of Llama 2 7B, a 7-billion-parameter model with as many key/value heads
# as query heads, and vary only the number of key/value heads. The other rows are
# real grouped-query models, each with its own context length: the most tokens it was
# trained to read. The sources of the shapes (the models' configuration files and
# papers) are listed at the end.
#
# Mistral 7B is the exception to "one key and one value per position". It attends only
# to the last $W = 4096$ positions (a *sliding window*), so its cache is a rolling buffer
# of $W$ positions: position $i$ overwrites position $i \bmod W$, and "the size of the
# cache stops increasing" (its paper, section 2).

# %% tags=["plot"]
# name: (layers, key/value heads H_kv, head size d_k, context length, window
# or None)
models = {
    "7B class, 32 KV heads": (32, 32, 128, 4_096, None),  # Llama 2 7B
    "7B class, 8 KV heads": (32, 8, 128, 4_096, None),
    "7B class, 1 KV head": (32, 1, 128, 4_096, None),
    "Llama 2 70B": (80, 8, 128, 4_096, None),
    "Mistral 7B": (32, 8, 128, 8_192, 4_096),
    "Llama 3.1 8B": (32, 8, 128, 131_072, None),
    "Llama 3.1 70B": (80, 8, 128, 131_072, None),
}
GiB = 2**30
print(f"{'':<22} per token   context  at 4,096 tokens  at the context")
cache_table = {}  # name: GiB at 4,096 tokens and at the full context
for name, (layers, kv_heads, size, context, window) in models.items():
    cached = [
        min(n, window or n) for n in (4_096, context)
    ]  # a window caps the positions kept
    cache_table[name] = [
        kv_cache_bytes(layers, kv_heads, size, n) / GiB for n in cached
    ]
    per_token = kv_cache_bytes(layers, kv_heads, size, 1) // 2**10
    print(
        f"{name:<22} {per_token:>5} KiB {context:>9,}",
        *(f"{gib:>11g} GiB" for gib in cache_table[name]),
    )
    if window:  # on a line of its own: the row is full
        print(f"{'':<22} (window {window:,})")

# %% [markdown]
# Up to the context length, the cache grows linearly with the length, unless a window
# caps it, and serving several sequences at once multiplies it by the batch size.
# Every generated token also reads the whole cache,
# in every layer. Shazeer (2019) names this as what makes incremental decoding slow:
# "the memory-bandwidth cost of repeatedly loading the large 'keys' and 'values'
# tensors". So the cache's size limits both how many sequences fit in memory and
# how fast each one decodes.
#
# ## Multi-query and grouped-query attention
#
# The cache scales with $H_{kv}$, the number of key/value heads. Multi-query attention
# (Shazeer, 2019) keeps all $H$ query heads but gives them a single key head and a
# single value head, which every query head shares. Grouped-query attention (Ainslie et
# al., 2023) sits in between: $H_{kv}$ key/value heads, each shared by a group of
# $H / H_{kv}$ query heads. With $H_{kv} = H$ it is ordinary multi-head attention; with
# $H_{kv} = 1$, multi-query attention.
#
# In `attn_ref`, `MultiHeadAttention` takes `num_kv_heads`. The key and value
# projections shrink to $H_{kv} \cdot d_k$ outputs. Before attending, each key/value
# head is repeated for its group (`attn_ref.repeat_kv_heads`), a group of consecutive
# query heads: query head $h$ reads key/value head $\lfloor h / (H / H_{kv}) \rfloor$, as
# in PyTorch and in Meta's Llama 2 code.

# %%
torch.manual_seed(0)
gqa = MultiHeadAttention(embed_dim=32, num_heads=8, num_kv_heads=2)
H, H_kv, d_k = gqa.num_heads, gqa.num_kv_heads, gqa.head_dim
print(f"H = {H} query heads, H_kv = {H_kv} key/value heads, d_k = {d_k}")
# nn.Linear stores W^T, of shape (out, C): .T gives W_Q and W_K, (C, out)
print(
    "W_Q:",
    tuple(gqa.q_proj.weight.T.shape),
    " W_K:",
    tuple(gqa.k_proj.weight.T.shape),
)
head_ids = torch.arange(float(H_kv)).reshape(
    1, H_kv, 1, 1
)  # key/value head j holds the number j
print(
    "key/value head of each query head:",
    repeat_kv_heads(head_ids, num_heads=H).flatten().int().tolist(),
)

# %% [markdown]
# Is this the same as PyTorch's grouped-query attention? With `enable_gqa=True`
# (added in [pull request #132689](https://github.com/pytorch/pytorch/pull/132689)),
# `torch.nn.functional.scaled_dot_product_attention` accepts fewer key/value heads than
# query heads. The cell computes the layer's attention three ways: with `attn_ref`; with
# PyTorch's function on the same projections; and as ordinary multi-head attention on
# key and value heads repeated, each once for every query head in its group.

# %% tags=["plot"]
g = torch.Generator().manual_seed(1)
x = torch.randn(2, 5, 32, generator=g)  # (B, T, C)
ours, _ = gqa(x, x, x, is_causal=True)

B, T, C = x.shape
q = (
    gqa.q_proj(x).view(B, T, H, d_k).transpose(1, 2)
)  # (B, T, C) -> (B, H, T, d_k)
k = (
    gqa.k_proj(x).view(B, T, H_kv, d_k).transpose(1, 2)
)  # (B, T, H_kv * d_k) -> (B, H_kv, T, d_k)
v = gqa.v_proj(x).view(B, T, H_kv, d_k).transpose(1, 2)
heads = F.scaled_dot_product_attention(
    q, k, v, is_causal=True, enable_gqa=True
)  # (B, H, T, d_k)
torch_gqa = gqa.out_proj(
    heads.transpose(1, 2).reshape(B, T, C)
)  # (B, H, T, d_k) -> (B, T, C)

group = H // H_kv  # query heads per key/value head
repeated = F.scaled_dot_product_attention(
    q,
    k.repeat_interleave(group, dim=1),
    v.repeat_interleave(group, dim=1),
    is_causal=True,
)  # keys and values (B, H_kv, T, d_k) -> (B, H, T, d_k): plain multi-head
print(
    "largest |attn_ref - PyTorch enable_gqa| output: "
    f"{(ours - torch_gqa).abs().max():.1e}"
)
print(
    "largest |enable_gqa - repeated heads| per head: "
    f"{(heads - repeated).abs().max():.1e}"
)

# %% [markdown]
# All three agree to float32 rounding. In exact arithmetic, grouped-query attention
# computes what multi-head attention with duplicated key/value heads computes; in
# float32 the two can differ only in how a routine rounds. The duplicates are simply
# never stored.
#
# Now the same decoder with eight query heads and eight, two or one key/value
# heads. Each fills a cache with the same text of 64 tokens, then generates with and
# without a cache.

# %% tags=["plot"]
text = torch.randint(0, len(VOCAB), (1, 64), generator=g)
print("H_kv  cache bytes  formula  MHA / this  identical tokens")
cache_sizes = {}
for kv_heads in (8, 2, 1):
    torch.manual_seed(0)
    grouped = TinyDecoder(
        len(VOCAB), 512, 64, num_layers=4, num_heads=8, num_kv_heads=kv_heads
    ).eval()
    grouped_cache = KVCache(grouped.num_layers)
    grouped(text, grouped_cache)  # (B, T) -> a cache of T positions
    cache_sizes[kv_heads] = grouped_cache.nbytes
    head_dim = grouped.blocks[0].attn.head_dim
    formula = kv_cache_bytes(
        grouped.num_layers,
        kv_heads,
        head_dim,
        grouped_cache.length,
        bytes_per_number=4,
    )
    same = torch.equal(
        *(
            generate(grouped, text[:, :8], 16, use_cache=c)[0]
            for c in (True, False)
        )
    )
    ratio = (
        cache_sizes[8] / cache_sizes[kv_heads]
    )  # multi-head attention's cache over this one's
    print(
        f"{kv_heads:>4} {cache_sizes[kv_heads]:>12} {formula:>8}",
        f"{ratio:>11.0f} {same!s:>17}",
    )

# %% [markdown]
# The measured cache shrinks by exactly $H / H_{kv}$, and each model generates the
# same tokens with and without its cache. These are three different random models,
# not one model compressed: fewer key/value heads means fewer parameters. The
# papers ask whether a model with fewer heads can *stay as good*. Shazeer reports
# that multi-query models "incur only minor quality degradation from the
# baseline". Ainslie et al. convert trained multi-head checkpoints and train them
# a little further ("uptraining", with 5% of the original pre-training compute).
# They report that "uptrained GQA achieves quality close to multi-head attention
# with comparable speed to MQA".
#
# <details class="note">
# <summary>Going deeper: how real implementations store the cache</summary>
#
# `attn_ref.KVCache` concatenates a new tensor at every step, which copies the whole
# cache each time; that keeps the code short. Code written for speed avoids the copy.
# Meta's reference Llama 2 code, for instance, allocates the cache once, for the longest
# sequence it will serve: `cache_k` and `cache_v` of shape
# `(max_batch_size, max_seq_len, n_local_kv_heads, head_dim)` in every attention layer.
# At every step it writes the new keys and values into a slice of them.
#
# </details>
#
#
# ## Common pitfalls
#
# <a id="the-alignment-trap"></a>**The alignment trap: a causal mask aligned to the top
# left.** With a cache, attention has fewer
# queries than keys: $L$ new queries against $S$ keys, of which the first $S - L$ were
# cached. The new queries are the *last* $L$ positions. A causal mask must therefore be
# aligned to the bottom-right corner of the $(L, S)$ score matrix.
#
# A common mistake keeps `is_causal=True`, as in training. PyTorch's `is_causal=True`
# aligns the mask to the top-left corner: query $i$ sees keys $0, \dots, i$, whatever
# $S$ is. Its documentation says so ("the upper left causal bias"). For the usual single
# new query ($L = 1$), that means it sees key 0 and nothing else. Changing this default
# was proposed in PyTorch's
# [issue #108108](https://github.com/pytorch/pytorch/issues/108108), open at the time of
# writing. PyTorch offers a bottom-right mask as a separate object instead:
# `torch.nn.attention.bias.causal_lower_right(L, S)`, documented as equivalent to
# `torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)`.
#
# Below, one new query attends to six keys in every head, first with `is_causal=True`.

# %%
g = torch.Generator().manual_seed(1)
S, H, d_k = 6, 2, 8
query = torch.randn(1, H, 1, d_k, generator=g)  # one new query per head
# S keys and values: S - 1 cached, then the new token's
keys, values = torch.randn(2, 1, H, S, d_k, generator=g)
trap = F.scaled_dot_product_attention(query, keys, values, is_causal=True)
# attn_ref returns the weights too
_, trap_weights = scaled_dot_product_attention(
    query, keys, values, is_causal=True
)
print(
    "is_causal=True, weights of head 0:",
    trap_weights[0, 0, 0].numpy().round(3),
)
print(
    "the output is value 0, unchanged:", torch.allclose(trap, values[:, :, :1])
)

# %% [markdown]
# The query sees only key 0, and its output is value 0. The right answer for a single
# new query needs no mask at all: the new token is the last position, so it may see
# every key.

# %%
right = F.scaled_dot_product_attention(query, keys, values)  # no mask
_, right_weights = scaled_dot_product_attention(query, keys, values)
print(
    "no mask, weights of head 0:       ",
    right_weights[0, 0, 0].numpy().round(3),
)
print(f"largest |wrong - right| output: {(trap - right).abs().max():.2f}")

# %% [markdown]
# For a chunk of $L > 1$ new queries, the mask must be bottom-right aligned. Here are
# both masks for three new tokens after three cached ones, and the outputs they give.

# %%
L = 3
lower_right = causal_mask(L, S, lower_right=True)
print("top-left, as is_causal=True:")
print(causal_mask(L, S).int().numpy())
print("bottom-right, causal_mask(L, S, lower_right=True):")
print(lower_right.int().numpy())
chunk = torch.randn(1, H, L, d_k, generator=g)  # three new queries
theirs = F.scaled_dot_product_attention(
    chunk, keys, values, attn_mask=lower_right
)
wrong = F.scaled_dot_product_attention(chunk, keys, values, is_causal=True)
print(
    "largest |is_causal=True - bottom-right| output: "
    f"{(wrong - theirs).abs().max():.2f}"
)

# %% [markdown]
# The bottom-right mask is the one `causal_lower_right(L, S)` documents. This page does
# not import it: importing `torch.nn.attention.bias` loads PyTorch's compiler
# (`torch._dynamo`), which would slow down building this page. The site's tests check
# that it gives the same outputs as `attn_ref.masks.causal_mask(L, S, lower_right=True)`.
#
# `attn_ref.MultiHeadAttention` refuses `is_causal=True` once its cache holds keys,
# and says what to pass instead:

# %%
layer = MultiHeadAttention(embed_dim=8, num_heads=2)
layer_cache = KVCache(num_layers=1)
tokens4 = torch.randn(1, 4, 8, generator=g)  # (B, T, C)
# the first call: the cache is empty, so top-left is right
layer(tokens4, tokens4, tokens4, is_causal=True, cache=layer_cache)
one = tokens4[:, :1]  # (B, 1, C): one more token
try:
    layer(one, one, one, is_causal=True, cache=layer_cache)
except ValueError as error:
    print(textwrap.fill(str(error), width=79))

# %% [markdown]
# **Grouping the heads in the wrong order.** `repeat_kv_heads` repeats each key/value
# head for *consecutive* query heads (`repeat_interleave`): query head $h$ reads
# key/value head $\lfloor h / (H / H_{kv}) \rfloor$. A common mistake tiles the heads
# instead (`repeat`, which gives the order 0, 1, 0, 1, ...). The shapes are right and
# nothing fails, but each query head reads another head's keys and values, and the
# result no longer matches PyTorch's `enable_gqa=True`. The fix is
# `repeat_interleave`, or `enable_gqa=True` itself.

# %%
tiled_k, tiled_v = (
    k.repeat(1, group, 1, 1),
    v.repeat(1, group, 1, 1),
)  # (B, H_kv, T, d_k) -> (B, H, T, d_k)
tiled = F.scaled_dot_product_attention(q, tiled_k, tiled_v, is_causal=True)
print("tiled matches enable_gqa:", torch.allclose(tiled, heads, atol=1e-6))
print(f"largest difference: {(tiled - heads).abs().max():.2f}")

# %% [markdown]
# ## Summary
#
# - Causal attention never lets an early position see a later one. So the keys and
#   values of earlier positions never change, and caching them changes nothing but
#   the cost: same tokens, logits equal up to float rounding.
# - Without a cache, the work per token grows like $t^2$; with one, like $t$. In time,
#   the speed-up grows with the length; for short texts, fixed per-call overhead
#   dominates and it can almost vanish.
# - With a cache there are fewer queries than keys. Use no mask for one new query and
#   a bottom-right-aligned mask for several. `is_causal=True` aligns to the top left.
# - The cache takes $2 \times \text{layers} \times H_{kv} \times d_k \times \text{tokens}
#   \times \text{bytes}$. Multi-query and grouped-query attention cut it by $H / H_{kv}$.
#
# ## Exercises
#
# **1. A memory budget.** With the 7B-class shape and 16-bit numbers, how many tokens
# of one sequence fit in a 24 GiB cache budget with 32, 8 and 1 key/value heads?

# %% tags=["solution"]
for kv_heads in (32, 8, 1):
    per_token = kv_cache_bytes(
        32, kv_heads, 128, 1
    )  # bytes per token of the 7B-class shape
    print(f"H_kv = {kv_heads:>2}: {24 * GiB // per_token:>9,} tokens")

# %% [markdown]
# **2. A prompt in chunks.** Feed a 12-token prompt to the cache in chunks of 4
# tokens. Check that the logits of each chunk equal the full forward pass's logits at
# the same positions. (`TinyDecoder` builds a bottom-right mask for each chunk.)

# %% tags=["solution"]
tokens = torch.randint(
    0, len(VOCAB), (1, 12), generator=torch.Generator().manual_seed(4)
)
chunk_cache = KVCache(model.num_layers)
chunks = [
    model(tokens[:, start : start + 4], chunk_cache)
    for start in range(0, 12, 4)
]
print(
    "chunked equals full:",
    torch.allclose(torch.cat(chunks, dim=1), model(tokens), atol=1e-5),
)

# %% [markdown]
# **3. A sliding window.** With a window of $W$, position $i$ attends only to
# positions $i - W + 1, \dots, i$. Then a cache never needs more than the last $W$
# keys and values of each layer. Show it for one attention layer: one new query
# attending to the last $W$ of $S$ keys, with no mask, gives the same output as
# attending to all $S$ keys with a window mask.

# %% tags=["solution"]
W, S = 4, 10
window = (
    torch.arange(S) >= S - W
)  # (S,): the query at position S - 1 sees positions S - W .. S - 1
print("window mask:", window.int().tolist())
q1 = torch.randn(1, 1, d_k, generator=g)
k_all, v_all = torch.randn(2, 1, S, d_k, generator=g)
full_window, _ = scaled_dot_product_attention(
    q1, k_all, v_all, attn_mask=window
)
bounded, _ = scaled_dot_product_attention(
    q1, k_all[:, -W:], v_all[:, -W:]
)  # a cache of W positions
print("same output:", torch.allclose(full_window, bounded, atol=1e-6))

# %% [markdown]
# ## References
#
# - Noam Shazeer. [Fast Transformer Decoding: One Write-Head is All You
#   Need](https://arxiv.org/abs/1911.02150). 2019. Multi-query attention.
# - Joshua Ainslie, James Lee-Thorp, Michiel de Jong, Yury Zemlyanskiy, Federico
#   Lebrón, Sumit Sanghai. [GQA: Training Generalized Multi-Query Transformer Models
#   from Multi-Head Checkpoints](https://arxiv.org/abs/2305.13245). 2023.
# - Hugo Touvron et al. [Llama 2: Open Foundation and Fine-Tuned Chat
#   Models](https://arxiv.org/abs/2307.09288). 2023. The [model
#   card](https://github.com/meta-llama/llama/blob/main/MODEL_CARD.md) marks the 70B
#   model as the one that uses grouped-query attention, and the [reference
#   code](https://github.com/meta-llama/llama/blob/main/llama/model.py) shows the cache
#   and the repetition of key/value heads. The shapes are those of the configuration
#   files of [Llama-2-7b-hf](https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json)
#   and [Llama-2-70b-hf](https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json):
#   `num_hidden_layers`, `num_key_value_heads`, and $d_k$ = `hidden_size / num_attention_heads`;
#   their context length is 4,096 (`max_position_embeddings`, and the model card's "4k").
# - Albert Q. Jiang et al. [Mistral 7B](https://arxiv.org/abs/2310.06825). 2023.
#   Grouped-query attention with a sliding window of 4,096 and a rolling buffer cache
#   (section 2); its Table 1 gives the shape and the context length, 8,192.
# - Meta. Llama 3.1: the shapes of the 8B and 70B models and their context length,
#   `CONTEXT_LENGTH = 131072`, in
#   [`sku_list.py`](https://github.com/meta-llama/llama-models/blob/main/models/llama3_1/api/sku_list.py)
#   of meta-llama/llama-models (`n_layers`, `n_kv_heads`, and $d_k$ = `dim / n_heads`);
#   the [model card](https://github.com/meta-llama/llama-models/blob/main/models/llama3_1/MODEL_CARD.md)
#   gives the context as 128k.
# - PyTorch: [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html)
#   (`is_causal`, `enable_gqa`), [`causal_lower_right`](https://docs.pytorch.org/docs/stable/generated/torch.nn.attention.bias.causal_lower_right.html),
#   and [issue #108108](https://github.com/pytorch/pytorch/issues/108108) on the
#   alignment of `is_causal`.
#
# Next: [Serving attention: many requests at once](serving_batches.md) keeps the caches
# of many requests in one pool of blocks, and batches their steps.

# %% [markdown]
# # Fewer bytes per token: latent attention, quantized caches, linear attention
#
# A key/value cache keeps one key and one value per key/value head, for every token
# and every layer. The [KV cache page](kv_cache.md) measured that cost and cut it with
# multi-query and grouped-query attention: fewer key/value heads, fewer numbers. Today's
# models go further, in three directions, and this page builds each one in
# `attn_ref.compression`, checks it, and measures it on the same inputs:
#
# - **Multi-head latent attention** (DeepSeek-V2, 2024) caches one small latent per
#   token, and rebuilds every head's keys and values from it, or never builds them.
# - **A quantized cache** keeps the same keys and values in 8, 4 or 2 bits a number.
# - **Linear attention** (Katharopoulos et al., 2020) replaces the softmax by a feature
#   map, and the growing cache by a state of fixed size.
#
# It assumes the [KV cache](kv_cache.md) page and rotary position embeddings
# ([positions](../concepts/positions.md)). Shapes follow the site's
# [notation](../notation.md): `(B, T, C)` for tokens, `(B, H, T, d_k)` for heads,
# $L$ new queries and $S$ keys. Tokens are row vectors, so a projection is $x W$.
#
# The picture is where the page ends up: the bytes one layer of DeepSeek-V2's shape
# (128 heads of 128, 16-bit numbers) caches per token after 32,768 tokens, for each
# method, on a log scale, with what it stores. Each gives something up for its bytes;
# [One table](#one-table) says what, and checks every bar against a real cache
# object. (The picture's folded code also holds the page's imports.)

# %% tags=["plot"]
import copy
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from attn_ref.cache import KVCache
from attn_ref.compression import (
    AssociativeRecall,
    LatentCache,
    MultiHeadLatentAttention,
    QuantizedKVCache,
    SlidingWindowCache,
    elu_feature_map,
    linear_attention,
    linear_attention_recurrent,
    quantize,
)
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.plotting import attention_heatmap, figure_to_svg

# one thread: results that do not depend on the machine
torch.set_num_threads(1)

H_t, d_t, G_t = 128, 128, 32  # heads, head size, group of a per-channel scale
T_table, W_table = 32_768, 4_096  # tokens, and the sliding window
BYTES = 2  # 16-bit numbers


def quantized_bytes(T, bits, kv_heads=H_t):
    """Codes, values' scales per token, keys' per channel, the residual."""
    grouped = (
        T // G_t * G_t
    )  # keys in complete groups; the rest wait in 16 bits
    # every value's code, and the grouped keys'
    codes = kv_heads * d_t * (T + grouped) * bits // 8
    value_scales = 2 * kv_heads * T * BYTES  # a scale and a zero, per token
    key_scales = 2 * kv_heads * d_t * (T // G_t) * BYTES  # per channel, group
    residual = kv_heads * d_t * (T - grouped) * BYTES
    return codes + value_scales + key_scales + residual


formulas = {  # method -> bytes per layer after T tokens
    "MHA, 128 heads": lambda T: 2 * H_t * d_t * T * BYTES,
    "GQA, 8 heads": lambda T: 2 * 8 * d_t * T * BYTES,
    "MQA, 1 head": lambda T: 2 * 1 * d_t * T * BYTES,
    "MLA, d_c + d_R = 576": lambda T: (512 + 64) * T * BYTES,
    "MHA, int8": lambda T: quantized_bytes(T, 8),
    "MHA, int4": lambda T: quantized_bytes(T, 4),
    "MHA, int2": lambda T: quantized_bytes(T, 2),
    "MHA, window 4,096": lambda T: 2 * H_t * d_t * min(T, W_table) * BYTES,
    "linear attention": lambda T: H_t * (d_t * d_t + d_t) * BYTES,
}
stores = {  # method -> what it keeps per token, as the picture says it
    "MHA, 128 heads": "MHA: a key and a value, 128 heads",
    "GQA, 8 heads": "GQA: a key and a value, 8 heads",
    "MQA, 1 head": "MQA: a key and a value, 1 head",
    "MLA, d_c + d_R = 576": "MLA: a latent of 512, a rotary key of 64",
    "MHA, int8": "MHA in 8 bits, with scales",
    "MHA, int4": "MHA in 4 bits, with scales",
    "MHA, int2": "MHA in 2 bits, with scales",
    "MHA, window 4,096": "MHA, the last 4,096 tokens only",
    "linear attention": "linear: a 128 × 128 state per head",
}
per_token = {m: f(T_table) / T_table for m, f in formulas.items()}
fig, ax = plt.subplots(figsize=(4.5, 6.4), layout="constrained")
rows = np.arange(len(per_token))
ax.barh(rows, list(per_token.values()), height=0.35, color="C0")
for row, (method, size) in zip(rows, per_token.items(), strict=True):
    ax.text(1, row - 0.3, stores[method], va="bottom", fontsize=10)
    ax.text(size * 1.15, row, f"{size:,.0f}", va="center", fontsize=10)
ax.set_xscale("log")
ax.set(xlim=(1, 2e6), ylim=(len(rows) - 0.5, -0.9), yticks=[])
ax.set_xlabel("bytes per token, one layer")
figure_to_svg(
    fig,
    alt="Horizontal bars, log scale, of the bytes one layer caches per token"
    " at 32,768 tokens: "
    + "; ".join(f"{m} {b:,.0f}" for m, b in per_token.items())
    + ".",
)

# %% [markdown]
# ## Multi-head latent attention
#
# In multi-head attention, head $i$ projects token $h_t$ to its own key and value (this
# section keeps the paper's $h_t$ for the token the site calls $x_t$).
# Multi-head latent attention (MLA) first compresses the token into one *latent*
# vector $c_t$ of $d_c$ numbers, and up-projects every head's key and value from it
# (DeepSeek-V2, section 2.1.2):
#
# $$
# \begin{aligned}
# c_t &= h_t W_{DKV}, \\
# k^C_{t,i} &= c_t W_{UK,i}, \\
# v_{t,i} &= c_t W_{UV,i}.
# \end{aligned}
# $$
#
# The keys and values of all heads are functions of $c_t$. So the cache can keep $c_t$
# alone: $d_c$ numbers per token and layer, instead of a key and a value per head.
#
# Positions need one more piece. Rotary embeddings (RoPE) rotate queries and keys by an
# angle that depends on their position. MLA leaves $k^C$ unrotated, and carries the
# positions on a small extra part of width $d_R$: each head gets a rotated query part
# $q^R_{t,i}$, and all heads share one rotated key
# $k^R_t = \operatorname{RoPE}(h_t W_{KR})$. Head $i$ compares
# $q_{t,i} = [q^C_{t,i}, q^R_{t,i}]$ with $k_{j,i} = [k^C_{j,i}, k^R_j]$ (two vectors
# set end to end), and divides the score by $\sqrt{d_\text{nope} + d_R}$, the width of
# both (equation 18; $d_\text{nope}$ is the width of $q^C$ and $k^C$). The cache keeps
# $c_t$ and $k^R_t$: $d_c + d_R$ numbers per token and layer. The queries are
# compressed too, into a latent of their own; the paper does it to save memory in
# training, not cache.
#
# `MultiHeadLatentAttention` follows these equations, at a small size. It runs ten
# tokens and fills a `LatentCache`.

# %%
torch.manual_seed(0)
mla = MultiHeadLatentAttention(
    embed_dim=64,
    num_heads=4,
    kv_lora_rank=16,  # d_c
    qk_nope_head_dim=16,
    qk_rope_head_dim=8,  # d_R
    v_head_dim=16,
    q_lora_rank=32,
)
g = torch.Generator().manual_seed(1)
x = torch.randn(1, 10, 64, generator=g)  # (B, T, C): ten tokens
cache = LatentCache(num_layers=1)
y = mla(x, cache=cache)  # (B, T, C)
print("output:", tuple(y.shape))
print("cached latents:", tuple(cache.latents[0].shape))
print("cached rotary keys:", tuple(cache.rope_keys[0].shape))

# %%
H, d_c, d_rope = mla.num_heads, mla.kv_lora_rank, mla.qk_rope_head_dim
d_key = mla.qk_nope_head_dim + d_rope  # a head's own part and the rotary one
latent_numbers = d_c + d_rope  # per token and layer
head_numbers = H * (d_key + mla.v_head_dim)  # every head's key and value
print(f"numbers per token: {latent_numbers} cached")
print(f"numbers per token in the heads' keys and values: {head_numbers}")
print(
    f"cache bytes: {cache.nbytes} =",
    f"{latent_numbers} x {cache.length} tokens x 4",
)

# %% [markdown]
# The heads read many more numbers per token than the cache holds. The saving grows
# with the number of heads, since the latent does not depend on them.
#
# ## Absorbing the up-projections
#
# Rebuilding every head's keys from the cached latents at every step would cost a
# matrix product per cached token. The paper avoids it (its Appendix C): "due to the
# associative law of matrix multiplication, we can absorb $W^{UK}$ into $W^{UQ}$, and
# $W^{UV}$ into $W^O$". With row vectors, the part of head $i$'s score that has no
# positions is
#
# $$
# \begin{aligned}
# q^C_{t,i} \cdot k^C_{j,i}
# &= q^C_{t,i} \, \bigl(c_j W_{UK,i}\bigr)^\top \\
# &= \bigl(q^C_{t,i} W_{UK,i}^\top\bigr) \, c_j^\top ,
# \end{aligned}
# $$
#
# and $q^C_{t,i}$ is itself the query latent times $W_{UQ,i}$. So one matrix per head,
# $W_{UQ,i} W_{UK,i}^\top$, takes the query latent straight to a query of width $d_c$
# that meets the cached $c_j$ directly. The output of head $i$ goes through $W_{O,i}$,
# its rows of the output projection:
#
# $$
# \begin{aligned}
# &\Bigl(\sum_j a_{tj} \, c_j W_{UV,i}\Bigr) W_{O,i} \\
# &\quad = \Bigl(\sum_j a_{tj} \, c_j\Bigr) \bigl(W_{UV,i} W_{O,i}\bigr).
# \end{aligned}
# $$
#
# Attention then mixes the latents themselves, and $W_{UV,i} W_{O,i}$ maps the result
# to the model's width. Neither keys nor values are ever formed. Every head reads the
# same keys $[c_j, k^R_j]$ and the same values $c_j$: it is multi-query attention
# with a wide head. The scale stays $1/\sqrt{d_\text{nope} + d_R}$, the one the
# model was trained with, not $1/\sqrt{d_c + d_R}$. `absorbed_weights` computes the two
# products; `absorbed=True` uses them.

# %%
query_weight, output_weight = mla.absorbed_weights()
print("absorbed query projection:", tuple(query_weight.shape))
print("absorbed output projection:", tuple(output_weight.shape))
absorbed = mla(x, absorbed=True)
gap32 = (absorbed - y).abs().max()
print(f"largest |absorbed - plain| output, float32: {gap32:.1e}")
mla64 = copy.deepcopy(mla).double()
gap64 = (mla64(x.double(), absorbed=True) - mla64(x.double())).abs().max()
print(f"the same in float64: {gap64:.1e}")
print(f"largest |output|: {y.abs().max():.2f}")

# %% [markdown]
# The shapes are `(H, query latent, d_c)` and `(H, d_c, C)`. The two forms agree to
# the rounding of each precision: far below the size of the outputs in float32, and
# smaller still in float64. They multiply the same matrices in another order, and float
# arithmetic rounds each order differently. The test suite checks the agreement on
# random shapes and weights.
#
# Now generation. The cell feeds the ten tokens one at a time, each attending to the
# latent cache in the absorbed form, and compares with the plain form run on all ten
# at once.

# %%
decode = LatentCache(num_layers=1)
steps = [mla(x[:, t : t + 1], cache=decode, absorbed=True) for t in range(10)]
stepwise = torch.cat(steps, dim=1)  # ten (B, 1, C) -> (B, T, C)
decode_gap = (stepwise - y).abs().max()
print(f"largest |one at a time, absorbed - all at once|: {decode_gap:.1e}")
print(f"the cache holds {decode.length} positions in {decode.nbytes} bytes")

# %% [markdown]
# The rotary parts make this work. Each new token's position continues from the
# length of the cache, and the cached $k^R_j$ were rotated once, when their tokens came.
#
# Why keep RoPE out of $k^C$? If the keys $c_j W_{UK,i}$ were rotated, a rotation that
# depends on the positions of the query and of key $j$ would sit between $c_j$ and the
# query, a different one for every cached token. No single matrix could then be
# absorbed. The paper puts it this way: "a RoPE matrix related to the currently
# generating token will lie between $W^Q$ and $W^{UK}$ and matrix multiplication does
# not obey a commutative law" (section 2.1.3).
#
# What does absorbing save? The cell counts the multiply-adds of one new token against
# $S = 4{,}096$ cached tokens, in one layer of DeepSeek-V2's shape (read from its
# configuration file below). A product of shapes $(a, b)$ and $(b, c)$ counts $2abc$
# operations.

# %% tags=["plot"]
C_v2, H_v2 = 5120, 128  # width, heads
d_c_v2, d_q_v2 = 512, 1536  # the two latents
d_n_v2, d_rope_v2, d_v_v2 = 128, 64, 128  # a head's key parts and value
S_count = 4096


def plain_flops(S):  # up-project S latents to keys and values, then attend
    up = 2 * S * d_c_v2 * H_v2 * (d_n_v2 + d_v_v2)
    attend = 2 * H_v2 * S * (d_n_v2 + d_rope_v2) + 2 * H_v2 * S * d_v_v2
    return up + attend


def absorbed_flops(S):  # absorbed query, attend to latents, absorbed output
    query = 2 * H_v2 * d_q_v2 * d_c_v2
    attend = 2 * H_v2 * S * (d_c_v2 + d_rope_v2) + 2 * H_v2 * S * d_c_v2
    return query + attend + 2 * H_v2 * d_c_v2 * C_v2


plain_count, absorbed_count = plain_flops(S_count), absorbed_flops(S_count)
print(
    f"S = {S_count:,}: plain {plain_count:.3g}, absorbed {absorbed_count:.3g}"
)
print(f"plain / absorbed: {plain_count / absorbed_count:.1f}")

# %% [markdown]
# The plain form repeats the up-projection for every cached token at every step; the
# absorbed form pays for wider scores instead ($d_c + d_R$ numbers per head, not
# $d_\text{nope} + d_R$), and the ratio printed is what that trade is worth at this
# length. DeepSeek's own inference code has both forms: "naive" caches every head's keys
# and values, a cache as large as multi-head attention's, and "absorb" caches the
# latents and rotary keys (see the References). The shared projections do not count in
# the sums: $W_{UQ,i} W_{UK,i}^\top$ and $W_{UV,i} W_{O,i}$ are computed once, not per
# token.
#
# ## The cache of real models
#
# DeepSeek publishes the shapes of its models in configuration files (see the
# References). The table reads the fields that set the cache: the layers, the heads and
# MLA's sizes. Beside them are models of similar size that cache ordinary keys and
# values, from their own published shapes, and DeepSeek-V2's shape with multi-head,
# grouped-query (8 groups, as in the paper's ablation) and multi-query attention
# instead of MLA, the comparison of the paper's Table 1. Every figure after the
# configurations is a count made here, at 16 bits a number, as on the KV cache page;
# 131,072 tokens is the 128K context of DeepSeek-V2 and of Llama 3.1.

# %% tags=["plot"]
# inference/configs/config_236B.json and config_671B.json (References)
deepseek = {
    "DeepSeek-V2": {
        "n_layers": 60,
        "n_heads": 128,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
    },
    "DeepSeek-V3": {
        "n_layers": 61,
        "n_heads": 128,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
    },
}
v2 = deepseek["DeepSeek-V2"]
d_h = v2["qk_nope_head_dim"]  # the paper's d_h, 128
# name: (layers, key/value heads, head size), sources in the References
others = {
    "V2's shape, MHA": (v2["n_layers"], v2["n_heads"], d_h),
    "V2's shape, GQA, 8 groups": (v2["n_layers"], 8, d_h),
    "V2's shape, MQA": (v2["n_layers"], 1, d_h),
    "OPT-175B, MHA": (96, 96, 12288 // 96),
    "Llama 3.1 70B, GQA": (80, 8, 8192 // 64),
    "Llama 3.1 405B, GQA": (126, 8, 16384 // 128),
}
per_layer = {}  # numbers cached per token and layer
for name, config in deepseek.items():
    per_layer[name] = config["kv_lora_rank"] + config["qk_rope_head_dim"]
layers = {name: config["n_layers"] for name, config in deepseek.items()}
for name, (n_layers, kv_heads, size) in others.items():
    per_layer[name], layers[name] = 2 * kv_heads * size, n_layers
CONTEXT = 131_072
print(f"{'':<26} layers  numbers per  KiB per   GiB at")
print(f"{'':<26}         token, layer    token  {CONTEXT:,}")
for name, numbers in per_layer.items():
    kib = numbers * layers[name] * 2 / 2**10  # all layers, 2 bytes a number
    gib = kib * CONTEXT / 2**20
    print(
        f"{name:<26} {layers[name]:>6} {numbers:>12,} {kib:>8.1f} {gib:>8.2f}"
    )
groups = per_layer["DeepSeek-V2"] / (2 * d_h)
print(f"MLA caches as much as GQA with {groups} groups of d_h = {d_h}")

# %% [markdown]
# DeepSeek-V2 and V3 cache 576 numbers per token and layer: $d_c + d_R = 512 + 64$.
# The paper's Table 1 writes it as "equal to GQA with only 2.25 groups", the ratio
# printed last. The deployed model also quantizes its cache, to "6 bits on average"
# (section 3.2.3). What MLA costs in quality is measured in the paper, not here. It
# trains the same models with MLA and with multi-head attention, and reports that "MLA
# shows better performance than MHA" (Appendix D.2, Table 9). The price is elsewhere:
# a model must be built and trained with MLA, and its absorbed form computes wider
# scores.
#
# ## A quantized cache
#
# Quantization keeps every key and value, in fewer bits. KIVI (Liu et al., 2024) uses
# the simplest scheme, asymmetric min–max. Each group of numbers keeps its minimum $z$
# and a step $s = (\max - \min) / (2^b - 1)$. A number $x$ becomes the integer
# code $q = \operatorname{round}((x - z)/s)$, one of $2^b$, and is read back as
# $q s + z$, at most $s/2$ away. The group decides everything. It can be one token's
# channels (*per token*) or one channel across tokens (*per channel*).
#
# KIVI's finding is that the two caches differ. The key cache has "a small set of
# channels with persistently large magnitudes", its authors write, and the value cache
# no such structure. So they quantize "the key cache per-channel and the value cache
# per-token" (their README). A large channel widens the range of every token it
# appears in. Per token, the small channels then share a coarse grid. Per channel, the
# large one widens only its own. Here is the effect on four tokens with one large
# channel, in 4 bits.

# %%
g = torch.Generator().manual_seed(3)
small = torch.randn(4, 8, generator=g)  # (T, d): four tokens of eight channels
small[:, 2] += 20  # channel 2 is large in every token
print("largest error of each channel, 4 bits:")
for per in ("token", "channel"):
    stored = quantize(small, bits=4, per=per).dequantize()  # (T, d)
    error = (stored - small).abs().amax(dim=0)  # (d,): per channel
    print(f"per {per:<8}", error.numpy().round(3))

# %% [markdown]
# Per token, every channel pays for channel 2's range. Per channel, each pays for its
# own.
#
# Now attention. The cell draws 64 queries and 512 keys and values of width 64, then a
# second set of keys with four *outlier channels* ten times larger. It divides the
# queries by ten in the same channels. In exact arithmetic that changes no score,
# since each score sums query times key over the channels. So any difference below
# comes from storing the keys, not from the attention they produce. Each cache is a
# `QuantizedKVCache`, with groups of 32 tokens per channel as in KIVI's example.
# Attention then runs in float64, so that what is measured is the cache's error, not
# float32's rounding.

# %%
g = torch.Generator().manual_seed(4)
L_q, S_q, d_q = 64, 512, 64
queries = torch.randn(1, 1, L_q, d_q, generator=g)  # (B, H, L, d_k)
# (B, H, S, d_k) each
keys, values = torch.randn(2, 1, 1, S_q, d_q, generator=g)
outlier_channels = torch.randperm(d_q, generator=g)[:4]
stretch = torch.ones(d_q)
stretch[outlier_channels] = 10.0
inputs = {  # name: (queries, keys)
    "plain": (queries, keys),
    "outliers": (queries / stretch, keys * stretch),
}


def quantized_attention(q, k, v, bits, key_per, value_per):
    """Attention over keys and values read back from a quantized cache."""
    cache = QuantizedKVCache(1, bits, key_per, value_per, group_size=32)
    k_hat, v_hat = cache.update(0, k, v)  # (B, H, S, d_k), dequantized
    q, k_hat, v_hat = q.double(), k_hat.double(), v_hat.double()
    return scaled_dot_product_attention(q, k_hat, v_hat)


# %% [markdown]
# Two errors, against the same attention over the float32 keys and values:
#
# - **weights**: the share of attention that moves to other keys, half the sum of
#   $\lvert \hat a_{ij} - a_{ij} \rvert$ over the keys, averaged over the queries;
# - **output**: the error of the outputs relative to their size,
#   $\lVert \hat O - O \rVert / \lVert O \rVert$.

# %% tags=["plot"]
print("outlier channels:", sorted(outlier_channels.tolist()))
score_gap = (
    (queries @ keys.mT - (queries / stretch) @ (keys * stretch).mT).abs().max()
)
print(f"largest change of a score between the two sets: {score_gap:.1e}")
# (bits, key_per, value_per, inputs) -> (weights moved, output error)
errors = {}
for name, (q, k) in inputs.items():
    # (B, H, L or S, d_k) each, in float64
    exact, exact_weights = scaled_dot_product_attention(
        q.double(), k.double(), values.double()
    )
    for bits in (8, 4, 2):
        for key_per in ("token", "channel"):
            for value_per in ("token", "channel"):
                out, w = quantized_attention(
                    q, k, values, bits, key_per, value_per
                )
                moved = 0.5 * (w - exact_weights).abs().sum(dim=-1).mean()
                relative = (out - exact).norm() / exact.norm()
                errors[bits, key_per, value_per, name] = (
                    moved.item(),
                    relative.item(),
                )
print("bits  keys     values    weights moved      output error")
print("                         plain  outliers    plain  outliers")
for bits in (8, 4, 2):
    for key_per in ("token", "channel"):
        for value_per in ("token", "channel"):
            row = [errors[bits, key_per, value_per, name] for name in inputs]
            (w_plain, o_plain), (w_out, o_out) = row
            cells = (
                f"{w_plain:>7.4f} {w_out:>9.4f} {o_plain:>8.4f} {o_out:>9.4f}"
            )
            print(f"{bits:>4}  {key_per:<8} {value_per:<8} {cells}")

# %% [markdown]
# Read the table along three lines:
#
# - **Bits.** From 8 to 4 bits the grid step grows by $(2^8 - 1)/(2^4 - 1)$, from 4 to
#   2 bits by $(2^4 - 1)/(2^2 - 1)$, and the errors grow with it.
# - **Keys.** With the outliers, keys stored per token move far more attention than
#   keys stored per channel, at every width. Without outliers the two are close. Per
#   channel, the outliers change nothing at all, up to rounding: each channel's grid
#   stretches with the channel. The weights do not depend on how the values are stored,
#   so pairs of rows repeat the weights' columns.
# - **Values.** The values have no outlier channels, and the output errors of values
#   per token and per channel stay close. Per token has a practical edge too: a new
#   token is quantized on its own, while per channel must wait for a group of tokens
#   (the residual of `QuantizedKVCache`).
#
# The plot shows the weights' column on a log scale.

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(4.5, 3.6), layout="constrained")
styles = {"plain": "--", "outliers": "-"}
markers = {"token": "o", "channel": "s"}
for name in inputs:
    for key_per in ("token", "channel"):
        moved = [errors[bits, key_per, "token", name][0] for bits in (8, 4, 2)]
        label = f"keys per {key_per}, {name}"
        ax.semilogy(
            (8, 4, 2), moved, styles[name] + markers[key_per], label=label
        )
ax.set_xticks((8, 4, 2))
ax.invert_xaxis()
ax.set_xlabel("bits per number")
ax.set_ylabel("attention moved (mean)")
ax.set_title("Quantized keys: weight error")
ax.legend(fontsize=10, loc="lower right")
figure_to_svg(
    fig,
    alt="Log plot of the attention weight moved by quantized keys against 8, "
    "4 and 2 bits: it grows as the bits fall; with outlier channels, keys "
    "stored per token move far more attention than keys stored per channel, "
    "whose two curves, with and without outliers, coincide.",
)

# %% [markdown]
# What does it save? The cell fills a `QuantizedKVCache` with the same keys and values
# in 16 bits (float16, as models store them) and divides its bytes by the tokens. The
# scales and zero points count too: per token, two 16-bit numbers per token and head
# for the values; per channel, two per channel for every group of 32 keys. A
# `KVCache` of the same float16 tensors is the baseline.

# %%
k16, v16 = keys.half(), values.half()  # (B, H, S, d_k), 16 bits a number
plain16 = KVCache(num_layers=1)
plain16.update(0, k16, v16)
cache_bytes = {16: plain16.nbytes / S_q}  # bits -> bytes per token
for bits in (8, 4, 2):
    quantized16 = QuantizedKVCache(num_layers=1, bits=bits, group_size=32)
    quantized16.update(0, k16, v16)
    cache_bytes[bits] = quantized16.nbytes / S_q
print("bits  bytes per token  saved against 16 bits")
for bits, size in cache_bytes.items():
    print(f"{bits:>4} {size:>16g} {1 - size / cache_bytes[16]:>21.1%}")

# %% [markdown]
# The scales cost the same at every width, so they weigh more as the codes shrink.
# What quantization gives up is precision, and only where the grid is coarse: the
# errors above. KIVI keeps the newest tokens in full precision and reports "almost the
# same quality" at 2 bits on real models (its abstract). This page's random keys make
# no such claim; they show where the error comes from.
#
# ## Linear attention
#
# Softmax attention weighs key $j$ by $e^{q_i \cdot k_j / \sqrt{d_k}}$, normalised.
# Linear attention (Katharopoulos et al., 2020) uses a similarity that factors:
# $f(q_i) \cdot f(k_j)$, with a feature map $f$ (the paper's φ) that is positive, such
# as $f(x) = \operatorname{elu}(x) + 1$. Then
#
# $$
# \begin{aligned}
# o_i &= \frac{\sum_{j \le i} f(q_i) \cdot f(k_j) \, v_j}
#             {\sum_{j \le i} f(q_i) \cdot f(k_j)}
#      = \frac{f(q_i) \, S_i}{f(q_i) \cdot z_i}, \\
# S_i &= \sum_{j \le i} f(k_j)^\top v_j, \qquad
# z_i = \sum_{j \le i} f(k_j).
# \end{aligned}
# $$
#
# The middle is the *quadratic form*: an $(L, S)$ matrix of weights, like softmax
# attention's. The right side is the *recurrent form*. $S_i$ (the paper's letter, not
# a number of keys) is a $d_k \times d_v$ matrix and $z_i$ a vector, each updated once
# per token, so generating a token needs them and nothing else (the paper's title:
# "Transformers are RNNs"). `linear_attention` computes the quadratic form,
# `linear_attention_recurrent` the recurrent one.

# %%
g = torch.Generator().manual_seed(5)
shape = (2, 4, 64, 16)  # (B, H, T, d_k): 64 tokens
q64, k64, v64 = (
    torch.randn(shape, generator=g, dtype=torch.float64) for _ in range(3)
)
quadratic, lin_weights = linear_attention(q64, k64, v64, is_causal=True)
recurrent, lin_state = linear_attention_recurrent(q64, k64, v64)
print("quadratic form's weights:", tuple(lin_weights.shape), "(B, H, T, T)")
state_shape = tuple(lin_state.state.shape)
print("recurrent form's state:", state_shape, "(B, H, d_k, d_v)")
print("and normalizer:", tuple(lin_state.normalizer.shape), "(B, H, d_k)")
lin_gap64 = (recurrent - quadratic).abs().max()
q32, k32, v32 = q64.float(), k64.float(), v64.float()
recurrent32, _ = linear_attention_recurrent(q32, k32, v32)
quadratic32, _ = linear_attention(q32, k32, v32, is_causal=True)
lin_gap32 = (recurrent32 - quadratic32).abs().max()
print(f"largest |recurrent - quadratic|: float64 {lin_gap64:.1e}")
print(f"the same in float32: {lin_gap32:.1e}")

# %% [markdown]
# The two forms agree to the rounding of each precision; the test suite checks it on
# random shapes. Now the memory. The cell feeds 16, 128 and 1,024 tokens of 4 heads of
# width 32, and weighs the state each time, beside a `KVCache` of the same keys and
# values.

# %%
g = torch.Generator().manual_seed(6)
memory = {}  # tokens -> (bytes of a KV cache, of the linear attention state)
for T in (16, 128, 1024):
    q_t, k_t, v_t = (torch.randn(1, 4, T, 32, generator=g) for _ in range(3))
    _, state_t = linear_attention_recurrent(q_t, k_t, v_t)
    kv = KVCache(num_layers=1)
    kv.update(0, k_t, v_t)
    memory[T] = (kv.nbytes, state_t.nbytes)
print(f"{'tokens':>7} {'KV cache (bytes)':>17} {'linear state (bytes)':>21}")
for T, (kv_bytes, state_bytes) in memory.items():
    print(f"{T:>7,} {kv_bytes:>17,} {state_bytes:>21,}")

# %% [markdown]
# The cache grows by the same bytes with every token; the state does not grow at all.
# It holds $d_k (d_v + 1)$ numbers per head, whatever the length. That is the whole
# appeal, and the whole problem: every token must fit into the same $d_k \times d_v$
# matrix.
#
# ## What the fixed state loses: recall
#
# *Associative recall* tests exactly that. A context holds $N$ key–value pairs, then
# a few query keys; for each query, the model must name its value. Zoology (Arora et al.,
# 2023) measures language models on a version with many queries, multi-query
# associative recall (MQAR). This page uses its simplest form: each context position
# holds one pair, so one attention layer can solve it. In Zoology's version keys and
# values are separate tokens, and its repository's basic example trains a two-layer
# model on it.
#
# `AssociativeRecall` embeds each pair as the sum of a key embedding and a value
# embedding. A query key is embedded alone. One head of width 16 attends from the
# queries to the pairs, and a linear layer scores the 64 possible values. The softmax
# model and the linear model have exactly the same parameters; only the weights differ:
# $e^{q \cdot k / \sqrt{d_k}}$ or $f(q) \cdot f(k)$.
#
# Both train on the same batches: 150 steps of Adam, 32 contexts of 1 to 64 pairs with
# 8 queries each, keys drawn without repeats from 64. Each kind trains from four
# seeds. Then each model answers 512 fresh contexts at each number of pairs.

# %%
NUM_KEYS = NUM_VALUES = 64
PAIRS = (1, 2, 4, 8, 16, 32, 64)
SEEDS = (0, 1, 2, 3)


def recall_batch(g, batch, num_pairs, num_queries):
    """Contexts of distinct keys, random values; queries among the keys."""
    order = torch.rand(batch, NUM_KEYS, generator=g).argsort(dim=-1)
    keys = order[:, :num_pairs]  # (B, N): distinct keys
    values = torch.randint(0, NUM_VALUES, (batch, num_pairs), generator=g)
    which = torch.randint(0, num_pairs, (batch, num_queries), generator=g)
    return keys, values, keys.gather(1, which), values.gather(1, which)


# %% [markdown]
# <details class="example">
# <summary>Training the eight models, and their accuracy on fresh contexts</summary>
#
# `train` runs the 150 steps of Adam for one kind and seed; the batches depend on the
# seed only, so both kinds see the same ones. `accuracy` draws 512 fresh contexts of a
# given number of pairs, the same for every model, and counts the right answers.
#
# </details>


# %% tags=["deeper"]
def train(attention, seed, steps=150):
    torch.manual_seed(seed)
    model = AssociativeRecall(
        NUM_KEYS, NUM_VALUES, 32, 16, attention=attention
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    # the same batches for both kinds
    g = torch.Generator().manual_seed(100 + seed)
    for _ in range(steps):
        num_pairs = int(torch.randint(1, max(PAIRS) + 1, (1,), generator=g))
        keys, values, queries, answers = recall_batch(g, 32, num_pairs, 8)
        logits = model(keys, values, queries)  # (B, Q, NUM_VALUES)
        loss = F.cross_entropy(logits.flatten(0, 1), answers.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@torch.no_grad()
def accuracy(model, num_pairs):
    # fresh contexts, the same for every model
    g = torch.Generator().manual_seed(10_000 + num_pairs)
    keys, values, queries, answers = recall_batch(g, 512, num_pairs, 8)
    right = model(keys, values, queries).argmax(dim=-1) == answers  # (B, Q)
    return right.float().mean().item()


# %% tags=["plot"]
started = time.process_time()
models = {
    kind: [train(kind, seed) for seed in SEEDS]
    for kind in ("softmax", "linear")
}
train_seconds = time.process_time() - started
recall = {  # kind -> (seeds, pairs) accuracies
    kind: np.array([[accuracy(model, n) for n in PAIRS] for model in trained])
    for kind, trained in models.items()
}
print("accuracy on 4,096 fresh queries, seeds 0 to 3")
print(f"{'pairs':>5}  {'softmax':<19}    linear")
for i, n in enumerate(PAIRS):
    cells = [
        " ".join(f"{a:.2f}" for a in recall[kind][:, i]) for kind in recall
    ]
    print(f"{n:>5}  {cells[0]}    {cells[1]}")
print(f"chance: {1 / NUM_VALUES:.3f}")

# %% tags=["measured"]
trained = len(SEEDS) * len(models)
print(f"training the {trained} models took {train_seconds:.1f} s of CPU time")

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(4.5, 3.6), layout="constrained")
for kind, marker in (("softmax", "o"), ("linear", "s")):
    mean = recall[kind].mean(axis=0)
    spread = [mean - recall[kind].min(axis=0), recall[kind].max(axis=0) - mean]
    ax.errorbar(
        PAIRS, mean, yerr=spread, fmt=marker + "-", capsize=3, label=kind
    )
ax.axhline(1 / NUM_VALUES, color="grey", linestyle=":", label="chance")
ax.set_xscale("log", base=2)
ax.set_xticks(PAIRS, PAIRS)
ax.minorticks_off()
ax.set_ylim(0, 1.05)
ax.set_xlabel("key-value pairs in the context")
ax.set_ylabel("recall accuracy")
ax.set_title("One attention layer, two kinds of weights")
ax.legend()
figure_to_svg(
    fig,
    alt="Recall accuracy against the number of key-value pairs, 1 to 64, "
    "mean of four seeds with their range: softmax attention stays near 1 at "
    "every count; linear attention falls as the pairs grow.",
)

# %% [markdown]
# The softmax model recalls almost every pair at every count here, from every seed. The
# linear model does well with few pairs and falls as they grow, from every seed too.
# Both saw the same data for the same steps. This page trains briefly, and the linear
# model might gain from longer training; but its state has a limit of its own. The
# state is one $16 \times 32$ matrix, written to by every pair. Reading it with a query
# returns the value of the matching pair plus a share of every other pair, weighted by
# $f(q) \cdot f(k_j)$.
#
# With $f = \operatorname{elu} + 1$ that share is never zero. $\operatorname{elu}(x) +
# 1$ is $e^x > 0$ below zero and $x + 1 \ge 1$ above, so every coordinate of every
# feature vector is strictly positive, and so is the dot product of any two: no two
# keys are ever orthogonal, and every pair interferes with every read. The picture
# shows it on one context of 16 pairs, read with each of its 16 keys, for the seed-0
# models: the weight each query puts on each pair, on one colour scale (dark purple
# 0, yellow 1). The softmax model puts nearly all of it on the diagonal, its own pair;
# the linear model spreads it over all of them. The cell below the picture computes,
# for every linear model, the smallest $f(q) \cdot f(k)$ over every query key and
# every possible pair, and both kinds' mean weight on the right pair.

# %% tags=["plot"]
g = torch.Generator().manual_seed(20_000)
keys16, values16, _, _ = recall_batch(g, 1, 16, 1)  # one context of 16 pairs
fig, axes = plt.subplots(2, 1, figsize=(4.5, 7.6), layout="constrained")
for ax, kind in zip(axes, ("softmax", "linear"), strict=True):
    with torch.no_grad():
        w = models[kind][0].attention_weights(keys16, values16, keys16)
    attention_heatmap(w[0], ax=ax, title=kind, vmax=1.0, annotate=False)
    ax.set(xlabel="pair read", ylabel="query (its own pair's index)")
    ax.set_xticks(range(0, 16, 3), range(0, 16, 3))
    ax.set_yticks(range(0, 16, 3), range(0, 16, 3))
figure_to_svg(
    fig,
    alt="Two 16 by 16 heatmaps of the weights the seed-0 models put on each"
    " of 16 pairs when queried with each pair's key, on one scale from 0 to"
    " 1: the softmax model's diagonal is near 1 and the rest near 0; the"
    " linear model's weights are spread over every pair, none near 1.",
)

# %% tags=["plot"]
all_pairs = torch.cartesian_prod(
    torch.arange(64), torch.arange(64)
)  # (4096, 2)
smallest = []  # per linear model: min f(q) . f(k) over every query and pair
for model in models["linear"]:
    with torch.no_grad():
        q_all = model.q_proj(model.key_embed.weight)  # (64 keys, d_k)
        embedded = model.key_embed(all_pairs[:, 0]) + model.value_embed(
            all_pairs[:, 1]
        )  # (4096, C): every possible pair
        k_all = model.k_proj(embedded)  # (4096, d_k)
        similar = elu_feature_map(q_all) @ elu_feature_map(k_all).T
    smallest.append(similar.min().item())
print("smallest f(q) . f(k), each linear model:", np.round(smallest, 3))
on_own = {}  # (kind, pairs) -> mean weight on the right pair, over seeds
for kind, trained in models.items():
    for n in (16, 64):
        g = torch.Generator().manual_seed(30_000 + n)
        keys_n, values_n, _, _ = recall_batch(g, 64, n, 1)  # (64, n)
        with torch.no_grad():
            w = [
                m.attention_weights(keys_n, values_n, keys_n) for m in trained
            ]
        on_own[kind, n] = (
            torch.stack(w).diagonal(dim1=-2, dim2=-1).mean().item()
        )
print("mean weight a query puts on its own pair:")
for (kind, n), share in on_own.items():
    print(f"  {kind:<8} {n:>2} pairs: {share:.3f}")

# %% [markdown]
# Every similarity is positive, in every linear model; with 64 pairs a linear model's
# query reads only a small share from its own pair, where a softmax model's reads
# nearly all of it. The softmax model keeps every pair's key and value,
# and its exponential can make the other pairs' weights as small as it needs.
#
# The trade between a fixed state and recall has a name in the literature. Based
# (Arora et al., 2024) identifies "a key tradeoff between a model's state size and
# recall ability": models that "maintain a fixed-size recurrent state" (H3, Mamba,
# RWKV) "struggle at recall". It combines linear attention with a small sliding window
# of softmax attention, and "by varying BASED window size and linear attention feature
# dimension", dials the state size along that trade-off. The same authors' earlier
# Zoology (Arora et al., 2023) measured it for *gated convolutions* (Hyena, H3, RWKV),
# not linear attention: "a 70M parameter attention model outperforms a 1.4 billion
# parameter gated-convolution model on associative recall", and on synthetic recall,
# "to solve AR on longer and longer sequences, gated-convolutions needed more and more
# dimensionality (and, thus, FLOPs) while attention did not".
#
# ## One table
#
# The picture at the top of the page, as a table, with what each method gives up. It
# is one layer of DeepSeek-V2's attention: 128 heads of width 128, and for MLA its own
# latent. Numbers are 16-bit; a quantized cache stores keys per channel in groups of 32
# and values per token; the sliding window keeps 4,096 positions, Mistral 7B's window;
# linear attention keeps one state per head. Growing caches are listed by bytes per
# token. The window and the state stop growing, so their bytes per token are their
# total divided by the tokens, here at $T$ = 32,768.

# %%
gives_up = {
    "MHA, 128 heads": "nothing: the baseline",
    "GQA, 8 heads": "16 query heads share a key",
    "MQA, 1 head": "all heads share one key",
    "MLA, d_c + d_R = 576": "a model trained for it",
    "MHA, int8": "precision",
    "MHA, int4": "more precision",
    "MHA, int2": "most precision",
    "MHA, window 4,096": "every older token",
    "linear attention": "exact recall",
}
print(f"{'method':<22} {'bytes/token':>11} {'MiB at T':>9}  gives up")
for method, formula in formulas.items():
    total = formula(T_table)
    mib = total / 2**20
    each = total / T_table
    print(f"{method:<22} {each:>11,.0f} {mib:>9.2f}  {gives_up[method]}")

# %% [markdown]
# The check: each real cache, 64 tokens, one layer of this shape, bytes counted by the
# object itself. The window is 48 here, so the formula for the window uses 48 too.

# %% tags=["plot"]
T_check, W_check = 64, 48
g = torch.Generator().manual_seed(7)


def random16(*shape):
    return torch.randn(*shape, generator=g).to(torch.bfloat16)


objects = {}
growing = {"MHA, 128 heads": 128, "GQA, 8 heads": 8, "MQA, 1 head": 1}  # H_kv
for method, kv_heads in growing.items():
    kv_shape = (1, kv_heads, T_check, d_t)  # (B, H_kv, T, d_k)
    objects[method] = KVCache(num_layers=1)
    objects[method].update(0, random16(*kv_shape), random16(*kv_shape))
objects["MLA, d_c + d_R = 576"] = LatentCache(num_layers=1)
latents_check, rope_check = random16(1, T_check, 512), random16(1, T_check, 64)
objects["MLA, d_c + d_R = 576"].update(0, latents_check, rope_check)
# (B, H, T, d_k) each
k_check, v_check = (random16(1, H_t, T_check, d_t) for _ in range(2))
for bits in (8, 4, 2):
    quantized_check = QuantizedKVCache(num_layers=1, bits=bits, group_size=G_t)
    quantized_check.update(0, k_check, v_check)
    objects[f"MHA, int{bits}"] = quantized_check
objects["MHA, window 4,096"] = SlidingWindowCache(num_layers=1, window=W_check)
for start in range(0, T_check, 16):  # 16 tokens at a time
    chunk = slice(start, start + 16)
    objects["MHA, window 4,096"].update(
        0, k_check[:, :, chunk], v_check[:, :, chunk]
    )
_, linear_state = linear_attention_recurrent(k_check, k_check, v_check)
objects["linear attention"] = linear_state
checked = {}
for method, formula in formulas.items():
    expected = formula(T_check)
    if method.startswith("MHA, window"):  # the object's window is W_check
        expected = 2 * H_t * d_t * min(T_check, W_check) * BYTES
    checked[method] = (expected, objects[method].nbytes)
    print(
        f"{method:<22} formula {expected:>10,}",
        f" object {objects[method].nbytes:>10,}",
    )
print(
    "every formula equals its object:",
    all(a == b for a, b in checked.values()),
)
int2_total = formulas["MHA, int2"](T_table)
# all but the 2-bit codes
int2_scales = int2_total - 2 * H_t * d_t * T_table * 2 // 8
share = int2_scales / int2_total
print(f"scales and zero points at 2 bits: {share:.0%} of the bytes")

# %% [markdown]
# Every row of the table is a real cache's size, scaled by the tokens. The table has
# two surprises. At 2 bits the scales and zero points are a large share of the bytes
# (printed above): their number stays the same as the codes shrink. And linear
# attention's state is *larger* than a multi-head cache of dozens of tokens (exercise
# 4 finds the break-even), because at this shape each of 128 heads keeps a
# $128 \times 128$ matrix. Its saving is that it never grows.
#
# <details class="note">
# <summary>Going deeper: what a window or a state cannot do</summary>
#
# A sliding window forgets on schedule: a token older than the window is gone, in every
# layer. Deeper layers still reach further back, through the earlier layers' outputs:
# Mistral's reference code describes information moving "forward by W tokens at most"
# at each layer. Linear attention forgets by blurring instead: nothing leaves the
# state, but everything shares it. Based (Arora et al., 2024) combines the two, linear
# attention and a sliding window of softmax attention, and tunes its state size by the
# window and the width of its feature map.
#
# </details>
#
# ## Summary
#
# - **MLA** caches one latent and one shared rotary key per token and layer:
#   $d_c + d_R$ numbers, 576 in DeepSeek-V2 and V3. Absorbing $W_{UK}$ into the query
#   projection and $W_{UV}$ into the output projection gives the same output while
#   attention reads only the latents; the rotary part is kept apart because a rotation
#   could not be absorbed.
# - **Quantization** keeps the keys and values in fewer bits. Outlier channels of the
#   keys make per-token quantization move much more attention than per-channel
#   quantization; scales and zero points are a growing share of the bytes as the bits
#   fall.
# - **Linear attention** has a quadratic and a recurrent form with the same output; the
#   recurrent one keeps a state of fixed size. A one-layer model with it recalls fewer
#   pairs as the pairs grow, where the same model with softmax attention does not: with
#   a positive feature map, every pair interferes with every read.
#
# ## Common pitfalls
#
# **1. "Quantize every cache per token, as the values are."** Keys have outlier
# channels, and a large channel widens every token's grid. The [quantization
# table](#a-quantized-cache) printed the symptom: with outliers, keys stored per token
# move several times more attention than keys stored per channel, at every width.
# Quantize the keys per channel and the values per token, as KIVI does.
#
# **2. "A 2-bit cache is an eighth of a 16-bit one."** Every group of codes also keeps
# a 16-bit scale and zero point. The [bytes per token](#a-quantized-cache) printed
# for 2 bits are well above an eighth of those for 16, and at the table's shape the
# scales and zero points are about a quarter of the 2-bit cache. Count them, or use
# larger groups (exercise 3).
#
# **3. "A fixed-size state always takes less memory than a cache."** It takes less
# only past a break-even length. The [memory cell](#linear-attention) printed the
# symptom: at 16 tokens the linear state of 4 heads of 32 outweighs the whole KV cache
# of the same tokens. Compare at the lengths you serve (exercise 4 finds the
# break-even at DeepSeek-V2's shape).
#
# **4. "Linear attention's keys can avoid each other, like orthogonal vectors."** With a
# positive feature map no dot product is zero. The cell under the picture of the
# weights printed the smallest similarity of every linear model, positive, and the
# small share a query reads from its own pair at 64 pairs.
#
# ## Exercises
#
# **1. A smaller latent model.** DeepSeek-V2-Lite (`config_16B.json`, in the same
# folder as the others) has 27 layers and 16 heads, with the same `kv_lora_rank` of
# 512 and `qk_rope_head_dim` of 64. Compute its MLA cache per token (all layers,
# 16-bit) and that of multi-head attention with its 16 heads of 128. How much does
# MLA save here, and why less than in DeepSeek-V2?

# %% tags=["solution"]
lite_layers, lite_heads = 27, 16  # config_16B.json: n_layers, n_heads
mla_lite = (512 + 64) * lite_layers * 2  # bytes per token, all layers
mha_lite = 2 * lite_heads * 128 * lite_layers * 2
print(
    f"MLA {mla_lite / 2**10:.1f} KiB per token, MHA {mha_lite / 2**10:.1f} KiB"
)
print(f"MHA / MLA: {mha_lite / mla_lite:.2f}")
v2_ratio = per_layer["V2's shape, MHA"] / per_layer["DeepSeek-V2"]
print(f"the same ratio at DeepSeek-V2's shape: {v2_ratio:.2f}")
# MHA caches 2 H d_h numbers per layer and MLA d_c + d_R, whatever H: with 8
# times fewer heads, the saving is 8 times smaller.

# %% [markdown]
# **2. Absorbed MLA is multi-query attention.** Rebuild the absorbed form of the first
# MLA layer by hand, from `absorbed_weights` and the cache it filled: queries of width
# $d_c + d_R$ for every head, one key head $[c_j, k^R_j]$ and one value head $c_j$.
# Run it through PyTorch's `scaled_dot_product_attention` with `enable_gqa=True` and
# the layer's scale, and compare with the layer's output `y`.

# %% tags=["solution"]
from attn_ref.positional import apply_rotary

T_x = x.shape[1]
q_latent_in = mla.q_down(x)  # (B, T, query latent)
# (B, T, H * d_key) -> (B, H, T, d_key)
q_all = mla.q_up(q_latent_in).view(1, T_x, H, d_key).transpose(1, 2)
q_rot = apply_rotary(q_all[..., mla.qk_nope_head_dim :], torch.arange(T_x))
# (B, T, query latent) @ (H, query latent, d_c) -> (B, H, T, d_c)
q_abs = torch.einsum("blr,hrc->bhlc", q_latent_in, query_weight)
# (B, S, d_c), (B, S, d_R)
latents, rope_keys = cache.latents[0], cache.rope_keys[0]
# (B, 1, S, d_c + d_R): one key head
one_key = torch.cat([latents, rope_keys], dim=-1)[:, None]
heads_mqa = F.scaled_dot_product_attention(
    torch.cat([q_abs, q_rot], dim=-1),
    one_key,
    latents[:, None],  # (B, 1, S, d_c): the values are the latents
    is_causal=True,
    scale=mla.scale,
    enable_gqa=True,
)  # (B, H, T, d_c)
by_hand = torch.einsum("bhlc,hce->ble", heads_mqa, output_weight)  # (B, T, C)
print(f"largest |by hand - layer|: {(by_hand - y).abs().max():.1e}")

# %% [markdown]
# **3. What 2 bits cost.** Count the bits a `QuantizedKVCache` of 2 bits really spends
# per number, scales, zero points and all, for keys and values of 8 heads of 128 in
# float16, with groups of 32 and of 128 tokens.

# %% tags=["solution"]
g = torch.Generator().manual_seed(8)
k_ex, v_ex = (
    torch.randn(1, 8, 256, 128, generator=g).half() for _ in range(2)
)
for group in (32, 128):
    two_bits = QuantizedKVCache(num_layers=1, bits=2, group_size=group)
    two_bits.update(0, k_ex, v_ex)
    per_number = two_bits.nbytes * 8 / (k_ex.numel() + v_ex.numel())
    print(f"groups of {group:>3}: {per_number:.3f} bits per number")
# Per channel, the keys pay 2 x 16 bits per channel and group; per token, the
# values pay 2 x 16 bits per token and head. Larger groups dilute the keys'
# share.

# %% [markdown]
# **4. When the state is smaller.** At the table's shape, after how many tokens does a
# multi-head cache outweigh linear attention's state? And a grouped-query cache with 8
# heads? Use the table's `formulas`.

# %% tags=["solution"]
state_bytes = formulas["linear attention"](1)  # the same at any length
for method in ("MHA, 128 heads", "GQA, 8 heads"):
    per_token_bytes = formulas[method](1)
    # the first T with a larger cache
    tokens = state_bytes // per_token_bytes + 1
    print(f"{method}: larger than the state from {tokens:,} tokens on")

# %% [markdown]
# **5. The state carries on.** Feed the 64 tokens of the linear attention section to
# `linear_attention_recurrent` in four calls of 16, passing the state from one call to
# the next, and compare with the single call.

# %% tags=["solution"]
carried, parts = None, []
for start in range(0, 64, 16):
    chunk = slice(start, start + 16)
    part, carried = linear_attention_recurrent(
        q64[..., chunk, :], k64[..., chunk, :], v64[..., chunk, :], carried
    )
    parts.append(part)
# four (B, H, 16, d_v) -> (B, H, 64, d_v)
four_calls = torch.cat(parts, dim=-2)
gap = (four_calls - recurrent).abs().max()
print(f"largest |four calls - one call|: {gap:.1e}")
print("tokens in the state:", carried.length)

# %% [markdown]
# ## References
#
# - DeepSeek-AI. [DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
#   Language Model](https://arxiv.org/abs/2405.04434). 2024. Multi-head latent
#   attention (section 2.1: equations 9 to 19, Table 1's cache per token, "equal to GQA
#   with only 2.25 groups"), its sizes (section 3.1.2), the cache quantized to "6 bits on
#   average" (section 3.2.3), the absorption (Appendix C) and MLA against MHA
#   (Appendix D.2). The report is also in
#   [deepseek-ai/DeepSeek-V2](https://github.com/deepseek-ai/DeepSeek-V2).
# - DeepSeek-AI, configuration files of the inference code in
#   [deepseek-ai/DeepSeek-V3](https://github.com/deepseek-ai/DeepSeek-V3/tree/main/inference/configs):
#   `config_671B.json` (DeepSeek-V3), `config_236B.json` (DeepSeek-V2: its sizes are those
#   of the V2 paper's section 3.1.2) and `config_16B.json` (DeepSeek-V2-Lite); fields
#   `n_layers`, `n_heads`, `kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`,
#   `v_head_dim` (the Hugging Face `config.json` files name the first two
#   `num_hidden_layers` and `num_attention_heads`). The same repository's
#   [`inference/model.py`](https://github.com/deepseek-ai/DeepSeek-V3/blob/main/inference/model.py)
#   implements MLA both ways: "naive", caching every head's keys and values, and
#   "absorb", caching `kv_cache` (the latents) and `pe_cache` (the rotary keys).
# - Zirui Liu, Jiayi Yuan, Hongye Jin, Shaochen Zhong, Zhaozhuo Xu, Vladimir Braverman,
#   Beidi Chen, Xia Hu. [KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV
#   Cache](https://arxiv.org/abs/2402.02750). ICML 2024. Keys per channel, values per
#   token; the [code and README](https://github.com/jy-yuan/KIVI) ("quantizing the key
#   cache per-channel and the value cache per-token"; `quant/new_pack.py` holds the
#   min–max quantizer, with groups of tokens for the keys); the authors'
#   [project page](https://zirui-ray-liu.github.io/projects/mlsys-numerics/kivi/)
#   describes the keys' outlier channels.
# - Angelos Katharopoulos, Apoorv Vyas, Nikolaos Pappas, François Fleuret.
#   [Transformers are RNNs: Fast Autoregressive Transformers with Linear
#   Attention](https://arxiv.org/abs/2006.16236). ICML 2020. Their code,
#   [idiap/fast-transformers](https://github.com/idiap/fast-transformers), defines the
#   feature map `elu(x) + 1` and the recurrent form's state.
# - Simran Arora, Sabri Eyuboglu, Aman Timalsina, Isys Johnson, Michael Poli, James Zou,
#   Atri Rudra, Christopher Ré. [Zoology: Measuring and Improving Recall in Efficient
#   Language Models](https://arxiv.org/abs/2312.04927). ICLR 2024. Multi-query
#   associative recall, and gated convolutions against attention (its abstract: "a 70M
#   parameter attention model outperforms a 1.4 billion parameter gated-convolution
#   model on associative recall"); the finding on longer sequences is from the authors'
#   [blog post](https://hazyresearch.stanford.edu/blog/2023-12-11-zoology1-analysis),
#   and the code is [HazyResearch/zoology](https://github.com/HazyResearch/zoology).
# - Simran Arora, Sabri Eyuboglu, Michael Zhang, Aman Timalsina, Silas Alberti, Dylan
#   Zinsley, James Zou, Atri Rudra, Christopher Ré. [Simple linear attention language
#   models balance the recall-throughput tradeoff](https://arxiv.org/abs/2402.18668).
#   ICML 2024. Based: "a key tradeoff between a model's state size and recall
#   ability" (its abstract), and a sliding window beside linear attention.
# - Albert Q. Jiang et al. [Mistral 7B](https://arxiv.org/abs/2310.06825). 2023. The
#   window of 4,096; its reference code's
#   [README](https://github.com/mistralai/mistral-src) describes the rolling buffer and
#   how information moves "forward by W tokens at most" per layer.
# - Shapes of the other models: OPT-175B from `metaseq/launcher/opt_job_constants.py` in
#   [facebookresearch/metaseq](https://github.com/facebookresearch/metaseq) (96 layers,
#   width 12,288, 96 heads of 128); Llama 3.1 70B and 405B from
#   [`sku_list.py`](https://github.com/meta-llama/llama-models/blob/main/models/llama3_1/api/sku_list.py)
#   in meta-llama/llama-models (`n_layers`, `n_kv_heads`, and `dim / n_heads`), with
#   `CONTEXT_LENGTH = 131072`.
#
# Next: [Attention bugs seen in the wild](../practice/bugs.md) collects mistakes that
# real projects shipped, each with the check that catches it.

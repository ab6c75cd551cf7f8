# %% [markdown]
# # Layer schedules and capped logits
#
# The attention of the earlier pages is the attention of 2017. The open models
# people run today change it in small ways, each for a reason you can measure. This
# page builds two of them:
#
# - **Layer schedules.** Some layers see only the last 128 to a few thousand
#   tokens (a *sliding window*), others see everything. The schedule decides the
#   key/value cache's size: the page computes the bill of Gemma 2, Gemma 3, gpt-oss
#   and nanochat from their published configurations, and pays it with real caches.
# - **Logits kept in range.** Gemma 2 *caps* its attention logits; Gemma 3
#   normalizes queries and keys instead (*QK-norm*). The page trains small models at
#   a learning rate high enough to blow up, with neither, with the cap and with
#   QK-norm, watches the largest logit, and compares them with the same model at a
#   rate that works.
#
# It assumes causal multi-head attention ([Scaled dot-product attention, step by
# step](scaled_dot_product_step_by_step.md)), the key/value cache ([Generating text
# with a KV cache](kv_cache.md)), sliding windows and `score_mod`s ([Serving long
# contexts](serving_long_contexts.md)) and the induction task ([Attention that
# learned](induction_heads.md)). Shapes follow the [notation](../notation.md).
#
# The picture: which keys each query sees in a full layer and in a sliding layer
# with a window of 4, and the cap $50 \tanh(s/50)$ beside the logit it replaces.

# %% tags=["plot"]
import math
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch.nn.attention import flex_attention as torch_flex

from attn_ref.masks import causal_mask, sliding_window_mask
from attn_ref.modern import (
    FULL,
    PUBLISHED,
    SLIDING,
    ModernDecoder,
    ScheduleCache,
    generate,
    kv_bytes,
    qk_norm,
    softcap,
    softcap_score_mod,
    tile_layer_types,
    train_repeats,
)
from attn_ref.plotting import figure_to_svg
from attn_ref.serving import create_block_mask, flex_attention
from attn_ref.training import next_token_losses, repeated_tokens

torch.set_num_threads(1)  # results that do not depend on the core count
warnings.filterwarnings("ignore", message=".*flex_attention called without")

positions = torch.arange(8)
full_mask = causal_mask(8)
window_mask = sliding_window_mask(positions, positions, window=4)
s = torch.linspace(-150, 150, 301)
fig, ax = plt.subplot_mosaic(
    [["full", "window"], ["cap", "cap"]],
    figsize=(4.5, 4.4),
    layout="constrained",
)
for name, m, title in (
    ("full", full_mask, "full"),
    ("window", window_mask, "window of 4"),
):
    ax[name].imshow(m.numpy(), cmap="viridis", vmin=0, vmax=1)
    ax[name].set(
        title=title, xlabel="key", ylabel="query", xticks=[], yticks=[]
    )
ax["cap"].plot(s, s, color="gray", linestyle=":", label="s")
ax["cap"].plot(s, softcap(s, 50.0), color="C2", label="50 tanh(s/50)")
ax["cap"].set(title="a cap of 50", xlabel="logit s", ylim=(-160, 160))
ax["cap"].legend(fontsize=9)
figure_to_svg(
    fig,
    alt="Top left: an 8 by 8 causal mask, yellow (1) where a query may "
    "attend: "
    "every earlier key. Top right: a sliding window of 4, yellow only on the "
    "diagonal and the three keys before it. Below: the capped logit "
    "50 tanh(s/50) against s: equal near 0, flat below 50 far from it.",
)

# %% [markdown]
# ## A layer that sees the last W tokens
#
# In a *sliding* layer the query at position $i$ sees the keys $i - W < j \le i$:
# itself and the $W - 1$ before it. A *full* layer sees every earlier key. Stacking
# restores the reach: information can hop $W - 1$ positions per sliding layer, and
# one full layer sees everything ([Serving long contexts](serving_long_contexts.md)
# has the details). Models mix the two, and their configurations spell the mix out.
# Recent Hugging Face configurations (`config.json`) name each layer's kind in
# `layer_types`, `"sliding_attention"` or `"full_attention"`; older ones, still on
# the Hub, give the pattern as a number, `sliding_window_pattern` (6 in Gemma 3's:
# five sliding layers, then a full one). `tile_layer_types` repeats a pattern the
# same way, from layer 0:
#
# - **Gemma 2**: sliding and full in turn, windows of 4096 (Google's
#   [config.py](https://github.com/google/gemma_pytorch/blob/014acb7ac4563a5f77c76d7ff98f31b568c16508/gemma/config.py):
#   `attn_types=[AttentionType.LOCAL_SLIDING, AttentionType.GLOBAL] * 13`,
#   `sliding_window_size=4096` for the 2B).
# - **Gemma 3**: five sliding layers, then one full, windows of 1024 (512 for the
#   1B), rotary bases of 10,000 on sliding layers and 1,000,000 on full ones (the
#   same file: `rope_wave_length`).
# - **gpt-oss**: a window of 128 on even layers, full on odd ones (OpenAI's
#   [model.py](https://github.com/openai/gpt-oss/blob/7b583341fe16729127f6d5b94a7b09ccae97e1a1/gpt_oss/torch/model.py):
#   `config.sliding_window if layer_idx % 2 == 0 else 0`).
# - **nanochat**: `window_pattern = "SSSL"`, the last layer always full, a short
#   window of 512 keys to the left at a context of 2048
#   ([gpt.py](https://github.com/karpathy/nanochat/blob/92d63d4e8bb4df75c3b71618f31ddde2378b2bcd/nanochat/gpt.py)).

# %%
gemma3 = tile_layer_types([SLIDING] * 5 + [FULL], 62)
print(
    "Gemma 3 27B, full layers:",
    [i for i, kind in enumerate(gemma3) if kind == FULL],
)
nanochat = tile_layer_types([SLIDING] * 3 + [FULL], 20, last=FULL)
print("nanochat d20:", "".join("L" if k == FULL else "S" for k in nanochat))

# %% [markdown]
# ## The bill
#
# A full layer's cache grows with every token; a sliding layer's stops at $W$. So
# one sequence's cache after $T$ tokens is a sum over the layers, with
# $n_\ell = T$ for a full layer and $\min(T, W)$ for a sliding one:
#
# $$
# \text{bytes} = \sum_{\ell} 2\, H_{kv}\, d_k\, b \cdot n_\ell.
# $$
#
# `kv_bytes` adds it up layer by layer with the site's `kv_cache_bytes`.
# `PUBLISHED` holds each model's `layer_types`, `num_key_value_heads`,
# `head_dim`, window and context, from the files linked above. For each
# (bfloat16, $b = 2$): the bytes per token with every layer full, and the cache at
# the model's full context with its schedule and with every layer full.

# %% tags=["plot"]
bill = {}
print(
    f"{'model':<13}{'B/token':>8}{'context':>9}{'schedule':>10}"
    f"{'all full':>10}{'saving':>7}"
)
for config in PUBLISHED:
    T_max = config.context_length
    ours = kv_bytes(config, T_max)
    full = kv_bytes(config.all_full(), T_max)
    bill[config.name] = ours, full
    print(
        f"{config.name:<13}{kv_bytes(config.all_full(), 1):>8,}"
        f"{T_max:>9,}{ours / 2**30:>6.2f} GiB{full / 2**30:>6.2f} GiB"
        f"{full / ours:>6.2f}x"
    )

# %% [markdown]
# At long contexts Gemma 3 pays for about one layer in six and saves about six
# times. Gemma 2, at its 8K context with a 4K window, saves a quarter of its
# bill. gpt-oss halves it.
#
# The formula charges a sliding layer exactly $W$ entries: it is the least a cache
# can keep. Engines keep more. For gpt-oss-20b at 4,096 tokens, a windowed cache
# proposed for sglang measured 102.0 MiB, against 192.0 MiB with full history
# ([sglang #30091](https://github.com/sgl-project/sglang/pull/30091)); at 131,072
# tokens, llama.cpp keeps "~0.05 GiB windowed" beside "≈ 3.00 GiB full"
# ([gguf-parser-go #32](https://github.com/gpustack/gguf-parser-go/issues/32), where
# an estimator that ignored the window charged all 24 layers in full, 49,152 bytes
# a token). The formula, for the same cases:

# %%
oss = next(c for c in PUBLISHED if c.name == "gpt-oss-20b")
entry = kv_bytes(oss.all_full(), 1) // len(oss.layer_types)  # a layer, a token
sliding = oss.layer_types.count(SLIDING)
MiB, GiB = 2**20, 2**30
print(
    f"4,096 tokens: {kv_bytes(oss, 4096) / MiB:.1f} MiB with the schedule, "
    f"{kv_bytes(oss.all_full(), 4096) / MiB:.1f} MiB all full"
)
windowed = sliding * oss.window * entry  # what the sliding layers keep
kept = (102.0 * MiB - (kv_bytes(oss, 4096) - windowed)) / (sliding * entry)
print(f"sglang's 102.0 MiB: {kept:.0f} entries per sliding layer")
full_layers = kv_bytes(oss, 131_072) - windowed
print(
    f"131,072 tokens: sliding layers {windowed / GiB:.4f} GiB, "
    f"full layers {full_layers / GiB:.2f} GiB"
)

# %% [markdown]
# The full layers agree; the sliding layers keep twice the window in sglang's
# cache, and many times it in llama.cpp's. The schedule column is a lower bound.
#
# <details class="note">
# <summary>Going deeper: where the numbers come from</summary>
#
# The Gemma values are those of Google's reference implementation
# ([config.py](https://github.com/google/gemma_pytorch/blob/014acb7ac4563a5f77c76d7ff98f31b568c16508/gemma/config.py));
# its Gemma 3 4B config leaves `max_position_embeddings` at the class default of
# 8192, while the [Gemma 3 report](https://arxiv.org/abs/2503.19786) gives the 4B,
# like the 12B and 27B, a context of 128K tokens: the table uses 131,072. The gpt-oss
# values are the defaults of OpenAI's `ModelConfig` (the 120b's; the 20b has 24
# layers) and of Transformers'
# [GptOssConfig](https://github.com/huggingface/transformers/blob/02b8f42b4240dddea1b27c45d2dc95fb2682f841/src/transformers/models/gpt_oss/configuration_gpt_oss.py).
# nanochat's d20 is its training script's default depth: 20 layers of 10 heads of
# 128; its checkpoints keep their own metadata (`n_kv_head`, `window_pattern`)
# rather than a Hugging Face `config.json`.
#
# </details>
#
# <details class="note">
# <summary>Going deeper: schedules this formula does not cover</summary>
#
# The formula gives every layer a cache of its own, with the same $H_{kv}$ and $d_k$.
# Several recent models do otherwise:
#
# - **Gemma 4** (Transformers'
#   [Gemma4TextConfig](https://github.com/huggingface/transformers/blob/008e574391258935f3ecc3035c882e73bbcac419/src/transformers/models/gemma4/configuration_gemma4.py)):
#   its full layers have a head size of their own (`global_head_dim`, 512 by
#   default) and can have fewer key/value heads (`num_global_key_value_heads`); and
#   with `num_kv_shared_layers`, the last layers reuse earlier layers' keys and
#   values and keep no cache at all ([unsloth
#   #5225](https://github.com/unslothai/unsloth/pull/5225) leaves them out of its
#   estimate for Gemma 3n and Gemma 4).
# - **Llama 4**
#   ([Llama4TextConfig](https://github.com/huggingface/transformers/blob/008e574391258935f3ecc3035c882e73bbcac419/src/transformers/models/llama4/configuration_llama4.py)):
#   three layers in four attend within fixed chunks of 8,192 tokens
#   (`attention_chunk_size`), so their cache empties at each chunk's end instead of
#   sliding; every fourth layer is full and has no rotary positions at all
#   (`no_rope_layer_interval`).
# - **Cohere's Command models**
#   ([Cohere2Config](https://github.com/huggingface/transformers/blob/008e574391258935f3ecc3035c882e73bbcac419/src/transformers/models/cohere2/configuration_cohere2.py)):
#   windows of 4,096 in three layers of four.
# - **Qwen3-Next**
#   ([Qwen3NextConfig](https://github.com/huggingface/transformers/blob/008e574391258935f3ecc3035c882e73bbcac419/src/transformers/models/qwen3_next/configuration_qwen3_next.py)):
#   three layers in four are linear attention (`full_attention_interval` 4), whose
#   state has one size at any length ([the delta rule](delta_rule.md)).
#
# </details>

# %% tags=["plot"]
lengths = np.unique(np.geomspace(1, 131_072, 60).astype(int))
fig, ax = plt.subplots(figsize=(4.5, 3.2), layout="constrained")
for color, name in (("C0", "gpt-oss-20b"), ("C1", "Gemma 3 27B")):
    config = next(c for c in PUBLISHED if c.name == name)
    ax.loglog(
        lengths,
        [kv_bytes(config, int(t)) for t in lengths],
        color=color,
        label=f"{name}",
    )
    ax.loglog(
        lengths,
        [kv_bytes(config.all_full(), int(t)) for t in lengths],
        color=color,
        linestyle="--",
        label=f"{name}, all full",
    )
ax.set(xlabel="tokens in the cache", ylabel="bytes")
ax.legend(fontsize=8)
figure_to_svg(
    fig,
    alt="Cache bytes against tokens, log-log, for gpt-oss-20b and Gemma 3 "
    "27B, each with its schedule (solid) and with every layer full "
    "(dashed). Each solid line follows its dashed one up to the window, "
    "then bends below it: beyond the window only the full layers grow.",
)

# %% [markdown]
# ## The bill, paid by real caches
#
# A formula is a promise; a cache keeps it or not. The toy model below has twelve
# layers in Gemma 3's pattern, a window of 8, rotary bases of $10^4$ and $10^6$ and
# random weights. `ScheduleCache.for_model` gives each sliding layer a
# `SlidingWindowCache` and each full layer a `KVCache`. The model decodes 64 tokens
# with that cache, then again with no cache at all, running the whole text at
# every step; `windowed=False` keeps every key in every layer.

# %%
torch.manual_seed(0)
toy = ModernDecoder(
    50,
    96,
    embed_dim=32,
    num_heads=4,
    num_kv_heads=2,
    layer_types=tile_layer_types([SLIDING] * 5 + [FULL], 12),
    window=8,
    rope_bases={SLIDING: 1e4, FULL: 1e6},
).eval()
prompt = torch.randint(
    0, 50, (1, 16), generator=torch.Generator().manual_seed(1)
)
full_pass = generate(toy, prompt, 64)
cache = ScheduleCache.for_model(toy)
cached = generate(toy, prompt, 64, cache)
kept_all = ScheduleCache.for_model(toy, windowed=False)
masked_only = generate(toy, prompt, 64, kept_all)
print("windowed cache, same tokens:", torch.equal(cached, full_pass))
print("every key kept, same tokens:", torch.equal(masked_only, full_pass))
print(f"bytes: windowed {cache.nbytes:,}, every key kept {kept_all.nbytes:,}")

# %% [markdown]
# The same tokens, about a quarter of the bytes. The formula agrees: 79 positions were
# read (16 of the prompt and 63 generated; the last token is chosen, never read),
# so each of the 2 full layers holds 79 and each of the 10 sliding ones 8, at
# $2 \cdot 2 \cdot 8 \cdot 4$ bytes a position (keys and values, $H_{kv} = 2$,
# $d_k = 8$, float32):

# %%
per_position = 2 * 2 * 8 * 4
print(
    "by the formula:",
    sum(
        per_position * (79 if kind == FULL else 8) for kind in toy.layer_types
    ),
)

# %% [markdown]
# <details class="note">
# <summary>Going deeper: rotate before you cache</summary>
#
# Each layer rotates its queries and keys by their absolute positions, with its own
# base, *before* a key goes into the cache. A cached key keeps the angle of the
# position it was made at, so a rolling buffer can drop the oldest key and keep the
# others as they are: the score of a query and a key depends only on their distance.
#
# </details>
#
# ## Keeping logits in range: the cap
#
# Gemma 2 passes every attention logit through $50 \tanh(s/50)$ and its final
# logits through $30 \tanh(s/30)$ (`attn_logit_softcapping=50.0`,
# `final_logit_softcapping=30.0` in its config). Near zero the cap changes nothing
# (its slope at 0 is 1); far from zero it flattens and approaches $\pm 50$. (In
# exact arithmetic it never gets there; in float32, $\tanh$ of a large number rounds
# to exactly 1, and the cap to exactly 50.)
# The cap needs only the score, so it is a `score_mod` for the FlexAttention
# interface of [Serving long contexts](serving_long_contexts.md).
# `softcap_score_mod` gives it; PyTorch's own `flex_attention` takes the same
# function and checks ours:

# %%
g = torch.Generator().manual_seed(1)
q, k, v = 8 * torch.randn(3, 1, 2, 12, 4, generator=g)  # (B, H, T, d_k)
causal = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx  # noqa: E731
cap = softcap_score_mod(50.0)
blocks = create_block_mask(causal, 1, 1, 12, 12, 4)
ours, _ = flex_attention(q, k, v, score_mod=cap, block_mask=blocks)
blocks = torch_flex.create_block_mask(causal, None, None, 12, 12, "cpu")
theirs = torch_flex.flex_attention(q, k, v, score_mod=cap, block_mask=blocks)
flex_difference = (ours - theirs).abs().max().item()
print(f"attn_ref vs torch flex_attention: {flex_difference:.1e}")

# %% [markdown]
# ## QK-norm: a bound from the gains
#
# Gemma 3 drops both caps and normalizes each query and key instead. Its report
# says why: "Inspired by Dehghani et al. (2023), Wortsman et al. (2023) and
# Chameleon Team (2024), we replace the soft-capping of Gemma 2 with QK-norm." The
# idea is older: Henry et al. (2020) divided queries and keys by their lengths and
# multiplied the scores by a learned scale; Dehghani et al. (2023) applied a
# LayerNorm to queries and keys after vision transformers of about 8 billion
# parameters diverged with extremely large attention logits, and went on to train
# one of 22 billion. It is common now: Qwen3's report says it introduces QK-Norm "to
# ensure stable training", Llama 4 normalizes the queries and keys of its layers
# with rotary positions (`use_qk_norm`), and Gemma 4 keeps Gemma 3's.
#
# Gemma's form is an RMSNorm, which `qk_norm` computes: divide each query and key
# by its root mean square over its $d$ features, and multiply by learned gains $g$.
# A normalized vector then has a norm of at most $\sqrt{d}$ times its largest gain,
# so by Cauchy-Schwarz no scaled score can pass
#
# $$
# \sqrt{d}\, \max_i |g^q_i| \, \max_i |g^k_i|,
# $$
#
# however large the layer's input. (Gemma 3 27B divides its scores by $\sqrt{168}$,
# its `query_pre_attn_scalar`, rather than by $\sqrt{d} = \sqrt{128}$, so its bound
# is $128 / \sqrt{168}$ times the gains; the cell prints it.) With gains of 1 and
# $d = 32$, queries and keys of size $10^4$ still give scores below
# $\sqrt{32} \approx 5.7$:

# %%
x = 1e4 * torch.randn(2, 6, 32, generator=g)  # (B, T, d)
qn = qk_norm(x)
kn = qk_norm(1e4 * torch.randn(2, 6, 32, generator=g))
peak = (qn @ kn.transpose(-1, -2) / math.sqrt(32)).abs().max().item()
print(f"largest score {peak:.2f}, bound {math.sqrt(32):.2f}")
print(f"Gemma 3 27B's bound: {128 / math.sqrt(168):.2f} times its gains")

# %% [markdown]
# ## A learning rate too high
#
# The model and task of the induction page, built with this page's layer:
# `ModernDecoder(64, 32, embed_dim=64, num_heads=2)`, two attention-only layers of
# two heads, trained by `train_repeats` on random tokens that repeat. AdamW at 0.04
# is too fast for it. Each seed trains three models for 160 steps from the same
# start: with neither fix, with a cap of 50, and with QK-norm. For reference, it
# trains the first and the last again at 0.01, a rate at which the model learns.
# Each step records the largest attention logit, before any cap.

# %%
V, T = 64, 32
SEEDS = (0, 1, 2, 3)
RECIPE = dict(steps=160, batch_size=32)
VARIANTS = {  # name: (options, learning rate)
    "neither": ({}, 4e-2),
    "cap 50": ({"softcap": 50.0}, 4e-2),
    "QK-norm": ({"qk_norm": True}, 4e-2),
    "neither, 0.01": ({}, 1e-2),
    "QK-norm, 0.01": ({"qk_norm": True}, 1e-2),
}
runs, seconds = {}, {}
for seed in SEEDS:
    for variant, (options, lr) in VARIANTS.items():
        torch.manual_seed(seed)
        model = ModernDecoder(V, T, embed_dim=64, num_heads=2, **options)
        start = time.process_time()
        history = train_repeats(model, seed=seed, lr=lr, **RECIPE)
        seconds[variant, seed] = time.process_time() - start
        runs[variant, seed] = model, history

# %% tags=["plot"]
peaks = {key: max(h.max_logit) for key, (_, h) in runs.items()}
fig, ax = plt.subplots(figsize=(4.5, 3.2), layout="constrained")
for color, variant in zip(("C0", "C1", "C2"), VARIANTS, strict=False):
    for seed in SEEDS:
        ax.semilogy(
            runs[variant, seed][1].max_logit,
            color=color,
            alpha=0.7,
            label=f"{variant}, 0.04" if seed == 0 else None,
        )
ax.axhline(50, color="C1", linestyle="--", linewidth=1)
ax.set(xlabel="training step", ylabel="largest attention logit")
ax.legend(fontsize=9)
least = min(peaks["neither", seed] for seed in SEEDS)
figure_to_svg(
    fig,
    alt="The largest attention logit against the training step at a "
    "learning rate of 0.04, log scale, four seeds per variant. With neither "
    f"fix it climbs to {least:.0e} or more. Under the cap the raw logits "
    "still grow far past 50, while the softmax sees at most 50 (dashed). "
    "With QK-norm they stay at a few units.",
)

# %% [markdown]
# The tables give each model's largest logit over training and its loss on a
# fresh batch of 256 sequences. A uniform guess over 64 tokens scores
# $\ln 64 \approx 4.16$ nats.


# %%
def test_batch(seed):
    generator = torch.Generator().manual_seed(1000 + seed)
    return repeated_tokens(256, T, V, (8, 16), generator)[0]


def final_loss(model, seed):
    tokens = test_batch(seed)
    with torch.no_grad():
        return next_token_losses(model(tokens)[0], tokens).mean().item()


losses = {key: final_loss(m, key[1]) for key, (m, _) in runs.items()}
for title, table, form in (
    ("largest logit", peaks, ">9.2g"),
    ("loss", losses, ">9.2f"),
):
    print(f"{title:<15}" + "".join(f"{'seed ' + str(s):>9}" for s in SEEDS))
    for variant in VARIANTS:
        cells = "".join(f"{table[variant, s]:{form}}" for s in SEEDS)
        print(f"{variant:<15}{cells}")

# %% [markdown]
# Why does the cap not help? Under it the raw logits still grow, far past 50,
# where $50 \tanh(s/50)$ flattens: its slope $1 - \tanh^2(s/50)$ shrinks, so less
# and less gradient flows back to those logits, and $\pm 50$ is still enough for a
# softmax to put all of a row's weight on one key. The folded cell prints the slope
# at 50 and at 150, and counts, over each capped model's test batch, the raw logits
# past each; and, for the QK-norm models, the bound derived above from their
# trained gains, beside their largest logit.


# %% tags=["check"]
def beyond(model, seed, at):
    """The share of the causal raw scores whose size is past ``at``."""
    x, shares = model.embed(test_batch(seed)), []
    with torch.no_grad():
        for layer in model.layers:
            raw = layer.scores(x)[..., causal_mask(T)]  # (B, H, T(T+1)/2)
            shares.append((raw.abs() > at).float().mean().item())
            x = x + layer(x)[0]
    return sum(shares) / len(shares)


def qk_bound(model):
    """sqrt(d) max|g_q| max|g_k|, over the layers."""
    return max(
        math.sqrt(layer.head_dim)
        * layer.q_norm.weight.abs().max().item()
        * layer.k_norm.weight.abs().max().item()
        for layer in model.layers
    )


print("seed" + "".join(f"{s:>7}" for s in SEEDS))
past = {}
for at in (50, 150):
    slope = 1 - math.tanh(at / 50) ** 2
    print(f"cap 50: raw logits past {at} (the cap's slope there: {slope:.2g})")
    past[at] = {s: beyond(runs["cap 50", s][0], s, at) for s in SEEDS}
    print("    " + "".join(f"{past[at][s]:>7.0%}" for s in SEEDS))
bounds = {seed: qk_bound(runs["QK-norm", seed][0]) for seed in SEEDS}
print("QK-norm, 0.04: bound from the gains, largest logit")
print("    " + "".join(f"{bounds[s]:>7.1f}" for s in SEEDS))
print("    " + "".join(f"{peaks['QK-norm', s]:>7.1f}" for s in SEEDS))

# %% [markdown]
# In every seed:
#
# - **Neither, 0.04**: the largest logit runs away, orders of magnitude past
#   anything QK-norm allows, and the run diverges. Its loss ends far above
#   $\ln 64$, worse than guessing.
# - **Cap 50**: the softmax never sees more than 50, and nothing diverges; but the
#   loss ends a little above $\ln 64$, no better than guessing. A large share of the
#   raw logits sit past 50, where the cap passes less than half of their gradient.
# - **QK-norm, 0.04**: the largest logit stays a few units, under the bound of its
#   gains, and the loss ends a little below $\ln 64$: nothing blows up, and little
#   is learned.
# - **At 0.01**, with or without QK-norm, the model learns the task: the loss falls
#   far below $\ln 64$.
#
# So at 0.04 all three fail, and QK-norm only removes the blow-up. Wortsman et al.
# (2023) show that "the growth of logits in attention layers" appears "in small
# models when training at high learning rates", and that QK-norm removes it, so
# that the final loss depends much less on the learning rate. Here it does not make
# 0.04 work: their runs also warm the rate up over thousands of steps and clip the
# gradients, and this toy starts at 0.04 with neither. The cap bounds what the
# softmax sees; QK-norm bounds what the layer computes.
#
# ## Common pitfalls
#
# **The window forgotten at decode.** A common mistake is to apply the window when
# the prompt is read, and to decode each new token against every cached key
# (nanochat's fallback path did,
# [#452](https://github.com/karpathy/nanochat/issues/452), fixed in
# [#456](https://github.com/karpathy/nanochat/pull/456)). On the toy model:

# %%
forgetful = ScheduleCache.for_model(toy, windowed=False)
with torch.no_grad():
    logits, _ = toy(prompt, forgetful)  # the prompt: windows applied
    tokens = torch.cat([prompt, logits[:, -1:].argmax(-1)], dim=1)
    for layer in toy.layers:
        layer.window = None  # the bug: decoding ignores the window
    for _ in range(63):
        logits, _ = toy(tokens[:, -1:], forgetful)
        tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)
for layer, kind in zip(toy.layers, toy.layer_types, strict=True):
    layer.window = 8 if kind == SLIDING else None  # put back
differ = (tokens != full_pass)[0]
print(
    f"{int(differ.sum())} of {tokens.shape[1]} tokens differ, "
    f"from position {int(differ.nonzero()[0])}"
)

# %% [markdown]
# The fix: the same window at decode, or keep only the last $W$ keys. The check
# that catches it: decoding with a cache must give the tokens of the full pass.
#
# **A window that does not shrink the cache.** A window applied only as a mask
# gives the right tokens and the memory of a model without windows: the toy's
# `windowed=False` cache above gave the same tokens in about four times the bytes.
# nanochat's engine allocates every layer at full length, and onnxruntime
# [#29904](https://github.com/microsoft/onnxruntime/pull/29904) describes the same
# for gpt-oss: "the cache is still allocated for the whole sequence". The fix: a
# cache per layer that keeps only what the layer can see.
#
# **A cap that does not cap.** `x * tanh(x / c)` looks like the cap and is not:
# once $|x| \gg c$, `tanh` is 1 and it returns $x$
# ([unsloth-zoo #593](https://github.com/unslothai/unsloth-zoo/pull/593): on
# Gemma 4 E2B, final logits reached about 124 against its cap of 30):

# %%
x = torch.tensor([124.0])
print(
    f"x * tanh(x / 30) = {(x * torch.tanh(x / 30)).item():.1f}; "
    f"30 tanh(x / 30) = {softcap(x, 30.0).item():.1f}"
)

# %% [markdown]
# **The cap on the wrong logits.** Gemma 2 caps both the attention logits (50) and
# the final logits (30). Gemma 3 drops both and normalizes queries and keys, which
# bounds only the attention logits. Gemma 4 keeps QK-norm and caps its final logits
# at 30 again: the two bound different logits (llama.cpp reads that 30 from Gemma
# 4's files, [#21390](https://github.com/ggml-org/llama.cpp/pull/21390)). nanochat
# does the same: it normalizes queries and keys (without gains, then times 1.2, so
# its scores stay within $1.2^2 \sqrt{128}$) and caps its final logits at 15. The
# two are easy to mix up
# ([modded-nanogpt #33](https://github.com/KellerJordan/modded-nanogpt/issues/33):
# "I mixed up logit softcapping and attention scores softcapping"). And a dropped
# final cap can hide from greedy decoding, since $\tanh$ keeps the order of the
# logits (Gemma 4's, in
# [Megatron-Bridge #4645](https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/4645)):
# compare probabilities, not the chosen tokens.
#
# ## Exercises
#
# **1. Off by one.** nanochat's short window is FlashAttention's
# `window_size=(512, 0)`: 512 keys to the left. How many keys does a query see,
# and what `window` gives `sliding_window_mask` the same mask?

# %% tags=["solution"]
left = 512
at = torch.arange(1024)
distance = at[:, None] - at[None, :]  # query minus key
fa_mask = (distance >= 0) & (distance <= left)
same_mask = torch.equal(fa_mask, sliding_window_mask(at, at, window=left + 1))
print(
    "keys seen by the last query:",
    int(fa_mask[-1].sum()),
    "| the same mask as window=513:",
    same_mask,
)

# %% [markdown]
# **2. Your bill.** What does Gemma 3 4B's cache hold at 32,768 tokens, with and
# without its schedule?

# %% tags=["solution"]
gemma3_4b = next(c for c in PUBLISHED if c.name == "Gemma 3 4B")
exercise_2 = {
    c.name: kv_bytes(c, 32_768) for c in (gemma3_4b, gemma3_4b.all_full())
}
for name, size in exercise_2.items():
    print(f"{name}: {size / 2**30:.3f} GiB")

# %% [markdown]
# **3. The bound, tight.** When does a QK-normed score reach its bound
# $\sqrt{d}$ (gains of 1)? Try a key equal to the query.

# %% tags=["solution"]
x = torch.randn(1, 32, generator=g)
exercise_3 = (qk_norm(x) @ qk_norm(x).T / math.sqrt(32)).item()
print(f"score {exercise_3:.4f}, bound {math.sqrt(32):.4f}")

# %% [markdown]
# A normalized vector has norm exactly $\sqrt{d}$ (up to $\epsilon$), and
# Cauchy-Schwarz is tight for parallel vectors.
#
# ## Summary
#
# The CPU time each model took to train, in this build:

# %% tags=["measured"]
for (variant, seed), sec in seconds.items():
    print(f"{variant}, seed {seed}: {sec:.1f} s")
print(f"all {len(seconds)}: {sum(seconds.values()):.1f} s of CPU time")

# %% [markdown]
# ## References
#
# - Gemma Team. [Gemma 2: Improving Open Language Models at a Practical
#   Size](https://arxiv.org/abs/2408.00118). 2024.
# - Gemma Team. [Gemma 3 Technical Report](https://arxiv.org/abs/2503.19786). 2025.
# - OpenAI. [gpt-oss-120b & gpt-oss-20b Model
#   Card](https://arxiv.org/abs/2508.10925). 2025.
# - Mostafa Dehghani et al. [Scaling Vision Transformers to 22 Billion
#   Parameters](https://arxiv.org/abs/2302.05442). ICML 2023 (QK normalization).
# - Alex Henry, Prudhvi Raj Dachapally, Shubham Pawar, Yuxuan Chen. [Query-Key
#   Normalization for Transformers](https://aclanthology.org/2020.findings-emnlp.379).
#   Findings of EMNLP 2020.
# - Mitchell Wortsman et al. [Small-scale proxies for large-scale Transformer
#   training instabilities](https://arxiv.org/abs/2309.14322). 2023.
# - Qwen Team. [Qwen3 Technical Report](https://arxiv.org/abs/2505.09388). 2025.
# - What engines keep for sliding layers:
#   [sglang #30091](https://github.com/sgl-project/sglang/pull/30091),
#   [gguf-parser-go #32](https://github.com/gpustack/gguf-parser-go/issues/32).
# - Configurations: Google's
#   [gemma/config.py](https://github.com/google/gemma_pytorch/blob/014acb7ac4563a5f77c76d7ff98f31b568c16508/gemma/config.py),
#   OpenAI's
#   [gpt_oss/torch/model.py](https://github.com/openai/gpt-oss/blob/7b583341fe16729127f6d5b94a7b09ccae97e1a1/gpt_oss/torch/model.py),
#   nanochat's
#   [nanochat/gpt.py](https://github.com/karpathy/nanochat/blob/92d63d4e8bb4df75c3b71618f31ddde2378b2bcd/nanochat/gpt.py),
#   and each model's `config.json` on Hugging Face (e.g.
#   [gpt-oss-20b](https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json)).
# - PyTorch:
#   [`flex_attention`](https://docs.pytorch.org/docs/stable/nn.attention.flex_attention.html).
#
# **Next:** [Attending to nothing: sinks and gates](attention_sinks.md).

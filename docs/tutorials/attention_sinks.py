# %% [markdown]
# # Attending to nothing: sinks and gates
#
# A softmax gives each query weights that sum to one. So a head *must* read
# something, even when no key is worth reading. Trained language models answer by
# parking that weight on the first token, whatever it is: an *attention sink*
# (Xiao et al., 2023). Today's open models give a head a cleaner way out. This page
# trains small models while the site is built and measures three of them:
#
# - **no fix**: the sink forms on position 0;
# - **a sink logit** (gpt-oss): one learned number per head joins the softmax's
#   denominator and brings no value, so the weights may sum to less than one;
# - **an output gate** (Qiu et al., 2025; Qwen3-Next): a number between 0 and 1,
#   computed from the token, multiplies the head's output, so the head may output
#   nothing.
#
# It assumes the induction task and its model ([Attention that
# learned](induction_heads.md)) and causal multi-head attention ([Scaled dot-product
# attention, step by step](scaled_dot_product_step_by_step.md)). Shapes follow the
# [notation](../notation.md): scores $(B, H, T, S)$, one sink logit $\sigma_h$ per head.
#
# The picture: one query's weights over six keys, once with a plain softmax and
# once with a sink logit of 1.5. With the sink, every key gets less, in the same
# proportions, and the grey bar is the share that goes nowhere.

# %% tags=["plot"]
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from attn_ref.masks import causal_mask
from attn_ref.modern import (
    ModernDecoder,
    first_position_mass,
    no_match_queries,
    output_gate,
    sink_softmax,
    train_repeats,
)
from attn_ref.plotting import figure_to_svg
from attn_ref.training import next_token_losses, repeated_tokens

torch.set_num_threads(1)  # results that do not depend on the core count
torch.set_printoptions(precision=3, sci_mode=False)

row = torch.tensor([[[[0.5, -0.5, 1.0, 0.0, -1.0, 0.3]]]])  # (B, H, L, S)
plain = row.softmax(-1)[0, 0, 0]
with_sink = sink_softmax(row, torch.tensor([1.5]))[0, 0, 0]
fig, ax = plt.subplots(figsize=(4.5, 3.0), layout="constrained")
keys = np.arange(6)
ax.bar(keys - 0.2, plain, width=0.4, color="C0", label="softmax")
ax.bar(keys + 0.2, with_sink, width=0.4, color="C1", label="with sink 1.5")
ax.bar(6.2, 1 - with_sink.sum(), width=0.4, color="gray", label="the sink")
ax.set_xticks([*keys, 6.2], [*(str(j) for j in keys), "sink"])
ax.set(xlabel="key", ylabel="weight", ylim=(0, 0.6))
ax.legend(fontsize=9, loc="upper left")
figure_to_svg(
    fig,
    alt="Bars of one query's weights over six keys. With a plain softmax "
    f"they sum to 1; with a sink logit of 1.5 each is smaller, they sum to "
    f"{with_sink.sum():.2f}, and a grey bar of {1 - with_sink.sum():.2f} "
    "is the weight that reached no key.",
)

# %% [markdown]
# ## Queries with nothing to match
#
# The task is the induction page's: random tokens from a vocabulary of 64, and a
# stretch of 8 to 16 of them that then repeats, in sequences of 32. There is no start
# token: position 0 is a random token like the others. An induction head looks for
# an earlier copy of the current token and predicts what followed it. Before the
# repeat there is no copy: those queries have *nothing to match*.
# `no_match_queries` marks them.
#
# If a head spread its weight evenly, the query at position $i$ would give position
# 0 a share of $1/(i+1)$. Averaged over the queries with nothing to match, that is
# the baseline a sink must beat:

# %%
V, T, PERIODS = 64, 32, (8, 16)
SEEDS = (0, 1, 2, 3)


def batch(n, seed):
    """n sequences of the task, drawn from their own generator."""
    g = torch.Generator().manual_seed(seed)
    return repeated_tokens(n, T, V, PERIODS, g)[0]


tokens = batch(256, 1000)
nothing = no_match_queries(tokens)  # (B, T)
position = torch.arange(T).expand_as(tokens)
uniform = (1 / (position[nothing] + 1)).mean().item()
print(f"queries with nothing to match: {nothing.float().mean():.0%}")
print(f"uniform share of position 0 for them: {uniform:.3f}")

# %% [markdown]
# ## The sink forms
#
# The model is the induction page's, built with this page's layer:
# `ModernDecoder(64, 32, embed_dim=64, num_heads=2)` stacks two layers of two heads,
# attention only, with learned positions. `train_repeats` trains it with AdamW at
# 0.01 for 250 steps of 32 sequences. Every 25 steps it measures, with
# `first_position_mass`, each head's mean weight on position 0 over the
# nothing-to-match queries of a fixed probe batch. Each seed trains the three
# variants from the same start; all twelve models train here.

# %%
RECIPE = dict(steps=250, lr=1e-2, batch_size=32, periods=PERIODS)
VARIANTS = {"none": {}, "sink logit": {"sink": True}, "gate": {"gate": "head"}}
models, histories, seconds = {}, {}, {}
for seed in SEEDS:
    probe = batch(128, 2000 + seed)
    for variant, options in VARIANTS.items():
        torch.manual_seed(seed)
        model = ModernDecoder(V, T, embed_dim=64, num_heads=2, **options)
        start = time.process_time()
        history = train_repeats(model, seed=seed, probe=probe, **RECIPE)
        seconds[variant, seed] = time.process_time() - start
        models[variant, seed], histories[variant, seed] = model, history


# %% tags=["plot"]
def recent_loss(h):
    """The mean training loss of the 25 steps before each measurement."""
    return [np.mean(h.loss[step - 25 : step]) for step in h.steps]


fig, (ax, below) = plt.subplots(
    2, 1, figsize=(4.5, 4.4), sharex=True, layout="constrained"
)
for color, variant in (("C0", "none"), ("C1", "sink logit")):
    for seed in SEEDS:
        h = histories[variant, seed]
        sunk = [masses[1].max().item() for masses in h.first_mass]
        label = variant if seed == 0 else None
        ax.plot(h.steps, sunk, color=color, alpha=0.8, label=label)
        below.plot(h.steps, recent_loss(h), color=color, alpha=0.8)
ax.axhline(uniform, color="gray", linestyle=":", label="uniform")
ax.set(ylabel="weight on position 0", ylim=(0, 1))
ax.legend(fontsize=9)
below.axhline(math.log(V), color="gray", linestyle=":")
below.text(250, math.log(V), "ln 64", ha="right", va="bottom", fontsize=9)
below.set(xlabel="training step", ylabel="training loss (nats)")
figure_to_svg(
    fig,
    alt="Top: layer 1's largest weight on position 0 for queries with "
    "nothing to match, against the training step, four seeds each. Without "
    "a fix it starts near the uniform share and climbs far above it in the "
    "second half of training; with a sink logit it stays low. Below: the "
    "training loss of the same runs, flat near ln 64 at first, then falling "
    "before the climb above begins.",
)

# %% [markdown]
# Without a fix, one head of layer 1 ends up parking much of those queries' weight
# on position 0, a random token. It happens once the induction heads have formed:
# the loss can fall below $\ln 64$ only by predicting the repeats, and the weight
# on position 0 climbs just after that fall (the lower plot). A head that copies
# must copy *something* when nothing matches, and the model learns to make that
# something one harmless place.
#
# <details class="note">
# <summary>Going deeper: why position 0</summary>
#
# Under a causal mask, position 0 is the only key that *every* query sees. A head that
# needs one place to park, for every query, can only agree on that one. With a start
# token the model would park there too; here the first token is random, so the
# layer below has to make position 0 recognisable from its learned position alone.
#
# </details>
#
# ## A sink logit: weight that goes nowhere
#
# gpt-oss gives each head $h$ one learned number $\sigma_h$ that joins the
# denominator of the softmax:
#
# $$
# a_{ij} = \frac{e^{s_{ij}}}{e^{\sigma_h} + \sum_k e^{s_{ik}}}.
# $$
#
# This is exactly ordinary attention over one more key, whose score is $\sigma_h$
# for every query and whose value is zero. The extra key adds $e^{\sigma_h}$ to the
# denominator and $0$ to the output. So PyTorch's own attention checks
# `sink_softmax`: append a zero key and a zero value, and put $\sigma_h$ as a bias
# on that column.

# %%
g = torch.Generator().manual_seed(0)
q, k, v = torch.randn(3, 1, 2, 5, 4, generator=g)  # (B, H, T, d_k) each
sink_at_check = torch.tensor([0.5, 3.0])
causal = causal_mask(5)
scores = (q @ k.transpose(-1, -2) / 2).masked_fill(~causal, -math.inf)
ours = sink_softmax(scores, sink_at_check) @ v  # (B, H, T, d_k)

bias = torch.zeros(5, 5).masked_fill(~causal, -math.inf)
bias = F.pad(bias, (0, 1)).expand(1, 2, 5, 6).clone()  # one more column
bias[..., -1] = sink_at_check.view(1, 2, 1)  # whose score is the sink
zero = torch.zeros(1, 2, 1, 4)
theirs = F.scaled_dot_product_attention(
    q, torch.cat([k, zero], 2), torch.cat([v, zero], 2), attn_mask=bias
)
sink_vs_sdpa = (ours - theirs).abs().max().item()
print(f"sink_softmax vs SDPA with a zero key: {sink_vs_sdpa:.1e}")

# %% [markdown]
# With $\sigma_h = 0$ for every head this is Evan Miller's *softmax₁*, from his post
# [Attention Is Off By One](https://www.evanmiller.org/attention-is-off-by-one.html)
# (2023): add 1 to the denominator, so that a head may put nearly all its weight on
# nothing. gpt-oss's model card introduces its sinks the same way: "Each attention
# head has a learned bias in the denominator of the softmax, similar to off-by-one
# attention and attention sinks, which enables the attention mechanism to pay no
# attention to any tokens." gpt-oss learns the number that softmax₁ fixes at 0, and
# keeps it in the layers with a window of 128 as well, where a window would
# otherwise push the first token, the usual sink, out of sight ([Serving long
# contexts](serving_long_contexts.md#attention-sinks) keeps the first tokens beside
# the window for the same reason). DeepSeek-V4 has the same per-head term
# (`self.sinks` in [Transformers' port](https://github.com/huggingface/transformers/pull/45643)).
#
# StreamingLLM's authors tested both ideas by pre-training three models of 160
# million parameters (Xiao et al., §3.3). softmax₁ helped only partly: "while the zero
# sink alleviates the attention sink problem to some extent, the model still relies
# on other initial tokens as attention sinks". A learned placeholder token at the
# start of every training sample worked well. Exercise 4 trains this page's model
# with $\sigma_h$ fixed at 0.

# %% [markdown]
# ## A gate: output that goes nowhere
#
# Qiu et al. (2025) multiply each head's output by $g = \sigma(x W_g)$, computed
# from the query token's own input $x$: `output_gate`. Of the forms they tried, a
# gate for each feature of each head (elementwise) did best and one for each head
# as a whole came close behind. Qwen3-Next gates each feature, and Qwen3.5 keeps
# that attention layer (Transformers builds it from `Qwen3NextAttention`, in
# [`modular_qwen3_5.py`](https://github.com/huggingface/transformers/blob/8940358af7421e958995b05136ca14ce54bef39c/src/transformers/models/qwen3_5/modular_qwen3_5.py));
# the model here gates each head (`gate="head"`).
# A head with nothing to read can close its gate, $g \approx 0$, instead of
# parking its weight somewhere.
#
# Qiu et al. compared gates at several places in the attention layer, in models of
# 1.7 billion (dense) and 15 billion parameters (mixture of experts) trained on 3.5
# trillion tokens. A sigmoid gate on each head's output, after the attention itself,
# worked best: it "consistently improves performance", "enhances training
# stability, tolerates larger learning rates", and mitigates both "massive
# activation" and the attention sink. The small models below reproduce only the
# part about the sink.

# %%
heads = torch.ones(1, 2, 1, 3)  # (B, H, T, d_k): two heads, one query
gate_logits = torch.tensor([[[4.0, -4.0]]])  # (B, T, H)
print(output_gate(heads, gate_logits)[0, :, 0])

# %% [markdown]
# ## Retrained with each
#
# The table measures the twelve models on a fresh batch of 256 sequences. For
# layer 1's most sunk head: its weight on position 0 for queries with nothing to
# match; with the sink logit, the weight that reaches any key at all (the sink has
# the rest); with the gate, its mean value on queries with nothing to match, and on
# queries that have a match; and each model's loss.


# %% tags=["plot"]
def measure(model, seed):
    """Layer 1's sink, the weight reaching keys, the gate, and the loss."""
    tokens = batch(256, 1000 + seed)
    nothing = no_match_queries(tokens)
    matched = ~nothing
    matched[:, :2] = False  # the first two queries count in neither
    with torch.no_grad():
        logits, weights = model(tokens)
        x = model.embed(tokens)
        x1 = x + model.layers[0](x)[0]  # what layer 1 reads
    w1 = weights[1]  # (B, H, T, T)
    reached = (w1.sum(-1) * nothing[:, None]).sum((0, 2)) / nothing.sum()
    out = {
        "first": first_position_mass(w1, nothing).max().item(),
        "keys": reached.max().item(),
        "loss": next_token_losses(logits, tokens).mean().item(),
    }
    if model.layers[1].gate_proj is not None:
        gates = torch.sigmoid(model.layers[1].gate_proj(x1))  # (B, T, H)
        out["closed"] = gates[nothing].mean(0).max().item()
        out["open"] = gates[matched].mean(0).min().item()
    return out


figures = {key: measure(m, key[1]) for key, m in models.items()}
print("      weight on position 0   sink: on   gate: no match      loss")
print("seed   none  sink  gate      keys      / match     none  sink  gate")
for seed in SEEDS:
    n, s, g = (figures[v, seed] for v in VARIANTS)
    print(
        f"{seed:>4} {n['first']:>6.2f}{s['first']:>6.2f}{g['first']:>6.2f}"
        f"{s['keys']:>10.2f}{g['closed']:>11.2f} / {g['open']:.2f}"
        f"{n['loss']:>8.3f}{s['loss']:>6.3f}{g['loss']:>6.3f}"
    )

# %% [markdown]
# In every seed:
#
# - **No fix**: the sunk head puts several times the uniform share on position 0.
# - **Sink logit**: that weight falls to half of no fix's or less, and most of a
#   nothing-to-match query's weight reaches no key at all: the sink takes it.
# - **Gate**: the gate is mostly closed where nothing matches (well under half
#   open) and mostly open where something does, and the weight on position 0 is
#   lower than without it.
# - **Both** lower the loss, the sink logit by more.
#
# With the gate, the sink did not go away: the sunk head still puts well over the
# uniform share on position 0. But where nothing matches, its gate passes well
# under half of what the head reads there. With the sink logit, the
# weight went where the model was built to put it: nowhere.
#
# ## Common pitfalls
#
# **A sink dropped on one path.** A kernel normalizes without the sink, as a plain
# softmax would. Every test with a sink of zero weight passes. With zero scores, ten
# keys whose values are 1 and a positive sink, the right output is
# $S / (S + e^{\sigma_h})$ per head, and the dropped sink gives 1:

# %%
H, S = 4, 10
sink = torch.tensor([0.5, 1.0, 1.5, 2.0])
scores, values = torch.zeros(1, H, 1, S), torch.ones(1, H, S, 1)
dropped = (scores.softmax(-1) @ values).flatten()  # the bug
right = (sink_softmax(scores, sink) @ values).flatten()  # the fix
print("sink dropped:", dropped)
print("with the sink:", right)

# %% [markdown]
# The fix: add $e^{\sigma_h - m}$ to the denominator on every path (a kernel's
# running maximum $m$ starts at the sink). The check that catches it is the one
# above: attention with a sink equals attention over one more key of value zero.
# This happened in a real kernel: on one GPU family, sink-aware attention fell back
# to a generic path that drops the sink
# ([modular #6198](https://github.com/modular/modular/issues/6198)). The fix proposed
# in [#6591](https://github.com/modular/modular/pull/6591) sends those cases to the
# slower naive kernel, which applies the sink.
#
# **The sink of the wrong head.** Scores are often laid out as $(B \cdot H, L, S)$
# rows. The same pull request found the naive kernel finding a row's head as
# `row % H`. For one query per sequence ($L = 1$, decoding) that is right; for a
# prefill it is not, and the weights of the wrong head's sink come out:

# %%
B = 2
for L in (1, 5):
    rows = torch.arange(B * H * L)  # row (b H + h) L + i of (B H, L, S)
    wrong = (rows % H != (rows // L) % H).sum().item()
    print(f"L = {L}: {wrong} of {len(rows)} rows read another head's sink")

# %% [markdown]
# The fix: the head is `(row // L) % H`. A check that prefilling a text gives the
# weights of decoding it one token at a time catches this one.
#
# ## Exercises
#
# **1. The sink, for real.** For the sink model of seed 0, compute layer 1's
# weights again as a plain softmax over one more column whose score is the sink,
# that column dropped, and compare with the layer's own weights.

# %% tags=["solution"]
model, tokens = models["sink logit", 0], batch(8, 7)
layer = model.layers[1]
with torch.no_grad():
    x = model.embed(tokens)
    x1 = x + model.layers[0](x)[0]  # what layer 1 reads
    _, w = layer(x1)
    q = layer.q_proj(x1).view(8, T, 2, 32).transpose(1, 2)  # (B, H, T, d_k)
    k = layer.k_proj(x1).view(8, T, 2, 32).transpose(1, 2)  # (B, H, T, d_k)
    s = q @ k.transpose(-1, -2) / math.sqrt(32)
    s = s.masked_fill(~causal_mask(T), -math.inf)
    column = layer.sink.view(1, 2, 1, 1).expand(8, 2, T, 1)
    extra = torch.cat([s, column], -1).softmax(-1)[..., :-1]
exercise_1 = (w - extra).abs().max().item()
print(f"largest difference: {exercise_1:.1e}")

# %% [markdown]
# **2. Where does the gate close?** For the gate model of seed 0, average layer
# 1's gates by how many earlier copies the query's token has: 0, 1, or 2 and more.

# %% tags=["solution"]
model, tokens = models["gate", 0], batch(256, 1000)
with torch.no_grad():
    x = model.embed(tokens)
    gates = torch.sigmoid(
        model.layers[1].gate_proj(x + model.layers[0](x)[0])
    )  # (B, T, H)
same = tokens[:, :, None] == tokens[:, None, :]  # (B, T, T)
copies = (same & causal_mask(T).tril(-1)).sum(-1)  # (B, T)
copies[:, :2] = -1  # the first two queries count in neither
exercise_2 = {}
for label, chosen in (
    ("0", copies == 0),
    ("1", copies == 1),
    ("2+", copies >= 2),
):
    exercise_2[label] = gates[chosen].mean(0)
    print(f"{label:>2} earlier copies: gates {exercise_2[label]}")

# %% [markdown]
# **3. The uniform share by hand.** The baseline above averages $1/(i+1)$ over the
# queries with nothing to match. Where do those queries sit? Compute their mean
# position, and the share a query at that position would give position 0.

# %% tags=["solution"]
mean_position = position[nothing].float().mean().item()
print(
    f"mean position {mean_position:.1f}: share "
    f"{1 / (mean_position + 1):.3f} (the mean share was {uniform:.3f})"
)

# %% [markdown]
# The two differ: the mean of $1/(i+1)$ is not $1/(\overline{i}+1)$, as $1/(i+1)$ is
# convex (Jensen's inequality), so the early queries weigh more.
#
# **4. Off by one.** Train the sink model of seed 0 again with every $\sigma_h$
# fixed at 0, softmax₁ (`layer.sink.requires_grad_(False)` before training), and
# measure it as the table does. How much weight still reaches the keys, and where?

# %% tags=["solution"]
torch.manual_seed(0)
softmax_one = ModernDecoder(V, T, embed_dim=64, num_heads=2, sink=True)
for layer in softmax_one.layers:
    layer.sink.requires_grad_(False)  # sigma_h stays 0
train_repeats(softmax_one, seed=0, probe=batch(128, 2000), **RECIPE)
exercise_4 = measure(softmax_one, 0)
learned = figures["sink logit", 0]
for name, f in (("sigma learned", learned), ("sigma = 0", exercise_4)):
    print(
        f"{name:>13}: weight on position 0 {f['first']:.2f}, "
        f"on any key {f['keys']:.2f}, loss {f['loss']:.3f}"
    )
# In this small model softmax_1 does nearly what a learned sigma_h does: less
# than a third of the weight reaches any key, and the loss is within a few
# hundredths. StreamingLLM's larger models still leaned on their first tokens.
#
# ## Summary
#
# The CPU time each model took to train, in this build:

# %% tags=["measured"]
for (variant, seed), sec in seconds.items():
    print(f"{variant}, seed {seed}: {sec:.1f} s")
print(f"all twelve: {sum(seconds.values()):.1f} s of CPU time")

# %% [markdown]
# ## References
#
# - Guangxuan Xiao, Yuandong Tian, Beidi Chen, Song Han, Mike Lewis.
#   [Efficient Streaming Language Models with Attention
#   Sinks](https://arxiv.org/abs/2309.17453). ICLR 2024. Section 3.3 pre-trains with
#   softmax₁ and with a sink token.
# - Evan Miller. [Attention Is Off By
#   One](https://www.evanmiller.org/attention-is-off-by-one.html). 2023. softmax₁.
# - Zihan Qiu et al. [Gated Attention for Large Language Models: Non-linearity,
#   Sparsity, and Attention-Sink-Free](https://arxiv.org/abs/2505.06708). NeurIPS
#   2025.
# - OpenAI. [gpt-oss-120b & gpt-oss-20b Model
#   Card](https://arxiv.org/abs/2508.10925). 2025. The sinks in the reference
#   implementation:
#   [gpt_oss/torch/model.py](https://github.com/openai/gpt-oss/blob/7b583341fe16729127f6d5b94a7b09ccae97e1a1/gpt_oss/torch/model.py).
# - Qwen3-Next's gate in Hugging Face Transformers:
#   [modular_qwen3_next.py](https://github.com/huggingface/transformers/blob/043bb8dde14aae1a56b84cd230737cf5d0877912/src/transformers/models/qwen3_next/modular_qwen3_next.py).
# - The dropped sink: [modular #6198](https://github.com/modular/modular/issues/6198)
#   and the fix proposed in [#6591](https://github.com/modular/modular/pull/6591).
#
# **Next:** [Attention without the T×T matrix](efficient_attention.md).

# %% [markdown]
# # Longer than trained: stretching RoPE
#
# A model with rotary position embeddings (RoPE) is trained on sequences of some
# length $L$. Run it on longer ones and it usually breaks. Models that serve long
# inputs change how RoPE turns the positions, and their configurations say how, in a
# `rope_scaling` block. Meta's report on its Llama 3 models, released as Llama 3.1,
# pretrains the largest on 8,192 positions, then trains it further in six stages of ever
# longer sequences, up to 128K; the block gives the frequencies the model runs with at
# every length. Qwen3 is trained on 32,768 positions, and its documentation stretches it
# to 131,072 with such a block alone, added when the inputs are long, without more
# training. This page shows why RoPE fails past its training length, derives four of
# the ways in use to stretch it
# (position interpolation, "NTK-aware" scaling, YaRN and Llama 3.1's bands), and
# measures them on a small model trained while the site is built, as they are and
# after a short fine-tune.
#
# It assumes RoPE as [Positions in attention](../concepts/positions.md) derives it:
# pair $i$ of a query or key at position $p$ is turned by the angle $p\,\theta_i$,
# with $\theta_i = b^{-2i/d_k}$. It reuses the task of
# [induction heads](induction_heads.md). Symbols follow the
# [notation table](../notation.md).
#
# The picture is the whole story. Each circle shows the angles one pair of features
# takes between a query and the keys before it, at every distance a sequence holds.
# Blue: angles the model met in training. Orange: angles it never met. The red dots
# are distances 0, 1, 2 and 3.

# %% tags=["plot"]
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from attn_ref.plotting import figure_to_svg
from attn_ref.positional import rope_frequencies
from attn_ref.rope_scaling import interpolated_frequencies, yarn_frequencies

torch.set_num_threads(1)  # results that do not depend on the core count
PAGE_START = time.process_time()
D_K, BASE, T = 32, 100.0, 32  # head size, RoPE's base, training length
theta = rope_frequencies(D_K, BASE)
COLUMNS = {  # title: (frequencies, tokens in the sequence)
    "trained,\n0 to L": (theta, T),
    "8 L,\nas it is": (theta, 8 * T),
    "8 L,\nPI": (interpolated_frequencies(theta, 8), 8 * T),
    "8 L,\nYaRN": (yarn_frequencies(theta, 8, T), 8 * T),
}
ROWS = {"pair 0\n(fast)": 0, "pair 15\n(slow)": 15}


def arc(ax, start, stop, **style):
    angles = np.linspace(start, stop, 400)
    ax.plot(np.cos(angles), np.sin(angles), solid_capstyle="butt", **style)


fig, axes = plt.subplots(2, 4, figsize=(5.6, 3.6), layout="constrained")
for col, (title, (th, length)) in enumerate(COLUMNS.items()):
    for row, (label, i) in enumerate(ROWS.items()):
        ax = axes[row, col]
        met = (T - 1) * theta[i].item()  # widest angle met in training
        reach = (length - 1) * th[i].item()  # widest angle of this sequence
        arc(ax, 0, 2 * np.pi, color="0.8", linewidth=1)
        arc(ax, 0, min(reach, met, 2 * np.pi), color="C0", linewidth=4)
        if met < 2 * np.pi and reach > met:
            arc(ax, met, min(reach, 2 * np.pi), color="C1", linewidth=4)
        if i == 0:
            dots = np.arange(4) * th[i].item()
            ax.plot(np.cos(dots), np.sin(dots), "o", color="C3", ms=3)
        ax.set(
            aspect="equal",
            xticks=[],
            yticks=[],
            xlim=(-1.3, 1.3),
            ylim=(-1.3, 1.3),
        )
        ax.spines[:].set_visible(False)
        if row == 0:
            ax.set_title(title, fontsize="medium")
        if col == 0:
            ax.set_ylabel(label)
axes[0, 0].plot([], [], color="C0", lw=4, label="met in training")
axes[0, 0].plot([], [], color="C1", lw=4, label="never met")
fig.legend(loc="outside lower center", ncols=2, fontsize="small")
figure_to_svg(
    fig,
    alt="Eight unit circles: two pairs of features (rows) in four settings "
    "(columns). Pair 0, the fastest, goes round the whole circle in "
    "training, at 8 L as it is and with YaRN, all blue; with PI too, but its "
    "red dots for distances 0 to 3 crowd together. Pair 15, the slowest, "
    "meets a short blue arc in training; at 8 L as it is a long orange arc "
    "of new angles follows; PI and YaRN bring it back to the blue arc, all "
    "but a sliver.",
)

# %% [markdown]
# Read it column by column.
#
# - **In training**, the fast pair goes round many times: it meets every angle. The
#   slow pair turns by a sliver only.
# - **At eight times the length**, as it is, the fast pair meets nothing new. The slow
#   pair sweeps a long arc of angles the model never met (orange): the scores of any
#   head that relied on it are anybody's guess.
# - **Position interpolation (PI)** turns every pair 8 times more slowly. The slow pair
#   is back on the angles it met, all but a sliver narrower than one position's turn.
#   But the fast pair's neighbours crowd together: the red dots, one position apart,
#   are now an eighth of a step apart.
# - **YaRN** (like Llama 3.1's bands) keeps the fast pair as it was and slows the slow
#   one: it gets both right.
#
# The rest of the page builds each of these, and measures them on a trained model.
#
# ## Why RoPE fails past its training length
#
# With RoPE, the score of a query at position $m$ and a key at position $n$ depends
# on the positions only through the angles $(m - n)\,\theta_i$. A causal model
# trained on $L$ positions has met the distances $0$ to $L - 1$, so pair $i$ has met
# the angles from $0$ to $(L - 1)\,\theta_i$. YaRN's paper (Peng et al., 2023) counts
# this in turns, $r_i = L / \lambda_i$, with the *wavelength*
# $\lambda_i = 2\pi / \theta_i$ the positions a pair takes to turn once. A pair with
# $r_i \ge 1$ has been all the way round. A pair with $r_i < 1$ meets new angles on a
# longer sequence.
#
# `attn_ref.rope_scaling.wavelengths` and `rotations` compute them for this page's
# model: $d_k = 32$ (16 pairs), base $b = 100$, $L = 32$.

# %%
from attn_ref.rope_scaling import rotations, wavelengths

turns = rotations(theta, T)
print("pair  theta_i  wavelength  turns in L  turns in 8 L")
for i in (0, 1, 2, 5, 6, 10, 15):
    print(
        f"{i:>4} {theta[i]:>8.4f} {wavelengths(theta)[i]:>11.1f} "
        f"{turns[i]:>11.2f} {8 * turns[i]:>13.2f}"
    )

# %% [markdown]
# Why base 100, and not RoPE's usual 10,000? So that the model's slowest pair sits
# where a real model's slowest pair sits. Over its training length, the last pair of
# Llama 2 (head size 128, base 10,000, 4,096 positions) turns by the angle below.
# This page's model turns its last pair by about as much over 32 positions. With base
# 10,000 and $d_k = 32$, the slow pairs of so short a model would barely move.

# %%
for name, (d_k, b, L) in {
    "Llama 2": (128, 10000.0, 4096),
    "this page": (D_K, BASE, T),
}.items():
    slowest = rope_frequencies(d_k, b)[-1].item()
    print(f"{name}: slowest pair turns {L * slowest:.2f} rad over L = {L}")

# %% [markdown]
# Real models are split the same way. Below, each dot is a pair: its wavelength
# against its index, with the training length dashed and eight times it dotted.
# Blue pairs turn at least once within $L$; orange ones meet only part of a turn.

# %% tags=["plot"]
SHOWN = {  # name: (d_k, base, training length)
    "this page's model": (D_K, BASE, T),
    "Llama 3.1 8B": (128, 500000.0, 8192),
}
fig, axes = plt.subplots(1, 2, figsize=(5.6, 3.0), layout="constrained")
for ax, (name, (d_k, b, L)) in zip(axes, SHOWN.items(), strict=True):
    lam = wavelengths(rope_frequencies(d_k, b)).numpy()
    full, pairs = lam <= L, np.arange(len(lam))
    ax.scatter(pairs[full], lam[full], s=9, color="C0", label="turns in L")
    ax.scatter(
        pairs[~full], lam[~full], s=9, color="C1", label="part of a turn"
    )
    ax.axhline(L, color="gray", linestyle="--", linewidth=1)
    ax.axhline(8 * L, color="gray", linestyle=":", linewidth=1)
    ax.set(yscale="log", xlabel="pair i", title=f"{name}\nL = {L:,}")
axes[0].set_ylabel("wavelength (positions)")
axes[0].legend(loc="upper left", fontsize="small")
counts = [
    int((wavelengths(rope_frequencies(d, b)) <= L).sum())
    for d, b, L in SHOWN.values()
]
figure_to_svg(
    fig,
    alt="Wavelength of each pair against its index, log scale, with the "
    "training length L dashed and 8 L dotted. This page's model: "
    f"{counts[0]} of 16 pairs turn within L. Llama 3.1 8B: {counts[1]} of "
    "64.",
)

# %% [markdown]
# ## A model to stretch
#
# The model is the attention-only decoder of [induction heads](induction_heads.md),
# with one change: no learned position table. Queries and keys are turned by RoPE in
# both layers, and that is the only place where position enters.
# `attn_ref.training.RotaryDecoder` builds it. Its frequencies are an attribute,
# `model.frequencies`, and `attn_ref.training.with_frequencies` copies a model with
# other ones: every method on this page is a new set of frequencies for the same
# weights.
#
# The task is the induction page's: random tokens that repeat with a period between
# 8 and 16, in sequences of $L = 32$. The model learns to find the earlier copy of the
# current token and predict what followed it. At $k$ times the length the periods
# are stretched too, to between $8k$ and $16k$, so the earlier copy lies at distances
# the model never met. (With the short periods kept, RoPE's relative positions would
# make a longer sequence no harder.)
#
# The cell trains four models, seeds 0 to 3, for 250 steps each, with
# `attn_ref.training.train_induction`, and times them.

# %% tags=["measured"]
from attn_ref.training import RotaryDecoder, train_induction

VOCAB, WIDTH, PERIODS = 64, 64, (8, 16)
SEEDS, STEPS = (0, 1, 2, 3), 250
models, train_seconds = {}, {}
for seed in SEEDS:
    torch.manual_seed(seed)
    models[seed] = RotaryDecoder(
        VOCAB, T, WIDTH, num_layers=2, num_heads=2, base=BASE
    )
    start = time.process_time()
    train_induction(
        models[seed],
        steps=STEPS,
        batch_size=32,
        lr=1e-2,
        periods=PERIODS,
        seed=seed,
    )
    train_seconds[seed] = time.process_time() - start
print(
    "CPU seconds per model:",
    ", ".join(f"{s:.1f}" for s in train_seconds.values()),
)

# %% [markdown]
# Each model is measured on fixed test batches: 32 sequences $k$ times longer than in
# training, for $k$ = 1, 2, 4 and 8. `evaluate` returns the mean loss on the repeated
# part (in nats, as on the induction page), and two scores of the induction page: the
# best previous-token score of layer 0, and the best prefix-matching score of layer
# 1, the share of attention an induction head gives the token after the earlier copy.

# %%
from attn_ref.training import (
    next_token_losses,
    part_masks,
    prefix_matching_scores,
    previous_token_scores,
    repeated_tokens,
)

LENGTHS = (1, 2, 4, 8)  # multiples of the training length
batches = {}  # (seed, k): tokens and periods, k times longer than in training
for s in SEEDS:
    for k in LENGTHS:
        g = torch.Generator().manual_seed(1000 + 10 * s + k)
        batches[s, k] = repeated_tokens(32, k * T, VOCAB, (8 * k, 16 * k), g)


# %%
def evaluate(model, seed, k):
    """Loss on the repeated part; best previous-token and prefix-matching
    scores."""
    tokens, period = batches[seed, k]
    _, repeated = part_masks(period, k * T)
    in_repeat = torch.arange(k * T)[None, :] >= period[:, None]
    with torch.no_grad():
        logits, (w0, w1) = model(tokens)
    loss = next_token_losses(logits, tokens)[repeated].mean().item()
    previous = previous_token_scores(w0).max().item()
    prefix = prefix_matching_scores(w1, tokens, in_repeat).max().item()
    return loss, previous, prefix


# %% [markdown]
# Without any change, here is each model from its training length to eight times it.

# %%
plain = {(s, k): evaluate(models[s], s, k) for s in SEEDS for k in LENGTHS}
print(f"ln {VOCAB} = {math.log(VOCAB):.2f}")
print("seed   loss on the repeated part      prefix-matching score")
print("       1x    2x    4x    8x          1x    2x    4x    8x")
for s in SEEDS:
    losses = " ".join(f"{plain[s, k][0]:5.2f}" for k in LENGTHS)
    scores = " ".join(f"{plain[s, k][2]:5.2f}" for k in LENGTHS)
    print(f"{s:>4}  {losses}      {scores}")

# %% [markdown]
# At its training length every model predicts the repeat well, and its induction head
# puts most of its weight on the right token. At twice the length the loss has jumped
# by more than two nats. At four and eight times it is above $\ln 64$, worse than a
# uniform guess, and the induction head has lost the copy. Nothing about the task got
# harder, except the distances.
#
# ## Four ways to stretch it
#
# All four methods change the frequencies $\theta_i$ only (YaRN also the softmax), by
# a *factor* $s = L'/L$ for a target length $L'$. None touches a weight.
#
# <details class="note">
# <summary>Going deeper: other ways in use</summary>
#
# - **Raising the base, then training.** Llama 3 "increase[s] the RoPE base frequency
#   hyperparameter to 500,000" from Llama 2's 10,000, after Xiong et al. (2023), and
#   Code Llama raised its base to $10^6$. A larger base slows every pair but the first,
#   as NTK-aware scaling below does, and the model then trains with it. The methods on
#   this page start instead from a model already trained, and change nothing but the
#   frequencies (YaRN also the softmax).
# - **LongRoPE** (Ding et al., 2024) searches a separate factor for every pair, one
#   list for short inputs and one for long (`short_factor`, `long_factor`: Transformers'
#   `longrope` type, which Phi-3's long-context models use).
# - **Dynamic NTK** takes NTK-aware scaling's factor from each input's length $l$,
#   $s = \max(1, l / L)$ (YaRN's section 3.3), so that short inputs run unscaled; the
#   first common pitfall below comes back to it.
#
# </details>
#
# ### Position interpolation
#
# Chen et al. (2023) "linearly down-scale the input position indices to match the
# original context window size": position $m$ is turned as if it were $m / s$. The
# angle is $m\,\theta_i$, so this is the same as $\theta_i' = \theta_i / s$ for every
# pair. Positions $0$ to $sL$ then take exactly the angles that $0$ to $L$ took. The
# price: two neighbours now differ by $1/s$ of a step. The cell turns a vector at
# position 37 with the interpolated frequencies, and at $37/8$ with the old ones.

# %%
from attn_ref.positional import apply_rotary

x = torch.randn(
    1, D_K, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
)
pi = interpolated_frequencies(theta, 8)
at_37 = apply_rotary(x, torch.tensor([37]), frequencies=pi)
at_37_over_8 = apply_rotary(x, torch.tensor([37 / 8]), frequencies=theta)
print(f"largest difference: {(at_37 - at_37_over_8).abs().max():.1e}")

# %% [markdown]
# ### NTK-aware scaling
#
# bloc97 (2023) raised the base instead; the code of that post changes one line,
# `base = base * a ** (dim / (dim-2))`. YaRN's paper derives it (its appendix A.1):
# "The lowest frequency needs to be scaled as much as linear positional scaling and
# the highest frequency to stay constant." The highest frequency is $b^0 = 1$,
# whatever the base. For the lowest, $i = d/2 - 1$:
#
# $$
# \begin{aligned}
# b'^{-(d-2)/d} &= b^{-(d-2)/d} / s \\
# \iff b' &= b \, s^{d/(d-2)} .
# \end{aligned}
# $$
#
# Pair $i$ is then slowed down by $s^{2i/(d-2)}$: the fast pairs keep their
# resolution, and only the slowest is interpolated as much as in PI. The name comes
# from the *neural tangent kernel*: YaRN's section 3.1 recalls the result, obtained
# with that theory, that networks "have trouble learning high frequency information if
# the input dimension is low and the corresponding embeddings lack high frequency
# components", and PI slows the fast pairs too.

# %%
from attn_ref.rope_scaling import ntk_aware_base, ntk_aware_frequencies

ntk = ntk_aware_frequencies(D_K, 8, BASE)
print(f"b' = {ntk_aware_base(D_K, 8, BASE):.1f}")
print("pairs 0, 5, 10, 15 slowed down by:")
print((theta / ntk)[[0, 5, 10, 15]])

# %% [markdown]
# ### YaRN
#
# YaRN (Peng et al., 2023) sorts the pairs by their turns $r_i$ within the training
# length. A pair that turns many times has met every angle: leave it. A pair that
# turns less than once must be interpolated, as in PI. In between, mix the two, with
# a weight $\gamma$ that ramps from 0 at $\alpha$ turns to 1 at $\beta$ turns:
#
# $$
# \theta_i' = (1 - \gamma_i)\,\frac{\theta_i}{s} + \gamma_i\,\theta_i .
# $$
#
# The paper found "for the Llama family of models, good values for α and β are
# α = 1 and β = 32". It calls this rule for the frequencies "NTK-by-parts"
# interpolation (its definition 2). YaRN itself is NTK-by-parts plus a sharper softmax
# (its definition 3): it divides the logits by a temperature $t$ with
# $\sqrt{1/t} = 0.1 \ln s + 1$ (its equation 22), by multiplying both the query and
# the key by $\sqrt{1/t}$. That law is a fit: the paper found it "by fitting
# $\sqrt{1/t}$ at the lowest perplexity" of LLaMA 7B to 65B, and recommends it "for
# LLaMA and Llama 2 models". Libraries call the whole `yarn`.
#
# How $\gamma$ ramps matters. The paper's ramp is linear in $r$. The code that ships
# YaRN (the authors' own, Hugging Face Transformers, gpt-oss) ramps linearly in the
# *pair index* instead, between the pairs where $r = \beta$ and where $r = \alpha$.
# `attn_ref.rope_scaling.yarn_frequencies` does what ships, and the paper's ramp with
# `by="rotations"`; a [Going deeper](#measured-after-a-short-fine-tune) note measures
# the difference. `yarn_attention_scale` gives $\sqrt{1/t}$.

# %%
from attn_ref.rope_scaling import yarn_attention_scale


def pair_bands(new, th, s):
    """The pairs kept whole, mixed, and divided by the full factor s."""
    kept = torch.isclose(new, th, rtol=1e-12, atol=0)
    divided = torch.isclose(new * s, th, rtol=1e-12, atol=0)
    mixed = ~kept & ~divided
    return [
        torch.nonzero(x).flatten().tolist() for x in (kept, mixed, divided)
    ]


yarn = yarn_frequencies(theta, 8, T)
print("kept (1 = unchanged), pairs 0, 2, 4, 6, 15:")
print((yarn / theta)[[0, 2, 4, 6, 15]])
whole, mixed, divided = pair_bands(yarn, theta, 8)
print(f"kept whole: pairs {whole}; mixed: {mixed}; divided by 8: the rest")
print(f"sqrt(1/t) = {yarn_attention_scale(8):.4f}")

# %% [markdown]
# ### Llama 3.1's bands
#
# Meta's reference code (`apply_scaling`) sorts the pairs by wavelength against the
# original context $L$ (8,192 for Llama 3.1): a pair with $\lambda_i < L/4$ is kept,
# one with $\lambda_i > L$ is divided by the factor, and in between it mixes the two
# with the weight `smooth` $= (L/\lambda_i - 1)/(4 - 1)$. The 1 and the 4 are the
# configuration's `low_freq_factor` and `high_freq_factor`. Since $L/\lambda_i = r_i$,
# this is YaRN's rule with $\alpha = 1$ and $\beta = 4$, ramped in $r$ as in YaRN's
# paper, and no temperature. `attn_ref.rope_scaling.llama3_frequencies` computes it
# that way.

# %%
from attn_ref.rope_scaling import llama3_frequencies

llama = llama3_frequencies(theta, 8, T)
print("kept (1 = unchanged), pairs 0, 2, 4, 6, 15:")
print((llama / theta)[[0, 2, 4, 6, 15]])
whole, mixed, divided = pair_bands(llama, theta, 8)
print(f"kept whole: pairs {whole}; mixed: {mixed}; divided by 8: the rest")

# %% [markdown]
# The four maps side by side: how much each method slows each pair down, at factor
# 8. Left, on this page's model; right, on Llama 3.1's frequencies and context. The
# dashed line marks where a pair turns exactly once within $L$.


# %% tags=["plot"]
def maps(th, L, d_k, b):
    return {
        "PI": interpolated_frequencies(th, 8),
        "NTK-aware": ntk_aware_frequencies(d_k, 8, b),
        "YaRN": yarn_frequencies(th, 8, L),
        "Llama 3.1": llama3_frequencies(th, 8, L),
    }


fig, axes = plt.subplots(
    1, 2, figsize=(5.6, 3.2), layout="constrained", sharey=True
)
for ax, (name, (d_k, b, L)) in zip(axes, SHOWN.items(), strict=True):
    th = rope_frequencies(d_k, b)
    for (label, new), style in zip(
        maps(th, L, d_k, b).items(), ("-", "--", "-", ":"), strict=True
    ):
        ax.plot((new / th).numpy(), style, label=label)
    once = float(
        np.interp(0.0, -np.log(rotations(th, L).numpy()), np.arange(d_k // 2))
    )
    ax.axvline(once, color="gray", linestyle="--", linewidth=0.8)
    ax.set(yscale="log", xlabel="pair i", title=name)
    ax.set_yticks([1 / 8, 1 / 4, 1 / 2, 1], ["1/8", "1/4", "1/2", "1"])
    ax.minorticks_off()
axes[0].set_ylabel("new / old frequency")
fig.legend(
    *axes[0].get_legend_handles_labels(),
    loc="outside lower center",
    ncols=4,
    fontsize="small",
)
figure_to_svg(
    fig,
    alt="New over old frequency of each pair, log scale, factor 8. PI: 1/8 "
    "for every pair. NTK-aware: 1 for pair 0, falling steadily to 1/8 for "
    "the last pair. YaRN and Llama 3.1: 1 for the fast pairs, 1/8 for the "
    "slow ones, a ramp between; on Llama 3.1's scale many more pairs are "
    "kept whole.",
)

# %% [markdown]
# ## Measured without training
#
# `stretched` gives a model the frequencies of a method at a factor $s$. Each model is
# run at 2, 4 and 8 times its length, with each method at the factor that fits the
# length, $s = k$.

# %%
from attn_ref.training import with_frequencies

METHODS = ("none", "PI", "NTK-aware", "YaRN", "Llama 3.1")


def stretched(model, method, s):
    """A copy of the model with a method's frequencies for factor s."""
    th = model.frequencies
    if method == "PI":
        return with_frequencies(model, interpolated_frequencies(th, s))
    if method == "NTK-aware":
        return with_frequencies(model, ntk_aware_frequencies(D_K, s, BASE))
    if method == "YaRN":
        return with_frequencies(
            model, yarn_frequencies(th, s, T), yarn_attention_scale(s)
        )
    if method == "Llama 3.1":
        return with_frequencies(model, llama3_frequencies(th, s, T))
    return with_frequencies(model, th)


# %%
FACTORS = (2, 4, 8)
measured = {
    (s, m, k): evaluate(stretched(models[s], m, k), s, k)
    for s in SEEDS
    for m in METHODS
    for k in FACTORS
}


# %% tags=["plot"]
def spread(values):
    return f"{np.mean(values):.2f} [{min(values):.2f}, {max(values):.2f}]"


print("loss on the repeated part: mean [min, max] over the seeds")
print(f"{'method':<10}" + "".join(f"{k}x".ljust(19) for k in FACTORS))
for m in METHODS:
    print(
        f"{m:<10}"
        + "".join(
            spread([measured[s, m, k][0] for s in SEEDS]).ljust(19)
            for k in FACTORS
        )
    )

# %% [markdown]
# The picture shows the same losses against the length: the mean over the seeds, with
# their range as a band. Every seed's number is in [the closing
# table](#the-numbers-of-this-build).


# %% tags=["plot"]
def band(ax, table, lengths, label, style):
    values = np.array([[table[s, k] for k in lengths] for s in SEEDS])
    (line,) = ax.plot(
        lengths, values.mean(0), style, marker="o", ms=3, label=label
    )
    ax.fill_between(
        lengths,
        values.min(0),
        values.max(0),
        alpha=0.2,
        color=line.get_color(),
    )


STYLES = dict(zip(METHODS, ("-", "-", "--", "-", ":"), strict=True))
fig, ax = plt.subplots(figsize=(5.6, 3.2), layout="constrained")
for m in METHODS:
    table = {
        (s, k): (plain[s, k] if k == 1 else measured[s, m, k])[0]
        for s in SEEDS
        for k in LENGTHS
    }
    band(ax, table, LENGTHS, m, STYLES[m])
ax.axhline(math.log(VOCAB), color="gray", linestyle="--", linewidth=1)
ax.set(
    xscale="log",
    xticks=LENGTHS,
    xticklabels=[f"{k}x" for k in LENGTHS],
    xlabel="length / training length",
    ylabel="loss (nats)",
)
ax.minorticks_off()
ax.legend(fontsize="small", ncols=2)
figure_to_svg(
    fig,
    alt="Loss on the repeated part against length, 1 to 8 times the "
    "training length, mean of four seeds with their range. No scaling and "
    "PI rise to about ln 64 (dashed) by 4x. NTK-aware stays lower; YaRN and "
    "Llama 3.1's bands stay lowest at every length.",
)

# %% [markdown]
# Read it method by method.
#
# - **No scaling** fails, as above.
# - **Position interpolation** keeps the loss above $\ln 64$ at four and eight times
#   the length, and at twice the length it does worse than nothing. It slows the
#   fastest pairs too, and the previous-token head of layer 0 relied on them to tell a
#   token from its neighbour: its score collapses (printed below). The induction head
#   downstream has nothing to match.
# - **NTK-aware** scaling keeps the fast pairs, and with them the previous-token head.
#   It is better than nothing at every length, and still far above the loss at the
#   training length.
# - **YaRN and Llama 3.1's bands** keep the fastest pair whole (on this small model
#   only pair 0, as printed above), mix the next few, and interpolate the slow ones
#   fully. They are the lowest at every length, on every seed.

# %%
print("best previous-token score of layer 0, at 2x")
for s in SEEDS:
    row = "  ".join(f"{m} {measured[s, m, 2][1]:.2f}" for m in METHODS)
    print(f"seed {s}: {row}")

# %% [markdown]
# YaRN's temperature does not help this model. It does sharpen the attention, as
# exercise 2 measures, but the loss at 8x moves by less than two tenths of a nat, far
# less than the gaps between methods, and up rather than down on most seeds. Nothing
# promised otherwise: the law was fitted to LLaMA's perplexity, not to a two-layer model
# trained on 32 positions.
#
# ## Measured after a short fine-tune
#
# The papers fine-tune after stretching: Chen et al. for 1,000 steps, YaRN for 400.
# Here each model gets 20 steps of AdamW (learning rate 0.003) on sequences four
# times longer, 8 of them per step, with each method at factor 4. Then it is
# measured at every length up to 4x, with the same frequencies.

# %% tags=["measured"]
TUNED_AT = (1, 2, 4)
tuned, tune_seconds = {}, {}
for s in SEEDS:
    for m in METHODS:
        model = stretched(models[s], m, 4)
        model.context_length = 4 * T
        start = time.process_time()
        train_induction(
            model,
            steps=20,
            batch_size=8,
            lr=3e-3,
            periods=(32, 64),
            seed=100 + s,
        )
        tune_seconds[s, m] = time.process_time() - start
        tuned[s, m] = model

# %% tags=["measured"]
after = {
    (s, m, k): evaluate(tuned[s, m], s, k)[0]
    for s in SEEDS
    for m in METHODS
    for k in TUNED_AT
}
print(
    f"CPU seconds per fine-tune: {min(tune_seconds.values()):.1f} to "
    f"{max(tune_seconds.values()):.1f}"
)

# %% tags=["plot"]
print("after 20 steps at 4x: loss, mean [min, max] over the seeds")
print(f"{'method':<10}" + "".join(f"{k}x".ljust(19) for k in TUNED_AT))
for m in METHODS:
    print(
        f"{m:<10}"
        + "".join(
            spread([after[s, m, k] for s in SEEDS]).ljust(19) for k in TUNED_AT
        )
    )

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(5.6, 3.2), layout="constrained")
for m in METHODS:
    band(
        ax,
        {(s, k): after[s, m, k] for s in SEEDS for k in TUNED_AT},
        TUNED_AT,
        m,
        STYLES[m],
    )
ax.axhline(math.log(VOCAB), color="gray", linestyle="--", linewidth=1)
ax.axhline(
    np.mean([plain[s, 1][0] for s in SEEDS]),
    color="gray",
    linestyle=":",
    linewidth=1,
)
ax.set(
    xscale="log",
    xticks=TUNED_AT,
    xticklabels=[f"{k}x" for k in TUNED_AT],
    xlabel="length / training length",
    ylabel="loss (nats)",
    title="after 20 steps at 4x, factor 4",
)
ax.minorticks_off()
ax.legend(fontsize="small", ncols=2)
figure_to_svg(
    fig,
    alt="Loss on the repeated part of the fine-tuned models at 1, 2 and 4 "
    "times the training length, mean of four seeds with their range. At "
    "4x, YaRN and Llama 3.1's bands are lowest, NTK-aware close, no scaling "
    "and PI far above; at 1x and 2x NTK-aware is lowest. At 1x every tuned "
    "model is above the untuned model's loss (dotted).",
)

# %% [markdown]
# At the length it was tuned for, every method improves, but not equally. YaRN and
# Llama 3.1's bands end lowest, NTK-aware close behind. Without scaling, or with PI,
# twenty steps are far from enough: the model must relearn to find a copy at new
# distances, or (PI) to tell neighbours apart. Below the tuned length the order
# changes: at 1x and at 2x NTK-aware is the lowest, on every seed (the closing table
# prints each). And at the training length every tuned model is worse than the
# original: the subject of the first common pitfall.
#
# <details class="note">
# <summary>Going deeper: the YaRN that ships, and the YaRN of the paper</summary>
#
# YaRN's paper ramps $\gamma$ linearly in $r$ (its equation 18). The authors' code
# (`find_correction_range` in jquesnelle/yarn), and after it Hugging Face
# Transformers and gpt-oss, compute instead the fractional pair index where
# $r = \beta$ and the one where $r = \alpha$, and ramp linearly in the pair index
# between them. Since $r_i$ falls geometrically with $i$, that ramp is linear in
# $\ln r$. Transformers and the authors' code also round the two indices outwards;
# gpt-oss does not (`truncate=False`).
#
# On Llama 2, the paper's model, both rules keep the same fast pairs and interpolate
# the same slow ones; they differ inside the ramp. On a model trained on 32 positions
# they differ on every pair that turns at least once within $L$, pairs 0 to 5, and
# agree only on the slow pairs that both divide by $s$. Its fastest pair turns only
# $32/2\pi \approx 5$ times within $L$, below $\beta = 32$, so the paper's rule keeps
# no pair whole; the code clamps its ramp to start at pair 0 and keeps that one. The
# cell compares the two rules, then measures the paper's on the models at 2x.
#
# </details>

# %% tags=["deeper"]
for name, (d_k, b, L, s) in {
    "Llama 2": (128, 10000.0, 4096, 16),
    "this page": (D_K, BASE, T, 8),
}.items():
    th = rope_frequencies(d_k, b)
    code = yarn_frequencies(th, s, L)
    paper = yarn_frequencies(th, s, L, by="rotations")
    same = int(torch.isclose(code, paper, rtol=1e-12, atol=0).sum())
    print(
        f"{name}, factor {s}: {same} of {d_k // 2} pairs equal; largest "
        f"ratio code / paper {(code / paper).max():.2f}"
    )
paper_ramp = {}
for s in SEEDS:
    th = models[s].frequencies
    paper_model = with_frequencies(
        models[s],
        yarn_frequencies(th, 2, T, by="rotations"),
        yarn_attention_scale(2),
    )
    paper_ramp[s] = evaluate(paper_model, s, 2)[0]
    print(
        f"seed {s}, 2x: paper's ramp {paper_ramp[s]:.2f}, "
        f"code's ramp {measured[s, 'YaRN', 2][0]:.2f}"
    )

# %% [markdown]
# ## What the shipped configurations say
#
# - **Llama 3.1**, in the `config.json` of
#   [meta-llama/Llama-3.1-8B](https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json)
#   on the Hugging Face Hub: `"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
#   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
#   "rope_type": "llama3"}`, with `"rope_theta": 500000.0` and 131,072 positions; heads
#   of 128 (`hidden_size` 4096 over 32 `num_attention_heads`). Meta's `apply_scaling`
#   hard-codes the same numbers.
# - **gpt-oss**, in `ModelConfig` of OpenAI's reference code
#   ([`gpt_oss/torch/model.py`](https://github.com/openai/gpt-oss/blob/main/gpt_oss/torch/model.py)):
#   `head_dim = 64`, `initial_context_length = 4096`, `rope_theta = 150000.0`,
#   `rope_scaling_factor = 32.0`, `rope_ntk_alpha = 1.0`, `rope_ntk_beta = 32.0`. Its
#   `RotaryEmbedding` is YaRN, ramped by pair index without rounding, with the
#   temperature ("concentration") $0.1 \ln s + 1$.
# - **Qwen3**, in Qwen's documentation
#   ([`docs/source/inference/transformers.md`](https://github.com/QwenLM/Qwen3/blob/main/docs/source/inference/transformers.md)):
#   pretrained on 32,768 positions, which "can be extended to 131,072 tokens with RoPE
#   scaling techniques. We have validated the performance with YaRN", with
#   `"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768`.
#   Qwen3-8B's own `config.json` gives `"rope_theta": 1000000` and `"head_dim": 128`.
#
# The blocks come in two uses. Llama 3.1's comes with training at length: Meta's report
# (section 3.4.2) grows the largest model's context "in six stages, starting from the
# original 8K context window and ending in the final 128K context window", with
# "approximately 800B training tokens". Qwen3's is added at inference: its documentation
# has the reader write the block into `config.json`, and advises "adding the
# `rope_scaling` configuration only when processing long contexts is required". What
# this page measures without training is the second use; the short fine-tune above is
# a small taste of the first.
#
# The cell counts, for each, the pairs kept whole, the pairs divided by the full
# factor, and those in between, with the factor on queries and keys.

# %%
SHIPPED = {  # name: (d_k, base, L, factor, rule)
    "Llama 3.1": (128, 500000.0, 8192, 8.0, "llama3"),
    "gpt-oss": (64, 150000.0, 4096, 32.0, "yarn, not rounded"),
    "Qwen3": (128, 1000000.0, 32768, 4.0, "yarn"),
}
bands = {}
for name, (d_k, b, L, s, rule) in SHIPPED.items():
    th = rope_frequencies(d_k, b)
    if rule == "llama3":
        new, scale = llama3_frequencies(th, s, L), 1.0
    else:
        new = yarn_frequencies(th, s, L, truncate=rule == "yarn")
        scale = yarn_attention_scale(s)
    ratio = new / th
    kept = int((ratio == 1).sum())
    divided = int(((ratio * s - 1).abs() <= 1e-12).sum())  # ratio is 1/s
    bands[name] = (kept, d_k // 2 - kept - divided, divided, scale)
    print(
        f"{name}: {kept} kept, {d_k // 2 - kept - divided} mixed, "
        f"{divided} divided by {s:g}; q and k times {scale:.3f}"
    )

# %% [markdown]
# ## Checked against the formulas
#
# Each function is compared with its source, written out in NumPy in float64: PI's
# $\theta_i/s$; the NTK-aware base $b\,s^{d/(d-2)}$; YaRN as the authors' code
# computes it (`find_correction_dim`, rounded outwards, a ramp over the pairs);
# Llama 3.1's `apply_scaling`, as the loop over frequencies of Meta's release (its
# reference code now computes the same with `torch.where`). The cell prints the
# largest relative difference over this page's model and the three shipped
# configurations, at their factors.


# %% tags=["plot"]
def reference(kind, d, b, L, s):
    """The sources, written out in NumPy float64."""
    i = np.arange(d // 2)
    th = b ** (-2.0 * i / d)
    if kind == "PI":
        return th / s
    if kind == "NTK-aware":
        return (b * s ** (d / (d - 2))) ** (-2.0 * i / d)
    if kind == "YaRN":

        def dim(turns):
            return d * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(b))

        low = max(math.floor(dim(32)), 0)
        high = min(math.ceil(dim(1)), d - 1)
        keep = 1 - np.clip((i - low) / (high - low), 0, 1)
        return th / s * (1 - keep) + th * keep
    out = []
    for f in th:
        wl = 2 * math.pi / f
        smooth = (L / wl - 1) / (4 - 1)
        out.append(
            f
            if wl < L / 4
            else f / s
            if wl > L
            else (1 - smooth) * f / s + smooth * f
        )
    return np.array(out)


def ours(kind, d, b, L, s):
    th = rope_frequencies(d, b)
    if kind == "PI":
        return interpolated_frequencies(th, s)
    if kind == "NTK-aware":
        return ntk_aware_frequencies(d, s, b)
    if kind == "YaRN":
        return yarn_frequencies(th, s, L)
    return llama3_frequencies(th, s, L)


CONFIGS = [(D_K, BASE, T, 8.0)] + [v[:4] for v in SHIPPED.values()]
largest = {}
for kind in ("PI", "NTK-aware", "YaRN", "Llama 3.1"):
    largest[kind] = max(
        float(
            np.max(
                np.abs(ours(kind, *c).numpy() - reference(kind, *c))
                / reference(kind, *c)
            )
        )
        for c in CONFIGS
    )
    print(f"{kind}: largest relative difference {largest[kind]:.1e}")

# %% [markdown]
# All four agree with their sources to the last bits of float64.
#
# ## Summary
#
# - A RoPE model trained on $L$ positions has met every angle of a pair that turns at
#   least once within $L$, and only part of the circle of the others. Past $L$, the
#   slow pairs take new angles, and heads that match by content across long
#   distances lose their match: the loss jumps at twice the length.
# - Position interpolation divides every frequency by $s$. It keeps the angles in
#   range but crowds neighbours together; without training it does worse than
#   nothing at twice the length.
# - NTK-aware scaling raises the base so that the fastest pair is untouched and the
#   slowest interpolated. It helps without training.
# - YaRN and Llama 3.1's bands keep the pairs that turn often, interpolate those that
#   do not, and mix in between; YaRN also sharpens the softmax. Without training they
#   give the lowest loss at every length from 2x to 8x. After a short fine-tune at 4x
#   they are the lowest at 4x, and NTK-aware is lower at 1x and 2x.
# - Stretching costs something at the original length: scale only when needed.
#
# ## Common pitfalls
#
# **Scaling every input.** A common mistake is to put a `rope_scaling` block in the
# configuration once and run every input with it, long or short. The cell runs each
# method at factor 4 on sequences of the training length.

# %%
short = {
    (s, m): evaluate(stretched(models[s], m, 4), s, 1)[0]
    for s in SEEDS
    for m in METHODS[1:]
}
print("loss at the training length: unscaled, then each method at factor 4")
for s in SEEDS:
    row = "  ".join(f"{m} {short[s, m]:.2f}" for m in METHODS[1:])
    print(f"seed {s}: none {plain[s, 1][0]:.2f}  {row}")

# %% [markdown]
# Every method costs something at the training length, PI the most and NTK-aware the
# least. Qwen's
# documentation warns of exactly this: "Transformers implements static YaRN, which
# means the scaling factor remains constant regardless of input length, potentially
# impacting performance on shorter texts." The fix: add the scaling only for long
# inputs, as Qwen advises, or pick the factor from the input's length,
# $s = \max(1, l/L)$, which YaRN's section 3.3 calls dynamic scaling.
#
# **Copying $\alpha$ and $\beta$ from another model.** YaRN's bounds count turns
# within the training length, and the fastest pair makes $L/2\pi$ of them. On this
# page's model, $\alpha = 1, \beta = 32$ ramped in turns, as the paper writes it,
# keep no pair whole, and YaRN loses more than a nat at 2x: the Going deeper note of
# the fine-tune section printed the losses. The fix: compute `rotations(theta, L)` for
# the model first, and put the bounds where its pairs are.
#
# **Rotated keys in a cache, then a new factor.** With dynamic scaling the factor
# changes as the input grows. Keys cached *after* their rotation keep the old
# frequencies, and the score of a query and a key stops depending on their distance
# alone. YaRN's paper: "The correct implementation should cache the kv-embeddings
# before applying RoPE, as the RoPE embedding of every token changes when s changes."
# The cell scores the same query and key, four positions apart, at two places in the
# sequence.

# %%
g = torch.Generator().manual_seed(7)
query, key = torch.randn(2, 1, D_K, dtype=torch.float64, generator=g)
old, new = yarn_frequencies(theta, 2, T), yarn_frequencies(theta, 4, T)


def score(m, n, key_frequencies):
    qm = apply_rotary(query, torch.tensor([m]), frequencies=new)
    kn = apply_rotary(key, torch.tensor([n]), frequencies=key_frequencies)
    return (qm @ kn.T).item()


cached = {}
for label, f in (("keys rotated again", new), ("cached, old factor", old)):
    cached[label] = (score(40, 36, f), score(140, 136, f))
    print(
        f"{label}: score(40, 36) = {cached[label][0]:+.3f}, "
        f"score(140, 136) = {cached[label][1]:+.3f}"
    )

# %% [markdown]
# Rotated again with the new factor, the two scores are equal. Cached with the old
# one, they are not. The fix: cache the keys before RoPE, and rotate them when the
# factor changes.
#
# ## The numbers of this build
#
# What this build measured, every seed: CPU time, the loss on the repeated part per
# method and length (without training, factor $s = k$; and after the fine-tune at
# 4x), and the largest relative difference of each function from its source.

# %% tags=["measured"]
print(
    "CPU s: training",
    ", ".join(f"{v:.1f}" for v in train_seconds.values()),
    f"| fine-tunes {sum(tune_seconds.values()):.1f} in all"
    f" | page so far {time.process_time() - PAGE_START:.1f}",
)
print("\nloss, no fine-tune     1x    2x    4x    8x")
for s in SEEDS:
    for m in METHODS:
        row = " ".join(
            f"{(plain[s, k] if k == 1 else measured[s, m, k])[0]:5.2f}"
            for k in LENGTHS
        )
        print(f"seed {s}  {m:<10}  {row}")
print("\nloss, tuned at 4x      1x    2x    4x")
for s in SEEDS:
    for m in METHODS:
        row = " ".join(f"{after[s, m, k]:5.2f}" for k in TUNED_AT)
        print(f"seed {s}  {m:<10}  {row}")
print("\nlargest relative difference:")
print(", ".join(f"{k} {v:.1e}" for k, v in largest.items()))

# %% [markdown]
# ## Exercises
#
# **1. What NTK-aware scaling leaves alone.** Which pairs of this page's model does
# NTK-aware scaling at factor 8 slow down by less than 10%? And of Llama 2's 64?

# %% tags=["solution"]
alone = {}
for name, d_k, b in (("this page", D_K, BASE), ("Llama 2", 128, 10000.0)):
    slowed = rope_frequencies(d_k, b) / ntk_aware_frequencies(d_k, 8, b)
    alone[name] = torch.nonzero(slowed < 1.1).flatten().tolist()
    print(f"{name}: pairs {alone[name]} (pair 0 slowed by {slowed[0].item()})")
# Pair i is slowed by 8 ** (2i / (d - 2)); only pair 0 is left exactly as
# it was, and the more pairs a head has, the more fast ones stay almost whole.

# %% [markdown]
# **2. What YaRN's temperature does to a row.** At 8x, with YaRN's frequencies,
# compute the mean entropy $-\sum_j a_{ij} \ln a_{ij}$ of the rows of layer 1 on the
# repeated part, without and with the temperature. Compare with the loss.


# %% tags=["solution"]
def entropy_and_loss(model, s):
    tokens, period = batches[s, 8]
    in_repeat = torch.arange(8 * T)[None, :] >= period[:, None]
    with torch.no_grad():
        logits, (_, w1) = model(tokens)
    rows = -(w1 * w1.clamp_min(1e-30).log()).sum(-1)  # (B, H, T)
    losses = next_token_losses(logits, tokens)[part_masks(period, 8 * T)[1]]
    return rows.permute(0, 2, 1)[in_repeat].mean().item(), losses.mean().item()


temperature = {}
for s in SEEDS:
    yarn8 = yarn_frequencies(models[s].frequencies, 8, T)
    for c in (1.0, yarn_attention_scale(8)):
        temperature[s, c] = entropy_and_loss(
            with_frequencies(models[s], yarn8, c), s
        )
    (cold, hot) = (temperature[s, c] for c in (1.0, yarn_attention_scale(8)))
    print(
        f"seed {s}: entropy {cold[0]:.2f} -> {hot[0]:.2f} nats, "
        f"loss {cold[1]:.2f} -> {hot[1]:.2f}"
    )
# The logits grow by (0.1 ln 8 + 1) ** 2, about 1.46: every row gets sharper.
# The loss moves far less than the gaps between methods, and up rather than
# down on most seeds: a law fitted on LLaMA need not suit this model.

# %% [markdown]
# **3. Llama 3.1 is YaRN with other bounds.** Show that YaRN's rule ramped in turns
# with $\alpha = 1$ and $\beta = 4$ gives Llama 3.1's frequencies, and count its pairs
# in each band. Compare with Meta's `apply_scaling` as written out in NumPy above
# (`reference`), not with `llama3_frequencies`: this package computes that one with
# YaRN's rule, so the two would agree whatever the rule.

# %% tags=["solution"]
th31 = rope_frequencies(128, 500000.0)
as_yarn = yarn_frequencies(
    th31, 8.0, 8192, alpha=1.0, beta=4.0, by="rotations"
)
as_meta = reference("Llama 3.1", 128, 500000.0, 8192, 8.0)  # Meta's loop
yarn_gap = np.max(np.abs(as_yarn.numpy() - as_meta) / as_meta)
print(f"largest relative difference from Meta's loop: {yarn_gap:.1e}")
lam = wavelengths(th31)
llama_bands = [
    int((lam < 8192 / 4).sum()),
    int(((lam >= 2048) & (lam <= 8192)).sum()),
    int((lam > 8192).sum()),
]
print("kept, mixed, divided:", llama_bands)

# %% [markdown]
# **4. NTK-aware wants a larger factor.** YaRN's paper notes that with NTK-aware
# scaling "the scale value s has to be set higher than the expected scale for a given
# context length extension". At 2x and 4x, compare NTK-aware at the matching factor
# with NTK-aware at factor 8.

# %% tags=["solution"]
wide = {
    (s, k): evaluate(stretched(models[s], "NTK-aware", 8), s, k)[0]
    for s in SEEDS
    for k in (2, 4)
}
for s in SEEDS:
    print(
        f"seed {s}: "
        + "; ".join(
            f"{k}x: s={k} {measured[s, 'NTK-aware', k][0]:.2f}, "
            f"s=8 {wide[s, k]:.2f}"
            for k in (2, 4)
        )
    )
# Factor 8 does better at both lengths on every seed: at the matching factor,
# the middle pairs still reach angles they never met.

# %% [markdown]
# ## References
#
# - Shouyuan Chen, Sherman Wong, Liangjian Chen, Yuandong Tian. [Extending Context
#   Window of Large Language Models via Positional
#   Interpolation](https://arxiv.org/abs/2306.15595). arXiv:2306.15595, 2023.
# - bloc97. [NTK-Aware Scaled RoPE allows LLaMA models to have extended (8k+) context
#   size without any fine-tuning and minimal perplexity
#   degradation](https://www.reddit.com/r/LocalLLaMA/comments/14lz7j5/ntkaware_scaled_rope_allows_llama_models_to_have/).
#   Reddit r/LocalLLaMA, 2023; the same base change is in
#   [`LlamaNTKScaledRotaryEmbedding.py`](https://github.com/jquesnelle/yarn/blob/master/scaled_rope/LlamaNTKScaledRotaryEmbedding.py).
# - Bowen Peng, Jeffrey Quesnelle, Honglu Fan, Enrico Shippole. [YaRN: Efficient
#   Context Window Extension of Large Language Models](https://arxiv.org/abs/2309.00071).
#   ICLR 2024. The neural tangent kernel argument (section 3.1), wavelengths and turns
#   (equations 13, 17), the ramp (18), NTK-by-parts (definition 2, equation 20), YaRN as
#   NTK-by-parts with a temperature (definition 3, equations 21, 22), dynamic scaling
#   (section 3.3), the NTK-aware base (appendix A.1); the authors' code,
#   [`LlamaYaRNScaledRotaryEmbedding.py`](https://github.com/jquesnelle/yarn/blob/master/scaled_rope/LlamaYaRNScaledRotaryEmbedding.py).
# - Llama Team, AI @ Meta. [The Llama 3 Herd of Models](https://arxiv.org/abs/2407.21783).
#   2024. The base of 500,000 (section 3.2) and the long-context pre-training in six
#   stages (section 3.4.2). `apply_scaling` in llama-models:
#   [as released](https://github.com/meta-llama/llama-models/blob/1f0feb795a4130697ced243fb53051670d591653/models/llama3_1/api/model.py),
#   a loop, and
#   [today](https://github.com/meta-llama/llama-models/blob/main/models/llama3/model.py),
#   with `torch.where`; Llama 3.1's
#   [`config.json`](https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json).
# - Wenhan Xiong et al. [Effective Long-Context Scaling of Foundation
#   Models](https://arxiv.org/abs/2309.16039). 2023. Raising RoPE's base for
#   long-context training. Baptiste Rozière et al. [Code Llama: Open Foundation Models
#   for Code](https://arxiv.org/abs/2308.12950). 2023. A base of $10^6$.
# - Yiran Ding et al. [LongRoPE: Extending LLM Context Window Beyond 2 Million
#   Tokens](https://arxiv.org/abs/2402.13753). ICML 2024. A searched factor per pair.
# - OpenAI. [gpt-oss reference
#   implementation](https://github.com/openai/gpt-oss/blob/main/gpt_oss/torch/model.py)
#   (`ModelConfig`, `RotaryEmbedding`).
# - Qwen. [Qwen3 with Transformers: enabling long
#   context](https://github.com/QwenLM/Qwen3/blob/main/docs/source/inference/transformers.md).
# - Hugging Face.
#   [`modeling_rope_utils.py`](https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py)
#   in Transformers (`linear`, `dynamic`, `yarn`, `longrope`, `llama3`).
# - Jianlin Su et al. [RoFormer: Enhanced Transformer with Rotary Position
#   Embedding](https://arxiv.org/abs/2104.09864). arXiv:2104.09864, 2021.
#
# Next: [Layer schedules and capped logits](layer_schedules.md).

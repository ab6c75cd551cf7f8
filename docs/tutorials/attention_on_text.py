# %% [markdown]
# # Attention on real text: a character model and its heads
#
# Every model trained so far on this site learned a task built for it: tokens that
# repeat, numbers to sort. This page trains a small transformer on real text, Python's
# own documentation, one character at a time, on a CPU (the training cell prints how
# long it took). Then it asks what its heads learned to look at, and
# answers with measurements: a score for each thing a head could look for, computed
# on held-out text (checked for passages the model read in training), and the loss
# when the head is zeroed.
#
# It assumes [the transformer block](../concepts/transformer_block.md) (norm,
# attention, MLP, the residual stream), learned positions
# ([Where am I?](../concepts/positions.md)) and
# [Attention that learned: induction heads](induction_heads.md), whose scores and
# zeroed heads this page uses on text. Shapes follow the
# [notation table](../notation.md).
#
# Here is one line of the text, and four things a head at its last character could
# look back at: the character just before, the first letter of the current word, the
# bracket or quote that is still open, and the characters that followed an earlier
# copy of the last three. Which of these does a trained head do?

# %% tags=["plot"]
import gzip
import itertools
import math
import re
import textwrap
import time
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from attn_ref.plotting import figure_to_svg
from attn_ref.training import (
    ALPHABET,
    CharTransformer,
    ablated_losses,
    bigram_window_bits,
    char_model_from_playground_json,
    char_playground_json,
    closing_predictions,
    context_losses,
    copy_predictions,
    encode,
    induction_targets,
    load_corpus,
    ngram_bits,
    open_spans,
    opener_targets,
    previous_char_targets,
    sample,
    target_scores,
    to_alphabet,
    train_char_model,
    verbatim_windows,
    window_losses,
    windows,
    without_heads,
    word_start_targets,
)

torch.set_num_threads(1)  # results that do not depend on the core count
LN2 = math.log(2)
T = 32  # characters the model reads at once

corpus = load_corpus()
held_ids = encode(corpus.held_out)
held = windows(held_ids, T)  # (n, T): the held-out text in windows of 32
targets = {
    "previous character": previous_char_targets(held),
    "word start": word_start_targets(held),
    "open bracket or quote": opener_targets(held_ids, T, '([{"'),
    "earlier copy": induction_targets(held, k=3),
}
# The picture's window: the first one whose last character has the most kinds
# of target.
kinds = torch.stack([t[:, -1].any(-1) for t in targets.values()]).sum(0)
shown = int(kinds.argmax())
text = corpus.held_out[shown * T : (shown + 1) * T]
fig, axes = plt.subplots(4, 1, figsize=(4.6, 4.0), layout="constrained")
for ax, (name, t) in zip(axes, targets.items(), strict=True):
    keys = t[shown, -1].nonzero().flatten().tolist()
    for j, c in enumerate(text):
        colour = "C1" if j in keys else ("C0" if j == T - 1 else "none")
        ax.text(
            j,
            0,
            "\u21b5" if c == "\n" else c,
            ha="center",
            va="center",
            family="monospace",
            fontsize=9,
            bbox=dict(
                boxstyle="square,pad=0.2",
                facecolor=colour,
                alpha=0.35,
                edgecolor="none",
            ),
        )
    for j in keys:  # an arc from the last character back to each target
        x = np.linspace(j, T - 1, 50)
        height = 0.4 + 0.9 * (T - 1 - j) / T
        y = 0.45 + height * (1 - ((2 * x - j - T + 1) / (T - 1 - j)) ** 2)
        ax.plot(x, y, color="C1", linewidth=1.2)
        ax.plot([j], [0.45], marker="v", color="C1", markersize=5)
    ax.set_xlim(-0.7, T - 0.3)
    ax.set_ylim(-0.6, 1.9)
    ax.axis("off")
    ax.set_title(name, loc="left", fontsize=10)
figure_to_svg(
    fig,
    alt=f"The held-out line {text!r}, four times. Its last character is "
    "marked, and arrows go back to: the character before it; the first letter "
    "of its word; the bracket or quote still open; the characters that "
    "followed earlier copies of its last three characters.",
)

# %% [markdown]
# The page measures, for each of the eight heads of the model, how much of its weight
# goes to each kind of target, over all the held-out text. Two of the four turn out to
# be done by heads the model depends on; two are not, and the page shows why.
#
# ## The text: Python's reference documentation
#
# Python ships the text that `help("for")` prints in the module `pydoc_data.topics`:
# one document per topic of the language reference, generated from the documentation
# when Python is released, under the
# [PSF License Version 2](https://docs.python.org/3/license.html) (its code examples
# also under the Zero-Clause BSD licence). It changes a little with every release, so the
# page prints which Python it read. `attn_ref.training.load_corpus` maps curly quotes
# and dashes to ASCII and drops the few other characters outside the 96-character
# alphabet (the newline and printable ASCII).
#
# The topics repeat one another. `compound`, on compound statements, holds the
# `for`, `while` and `try` topics almost word for word; `specialnames` holds
# `customization`. Held-out text cut from `for` would then be text the model reads
# in `compound`. So `load_corpus` first drops every topic more than half of whose
# 32-character passages occur in a longer topic it keeps (`repeated_documents`), then
# holds out the last tenth of every topic left, cut at a line.

# %%
topics = len(corpus.documents) + len(corpus.repeats)
print(
    f"Python {corpus.python}: {corpus.raw_chars:,} characters in {topics} "
    f"topics, SHA-256 {corpus.sha256[:12]}..."
)
print(f"{corpus.dropped} characters outside the alphabet dropped")
print(f"{len(corpus.repeats)} topics dropped as repeats:")
print(textwrap.fill(", ".join(corpus.repeats), 64))
print(
    f"training text {len(corpus.train):,} characters, "
    f"held-out text {len(corpus.held_out):,}, "
    f"from {len(corpus.documents)} topics"
)
print(f"alphabet: {len(ALPHABET)} characters")
print(corpus.held_out[:240])

# %% [markdown]
# Is the held-out text new to the model? `verbatim_windows` cuts it into the windows
# of 32 characters the page measures on, and looks for each in the training text.

# %%
seen = verbatim_windows(corpus.held_out, corpus.train, T)
print(
    f"held-out windows found in the training text: {int(seen.sum())} of "
    f"{len(seen):,} ({seen.float().mean():.1%})"
)
for w in seen.nonzero().flatten()[:4].tolist():
    print(repr(corpus.held_out[w * T : (w + 1) * T]))

# %% [markdown]
# The few it finds are phrases that the documentation repeats from topic to topic
# (the first four are printed), such as the title of a PEP it cites in two places.
# Without the repeats dropped, the share is far higher (a pitfall below measures
# it).

# %% [markdown]
# ## Baselines a reader can count
#
# A model's loss is measured in **bits per character**: $-\log_2 p$ of the character
# that came next, averaged over the held-out text. Three models need no training, only
# counting, and give the numbers to beat:
#
# - *uniform*: every character equally likely, $\log_2 96$ bits;
# - *unigram*: $p(c) \propto n(c) + 1$, the count of $c$ in the training text (plus
#   one, so that no character has probability 0);
# - *bigram*: $p(c \mid b) \propto n(b\,c) + 1$, the count of the pair.

# %%
train_ids = encode(corpus.train)
baselines = {
    name: ngram_bits(train_ids, held_ids, order)
    for order, name in enumerate(("uniform", "unigram", "bigram"))
}
for name, bits in baselines.items():
    print(f"{name:>8}: {bits:.3f} bits per character")

# %% [markdown]
# ## The model: the site's blocks, over characters
#
# `attn_ref.training.CharTransformer` embeds each character and adds a learned
# position vector, then runs two `DecoderBlock`s of [the transformer
# block](../concepts/transformer_block.md) (layer norm, causal multi-head attention,
# layer norm, MLP, each added back to the stream), a final norm and an output head. It
# keeps each layer's attention weights. Width 32, four heads of $d_k = 8$ per layer,
# context 32 characters.

# %%
torch.manual_seed(0)
model = CharTransformer(
    context_length=T, embed_dim=32, num_layers=2, num_heads=4
)
print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
logits, weights = model(held[:2])
print("logits", tuple(logits.shape))  # (B, T, V)
print("weights", [tuple(w.shape) for w in weights])  # (B, H, T, T) per layer

# %% [markdown]
# Each block computes what PyTorch's `nn.TransformerEncoderLayer` computes with
# `norm_first=True`, a GELU and a causal mask. The folded cell copies the weights into
# PyTorch's layers and compares the logits.


# %% tags=["plot"]
def as_torch_layer(block):
    C, H = block.attn.embed_dim, block.attn.num_heads
    layer = nn.TransformerEncoderLayer(
        C,
        H,
        dim_feedforward=4 * C,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=True,
    )
    attn = block.attn
    with torch.no_grad():
        projections = (attn.q_proj, attn.k_proj, attn.v_proj)
        layer.self_attn.in_proj_weight.copy_(
            torch.cat([p.weight for p in projections])
        )
        layer.self_attn.in_proj_bias.copy_(
            torch.cat([p.bias for p in projections])
        )
        layer.self_attn.out_proj.load_state_dict(attn.out_proj.state_dict())
        layer.linear1.load_state_dict(block.mlp[0].state_dict())
        layer.linear2.load_state_dict(block.mlp[2].state_dict())
        layer.norm1.load_state_dict(block.norm1.state_dict())
        layer.norm2.load_state_dict(block.norm2.state_dict())
    return layer.eval()


with torch.no_grad():
    x = model.token_embedding(held[:8]) + model.position_embedding.weight
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    for block in model.blocks:
        x = as_torch_layer(block)(x, src_mask=future)  # True: may not attend
    theirs = model.head(model.norm(x))
    ours, _ = model(held[:8])
print(f"largest |ours - PyTorch's| logit: {(ours - theirs).abs().max():.1e}")

# %% [markdown]
# ## Training
#
# `train_char_model` draws 32 windows of 33 characters at random from the training
# text at every step, and takes one step of AdamW on the mean loss of predicting
# characters 1 to 32 of each from the ones before. The learning rate rises to 0.03
# over 30 steps and falls linearly to 0 at step 550. The cell prints how much text
# that reads.

# %% tags=["measured"]
RECIPE = dict(steps=550, batch_size=32, lr=3e-2, warmup=30)
start = time.process_time()
history = train_char_model(model, train_ids, seed=0, **RECIPE)
train_seconds = time.process_time() - start
read = RECIPE["steps"] * RECIPE["batch_size"] * (T + 1)
print(f"{RECIPE['steps']} steps in {train_seconds:.1f} s of CPU time")
print(f"{read:,} characters read: {read / len(train_ids):.2f} passes")

# %% tags=["plot"]
bits = np.array(history) / LN2
smooth = np.convolve(bits, np.ones(25) / 25, mode="valid")
fig, ax = plt.subplots(figsize=(4.6, 3.2), layout="constrained")
ax.plot(bits, color="C0", alpha=0.3, linewidth=1)
ax.plot(np.arange(24, len(bits)), smooth, color="C0", label="training batch")
for name, colour in (("unigram", "C2"), ("bigram", "C1")):
    ax.axhline(
        baselines[name],
        color=colour,
        linestyle="--",
        label=f"{name} (held out)",
    )
ax.set(xlabel="training step", ylabel="bits per character")
ax.legend()
crossed = int(np.argmax(smooth < baselines["bigram"])) + 24
figure_to_svg(
    fig,
    alt=f"Training loss in bits per character, from {bits[0]:.1f} at step 0 "
    f"to {smooth[-1]:.2f} (average of the last 25 steps), below the bigram's "
    f"{baselines['bigram']:.2f} from step {crossed}.",
)

# %% [markdown]
# ## What it learned, measured on held-out text
#
# `window_losses` predicts every character of each held-out window from the characters
# before it in the window.

# %%
losses = window_losses(model, held) / LN2  # (n, T - 1) bits
bpc = losses.mean().item()
print(f"held-out: {bpc:.3f} bits per character")
for name, base in baselines.items():
    print(f"  {name:>8} {base:.3f}: the model is {base - bpc:.2f} bits lower")

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(4.6, 2.8), layout="constrained")
by_position = losses.mean(0).numpy()
ax.plot(np.arange(1, T), by_position, marker=".", color="C0")
ax.axhline(baselines["bigram"], color="C1", linestyle="--", label="bigram")
ax.set(
    xlabel="characters of context (position in the window)",
    ylabel="bits per character",
)
ax.legend()
figure_to_svg(
    fig,
    alt=f"Held-out bits per character against the number of characters "
    f"before it in the window: {by_position[0]:.2f} with one, "
    f"{by_position[7]:.2f} with eight, {by_position[-1]:.2f} with 31.",
)

# %% [markdown]
# The first characters of a window are predicted from almost nothing, and cost the
# most; a few characters of context bring most of the gain. (Exercise 2 asks what
# the last 24 of the 31 add.) Samples show what the model knows of words: at a
# temperature of 0.5 (the likely characters made likelier), most of the words it
# writes occur in the training text; at 1.0, far fewer do (exercise 5 counts them).

# %%
for temperature in (0.5, 1.0):
    print(f"temperature {temperature}:")
    text = "The " + sample(model, "The ", 160, temperature, seed=0)
    print(textwrap.fill(text, 64, replace_whitespace=False) + "\n")

# %% [markdown]
# ## What each head attends to
#
# The eight heads on one held-out window (the window of the first figure), one row
# per query character, one column per key; yellow is the colour of weight 1.

# %% tags=["plot"]
with torch.no_grad():
    _, shown_weights = model(held[shown : shown + 1])
labels = [repr(c)[1:-1] if c == "\n" else c for c in text]
fig, axes = plt.subplots(
    2, 4, figsize=(4.6, 3.4), sharex=True, sharey=True, layout="constrained"
)
for (layer, head), ax in zip(np.ndindex(2, 4), axes.flat, strict=True):
    image = ax.imshow(
        shown_weights[layer][0, head], cmap="viridis", vmin=0, vmax=1
    )
    ax.set_title(f"{layer}.{head}")
    ax.set_xticks([])
    ax.set_yticks([])
fig.colorbar(image, ax=axes, shrink=0.7, label="weight")
figure_to_svg(
    fig,
    alt=f"Attention weights of the eight heads (layer.head) on the window "
    f"{text!r}, one row per query character and one column per key.",
)

# %% [markdown]
# A picture of one window cannot say what a head does in general. A **score** can:
# for every held-out query that has a target, the weight the head puts on its targets,
# averaged over those queries (`target_scores`):
#
# $$
# \begin{aligned}
# & \text{score}_h = \operatorname{mean}_{(b, i)}
# \sum_{j \in t(b, i)} a^{(h)}_{b i j}, \\
# & \text{over the queries that have a target}
# \end{aligned}
# $$
#
# where $t(b, i)$ is the set of query $i$'s targets in window $b$.
# This is the *prefix matching score* of Olsson et al. (2022), "the average fraction of
# a head's attention weight given to the token we expect an induction head to attend
# to", with other targets. A head that spreads its weight evenly over the keys it may
# see also scores above 0, since the targets are among those keys; every score below
# is printed next to the score of such uniform attention.

# %%
with torch.no_grad():
    _, held_weights = model(held)  # one (n, 4, T, T) per layer
uniform = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]
uniform = uniform.expand(len(held), 1, T, T)
targets["open quote"] = opener_targets(held_ids, T, '"')
targets["open bracket"] = opener_targets(held_ids, T, "([{")
scores, baseline = {}, {}
for name, t in targets.items():
    baseline[name] = target_scores(uniform, t).item()
    scores[name] = torch.stack([target_scores(w, t) for w in held_weights])
print(f"{'score':>21} {'uniform':>8}   layer 0 heads        layer 1 heads")
for name, s in scores.items():
    row = "   ".join(" ".join(f"{v:.2f}" for v in s[i]) for i in (0, 1))
    print(f"{name:>21} {baseline[name]:>8.2f}   {row}")

# %% [markdown]
# ### Layer 0 reads the last few characters
#
# Every head of layer 0 puts more weight on the previous character than any head of
# layer 1, and the strongest several times more than uniform attention (the cell
# after the plot prints how many). The mean weight at each distance back, per head,
# shows how far each one looks.

# %% tags=["plot"]
fig, axes = plt.subplots(
    2, 4, figsize=(4.6, 3.0), sharex=True, sharey=True, layout="constrained"
)
distances = np.arange(1, 9)
for (layer, head), ax in zip(np.ndindex(2, 4), axes.flat, strict=True):
    w = held_weights[layer][:, head]
    profile = [
        w[:, torch.arange(d, T), torch.arange(T - d)].mean().item()
        for d in distances
    ]
    ax.bar(distances, profile, color=f"C{layer}")
    ax.set_title(f"{layer}.{head}")
    ax.set_xticks([1, 4, 8])
for ax in axes[1]:
    ax.set_xlabel("distance back")
for ax in axes[:, 0]:
    ax.set_ylabel("mean weight")
prev = scores["previous character"]
figure_to_svg(
    fig,
    alt="Mean attention weight at distances 1 to 8 back, per head. "
    "Previous-character scores: layer 0 "
    f"{', '.join(f'{v:.2f}' for v in prev[0])}; layer 1 "
    f"{', '.join(f'{v:.2f}' for v in prev[1])}.",
)

# %%
prev_head = int(scores["previous character"][0].argmax())
print(
    f"strongest: head 0.{prev_head}, "
    f"{prev[0, prev_head] / baseline['previous character']:.1f} times uniform"
)

# %% [markdown]
# ### Layer 1 finds the open bracket or quote
#
# In the text, Sphinx writes code in double quotes: `"__init__()"`, `"for"`; and code
# is full of brackets. Inside such a span, a head or two of layer 1 put far more
# weight on the innermost bracket or quote still open than uniform attention would.
# The cell names the heads whose score on that target passes 0.25, about four times
# the uniform score. In this model the same head scores on quotes alone and on
# brackets alone (the table's last two rows): it finds whichever delimiter is open.
# Other seeds share the two out in their own way (the table of seeds below).

# %%
ROLE = 0.25
DELIMITER = "open bracket or quote"
open_heads = [(1, h) for h in range(4) if scores[DELIMITER][1, h] > ROLE]
best_open = int(scores[DELIMITER][1].argmax())
print(f"open-delimiter heads: {open_heads}")
for name in (DELIMITER, "open quote", "open bracket"):
    print(
        f"  {name}: layer 1 head {best_open} scores "
        f"{scores[name][1, best_open]:.2f} (uniform {baseline[name]:.2f})"
    )

# %% [markdown]
# ### What the scores do not show
#
# Word starts: some heads score a few times uniform attention on the first letter of
# the current word. Earlier copies: no head scores much above uniform (the cell below
# prints the best ratio), where an induction head would put most of its weight on
# its targets. A score says where a head looks, not that the model uses it: the next
# section zeroes these heads too, and the model hardly notices. **This model has no
# induction heads.** One plausible reason: in Olsson et al.'s language models,
# in-context learning and induction heads appear together "in a narrow window early
# in training (roughly 2.5 to 5 billion tokens)", measured in contexts long enough
# to compare the loss on the 500th token with the loss on the 50th; this model has
# read about half a million characters, in windows of 32. The [induction-heads
# page](induction_heads.md) trains them on a task that needs them.
#
# <details class="note"><summary>Going deeper: prefix matching on text</summary>
#
# Olsson et al. define an induction head on repeated random tokens: it "attends back
# to previous tokens that were followed by the current and/or recent tokens". On
# random tokens one matching token is rare and means a repeat. On text it is not:
# every `e` follows some earlier `e`, so a one-character match would count almost
# every key as a target, and uniform attention would score high. The page's
# `induction_targets` asks for the last three characters to match (`k=3`), the
# "recent tokens" of the definition, and requires the earlier copy to end before the
# current one begins, so that inside a run like `-----` the previous character is
# not a target.
#
# </details>

# %%
for name in ("word start", "earlier copy"):
    ratio = scores[name].max().item() / baseline[name]
    print(f"best score on {name} / uniform: {ratio:.2f}")

# %% [markdown]
# ## Zero a head, measure where it should matter
#
# A score says where a head looks, not whether the model uses what it finds there.
# Zeroing the head (`without_heads`, as on the induction-heads page) answers that. The
# loss is measured on the predictions where the head should matter, and on all the
# others. For the open-delimiter heads, those are the **closing quotes** and the
# **closing brackets** whose opener is in the window (`closing_predictions`).

# %%
quotes = closing_predictions(held_ids, T, '"')  # (n, T - 1)
brackets = closing_predictions(held_ids, T, "([{")  # (n, T - 1)
closing = quotes | brackets
zeroed = ablated_losses(model, held)  # (layer, head) -> (n, T - 1) nats
change = {pair: nats / LN2 - losses for pair, nats in zeroed.items()}
print("zeroed   all  closing quotes  closing brackets  elsewhere (bits more)")
for (layer, head), d in change.items():
    print(
        f"  {layer}.{head}  {d.mean():+.3f} {d[quotes].mean():+15.2f} "
        f"{d[brackets].mean():+17.2f} {d[~closing].mean():+10.3f}"
    )

# %% [markdown]
# Zeroing the strongest previous-character head of layer 0 costs more than any head
# of layer 1, everywhere: it is how the model reads anything beyond the current
# character. (It also costs bits on closing quotes; see the second pitfall.) The
# open-delimiter heads cost bits on closing quotes and brackets, and little
# elsewhere. Zeroed one at a time, heads that share a job can hide each other, a
# caveat Olsson et al. give for their own ablations; so the cell zeroes the
# open-delimiter heads together, and counts where all the extra bits fall:

# %%
together = window_losses(without_heads(model, open_heads), held) / LN2
together = together - losses
print(f"open-delimiter heads {open_heads} zeroed together:")
print(f"{'':18} bits each  of the extra bits  of the predictions")
for name, where in (
    ("closing quotes", quotes),
    ("closing brackets", brackets),
    ("elsewhere", ~closing),
):
    print(
        f"  {name:<16} {together[where].mean():+9.3f}  "
        f"{together[where].sum() / together.sum():>17.0%}  "
        f"{where.float().mean():>18.1%}"
    )

# %% [markdown]
# Per character, the model closes quotes and brackets with these heads: each closing
# quote costs more than a bit without them, each other character a few hundredths.
# But closing quotes and brackets are about one prediction in eighty, so half or
# more of the extra bits fall elsewhere: the heads do small work everywhere too.
#
# ## Other seeds
#
# One training run could be a lucky one. The cells train the same recipe from seeds 1
# and 2, the seeds the site's tests read, and measure each as above (the folded
# cells: the scores, and the heads zeroed). Seed 0 is the page's model.


# %% tags=["check"]
in_word = targets["word start"][:, :-1].any(-1)  # a word's start to look at
copyable = copy_predictions(held, k=3)  # an earlier copy says what comes


def measure(m):
    loss = window_losses(m, held) / LN2
    with torch.no_grad():
        _, ws = m(held)
    s = {
        n: torch.stack([target_scores(w, t) for w in ws])
        for n, t in targets.items()
    }

    def zero(heads):  # bits more per prediction, those heads zeroed
        return window_losses(without_heads(m, heads), held) / LN2 - loss

    def best(name):
        return divmod(int(s[name].argmax()), 4)  # (layer, head)

    heads = [(1, h) for h in range(4) if s[DELIMITER][1, h] > ROLE]
    d = zero(heads)
    word, copying = zero([best("word start")]), zero([best("earlier copy")])
    return {
        "bpc": loss.mean().item(),
        "scores": s,
        "open heads": heads,
        "quotes": d[quotes].mean().item(),
        "brackets": d[brackets].mean().item(),
        "elsewhere": d[~closing].mean().item(),
        "share elsewhere": (d[~closing].sum() / d.sum()).item(),
        "word: in words": word[in_word].mean().item(),
        "word: elsewhere": word[~in_word].mean().item(),
        "copy: copyable": copying[copyable].mean().item(),
        "copy: elsewhere": copying[~copyable].mean().item(),
    }


# %%
seconds, by_seed, models = {0: train_seconds}, {0: measure(model)}, {0: model}
for seed in (1, 2):
    torch.manual_seed(seed)
    models[seed] = CharTransformer(T, 32, 2, 4)
    start = time.process_time()
    train_char_model(models[seed], train_ids, seed=seed, **RECIPE)
    seconds[seed] = time.process_time() - start
    by_seed[seed] = measure(models[seed])

# %% tags=["check"]
rows = {  # one column per seed
    "bits per character": lambda f: f"{f['bpc']:.3f}",
    "below the bigram": lambda f: f"{baselines['bigram'] - f['bpc']:.2f}",
    "previous char, layer 0": lambda f: (
        f"{f['scores']['previous character'][0].max():.2f}"
    ),
    "open delimiter, layer 1": lambda f: (
        f"{f['scores'][DELIMITER][1].max():.2f}"
    ),
    "  its heads": lambda f: (
        ",".join(f"1.{h}" for _, h in f["open heads"]) or "none"
    ),
    "  their open quote": lambda f: (
        f"{max(f['scores']['open quote'][p] for p in f['open heads']):.2f}"
    ),
    "  their open bracket": lambda f: (
        f"{max(f['scores']['open bracket'][p] for p in f['open heads']):.2f}"
    ),
    "  zeroed: closing quotes": lambda f: f"{f['quotes']:+.2f}",
    "  closing brackets": lambda f: f"{f['brackets']:+.2f}",
    "  elsewhere": lambda f: f"{f['elsewhere']:+.3f}",
    "  share elsewhere": lambda f: f"{f['share elsewhere']:.0%}",
    "word start / uniform": lambda f: (
        f"{f['scores']['word start'].max() / baseline['word start']:.1f}"
    ),
    "  zeroed: in words": lambda f: f"{f['word: in words']:+.3f}",
    "  elsewhere ": lambda f: f"{f['word: elsewhere']:+.3f}",
    "earlier copy / uniform": lambda f: (
        f"{f['scores']['earlier copy'].max() / baseline['earlier copy']:.2f}"
    ),
    "  zeroed: copyable": lambda f: f"{f['copy: copyable']:+.3f}",
    "  elsewhere  ": lambda f: f"{f['copy: elsewhere']:+.3f}",
}
print(f"{'seed':<25}" + "".join(f"{seed:>8}" for seed in by_seed))
for name, cell in rows.items():
    print(f"{name:<25}" + "".join(f"{cell(f):>8}" for f in by_seed.values()))

# %% [markdown]
# Every seed tells the same story with its own numbers: most of a bit per character
# below the bigram model; a layer 0 that reads the last few characters; one or two
# open-delimiter heads in layer 1 (which heads, and how they split quotes from
# brackets, depends on the seed), whose removal costs bits on each closing quote and
# bracket and a few hundredths elsewhere, half or more of the extra bits falling
# elsewhere; word-start heads whose removal costs a few hundredths of a bit on the
# letters inside words; and no head that copies: zeroing the best earlier-copy head
# costs a few hundredths of a bit where an earlier copy says what comes next
# (`copy_predictions`).

# %% [markdown]
# ## This model in your browser
#
# [The text playground](../playground_text.md) runs this page's model, seed 0, in your
# browser: type any text, and it shows the next-character probabilities and every
# head's weights, with the heads this page named labelled. The folded cell writes the
# model and those heads to a small file beside this page (`char_playground_json`),
# each weight rounded to a signed byte times one scale per tensor, and measures
# what the rounding costs on the held-out text.

# %% tags=["check"]
named = {}
for role, pairs in (
    ("previous character", [(0, prev_head)]),
    (DELIMITER, open_heads),
):
    for pair in pairs:
        named[pair] = (role, scores[role][pair].item())
exported = char_playground_json(model, named)
Path("attention_on_text.json").write_text(exported)
reloaded = char_model_from_playground_json(exported)
reloaded_bpc = (window_losses(reloaded, held) / LN2).mean().item()
size = len(exported.encode())
print(f"{size:,} bytes, {len(gzip.compress(exported.encode())):,} compressed")
print(
    f"held-out bits per character: {bpc:.4f}, from the file "
    f"{reloaded_bpc:.4f} ({reloaded_bpc - bpc:+.4f})"
)
for (layer, head), (role, score) in named.items():
    print(f"head {layer}.{head}: {role} (score {score:.2f})")

# %% [markdown]
# ## Common pitfalls
#
# **A score without its baseline.** "The head with the highest score on earlier copies
# is an induction head." Uniform attention scores more than half as much on the same
# queries (the ratio printed above), and zeroing that head costs a few hundredths of
# a bit where copying would help (the table of seeds). Fix: print every score next
# to uniform attention's, claim only a large ratio, and check it with the loss.
#
# **Judging a head by how much the loss rises.** "Zeroing the strongest
# previous-character head costs bits on closing quotes too, so it also closes quotes."

# %%
for pair in ((0, prev_head), (1, best_open)):
    d = change[pair]
    print(
        f"head {pair[0]}.{pair[1]}: closing quotes "
        f"{d[quotes].mean():+.2f}, "
        f"elsewhere {d[~closing].mean():+.2f}, ratio "
        f"{d[quotes].mean() / d[~closing].mean():.0f}"
    )

# %% [markdown]
# The previous-character head raises the loss everywhere, closing quotes included;
# the open-delimiter head raises it on closing quotes many times more than anywhere
# else. Fix: compare where a head should matter with elsewhere.
#
# **Bits, nats and other texts.** "nanoGPT's Shakespeare model reaches a validation
# loss of 1.4697; the bits per character above are far higher, so this model is far
# worse." nanoGPT's loss, like PyTorch's cross-entropy, is in nats:

# %%
print(f"1.4697 nats = {1.4697 / LN2:.2f} bits per character")

# %% [markdown]
# and nanoGPT's model reads Shakespeare, with 65 characters, a context of 256 and
# 6 layers of 384 features, for about 3 minutes on a GPU. char-rnn's README names,
# as an example, a checkpoint with a validation loss of 2.0681 after almost one pass
# over its data: nats too. Fix: convert with $\ln 2$, and
# compare models only on the same text; this page compares with baselines counted on
# its own text.
#
# **Held-out text the model has read.** "Hold out the last tenth of every topic, as
# the topics ship." The cell splits them so, without dropping the repeats, and looks
# for each held-out window in the training text of that split. Then it measures this
# page's model on those held-out windows, split by whether the model read them in
# its own training text, beside the bigram counted on that text:

# %%
shipped = load_corpus(drop_repeats=False)
leaked = verbatim_windows(shipped.held_out, shipped.train, T)
print(
    f"as shipped: {int(leaked.sum())} of {len(leaked):,} held-out windows "
    f"({leaked.float().mean():.0%}) are in the training text"
)
shipped_held = windows(encode(shipped.held_out), T)
read = verbatim_windows(shipped.held_out, corpus.train, T)
model_bits = window_losses(model, shipped_held).mean(-1) / LN2  # (n,)
bigram_bits = bigram_window_bits(train_ids, shipped_held).mean(-1)  # (n,)
for name, where in (("read in training", read), ("not read", ~read)):
    print(
        f"{name:>16}: model {model_bits[where].mean():.2f}, bigram "
        f"{bigram_bits[where].mean():.2f}, margin "
        f"{(bigram_bits - model_bits)[where].mean():.2f} bits per character"
    )

# %% [markdown]
# Nearly a third of that held-out text is in its training text, and on text it has
# read the model gains more over the bigram than on text it has not: a leak makes a
# model look better than it is. Fix: drop the documents that repeat others before
# the split, and measure the held-out windows found in the training text, as the
# page does above.
# Public datasets leak too: Lee et al. (2022) found train-test overlap in "over 4% of
# the validation set of standard datasets".
#
# **Measuring on the training text.** The model's loss on training windows is lower
# than on held-out ones; so is the bigram's, counted on the same training text:

# %%
train_windows = windows(train_ids, T)[::10]
train_bpc = (window_losses(model, train_windows) / LN2).mean().item()
train_bigram = ngram_bits(train_ids, train_ids, 2)
print(f"model:  training text {train_bpc:.3f}, held out {bpc:.3f}")
print(
    f"bigram: training text {train_bigram:.3f}, held out "
    f"{baselines['bigram']:.3f}"
)

# %% [markdown]
# Most of the gap is the text, not memorisation: the held-out tenth is the ends of the
# documents, which are harder. Fix: make every claim on held-out text, and compare a
# gap with a baseline's before calling it overfitting.
#
# **Text outside the alphabet.** Curly quotes are not among the 96 characters:

# %%
try:
    encode("the \u201cfor\u201d statement")
except ValueError as error:
    print(textwrap.fill(str(error), 64))
print(encode(to_alphabet("the \u201cfor\u201d statement")).shape)

# %% [markdown]
# Fix: map text with `to_alphabet` first, as the corpus was.
#
# ## Exercises
#
# **1. Predict which head breaks closing brackets.** Using only the open-bracket
# scores of layer 1, name the head; zero it, and measure the loss on closing
# brackets, on closing quotes and elsewhere.

# %% tags=["solution"]
predicted = (1, int(scores["open bracket"][1].argmax()))
d = window_losses(without_heads(model, [predicted]), held) / LN2 - losses
print(f"head {predicted}, bits more per character:")
print(
    f"  closing brackets {d[brackets].mean():+.2f}, "
    f"closing quotes {d[quotes].mean():+.2f}, "
    f"elsewhere {d[~closing].mean():+.3f}"
)
# The layer-1 head with the top bracket score: closing brackets cost many
# times more than the other characters, which lose a few hundredths of a bit.
# If it is also an open-delimiter head, closing quotes cost bits too.

# %% [markdown]
# **2. Cut the context to 8 characters.** Evaluating on windows of 8 looks like the
# answer, but it also gives the first characters of every window less context. Use
# `context_losses` instead: predict the same characters from their last 31 and from
# their last 8 characters, over all the text and over the closing quotes whose opening
# quote is more than 8 characters back.

# %% tags=["solution"]
opener, closes = open_spans(held_ids, '"')
quotes_at = closes.nonzero().flatten()
quotes_at = quotes_at[quotes_at >= 31]
far = quotes_at[(quotes_at - opener[quotes_at]) > 8]
every = torch.arange(31, len(held_ids), 13)
cut = {}
for name, positions in (("all text", every), ("far closing quotes", far)):
    cut[name] = [
        context_losses(model, held_ids, positions, c).mean() / LN2
        for c in (31, 8)
    ]
    print(
        f"{name}: {cut[name][0]:.2f} bits with 31 characters, "
        f"{cut[name][1]:.2f} with 8"
    )
windowed = (window_losses(model, windows(held_ids, 8)) / LN2).mean()
print(f"windows of 8 instead: {windowed:.2f} (all text, {bpc:.2f} in 32)")
# Over all the text, 8 characters of context do about as well as 31: the model
# uses little of its window. The far closing quotes cost about a bit more:
# their opening quote is out of sight. Windows of 8 cost more than 32, but
# that is the cost of the first characters of each window.

# %% [markdown]
# **3. Count the bigram yourself.** With `collections.Counter`, count the pairs of the
# training text, add one to every count, and compute the held-out bits per character.
# Compare with `ngram_bits(train_ids, held_ids, 2)`.

# %% tags=["solution"]
pairs = Counter(itertools.pairwise(corpus.train))
firsts = Counter(corpus.train[:-1])
V = len(ALPHABET)
h = corpus.held_out
mine = -np.mean(
    [
        math.log2((pairs[a, b] + 1) / (firsts[a] + V))
        for a, b in itertools.pairwise(h)
    ]
)
print(f"{mine:.6f} by hand, {baselines['bigram']:.6f} by ngram_bits")

# %% [markdown]
# **4. Zero all of layer 0: a bigram model?** Without layer 0's attention, every
# position still holds its own character. Is the model then as good as the bigram?

# %% tags=["solution"]
no_layer0 = without_heads(model, [(0, h) for h in range(4)])
no_layer0_bpc = (window_losses(no_layer0, held) / LN2).mean().item()
print(
    f"{no_layer0_bpc:.2f} bits per character; bigram "
    f"{baselines['bigram']:.2f}, unigram {baselines['unigram']:.2f}"
)
# Worse than the bigram. Layer 1 and the MLPs were trained on what layer 0
# writes; zeroing it does not give back a simpler model, it breaks this one.

# %% [markdown]
# **5. Temperature.** Sample 1,000 characters after "The " at temperatures 0.5, 1.0
# and 1.5. What share of the sampled words (runs of two letters or more) occur in the
# training text?

# %% tags=["solution"]
known = set(re.findall(r"[A-Za-z]{2,}", corpus.train))
shares = {}
for temperature in (0.5, 1.0, 1.5):
    words = re.findall(
        r"[A-Za-z]{2,}", sample(model, "The ", 1000, temperature, seed=0)
    )
    shares[temperature] = sum(w in known for w in words) / len(words)
    print(
        f"temperature {temperature}: {shares[temperature]:.0%} of "
        f"{len(words)} words known"
    )
# The share falls as the temperature rises: flattening the distribution gives
# the unlikely characters, and with them invented words, more of the draws.

# %% [markdown]
# ## Summary
#
# - Trained on a CPU on Python's documentation, topics that repeat others dropped,
#   a two-layer character transformer of 32,640 parameters predicts
#   held-out text most of a bit per character better than the bigram model.
# - Layer 0's heads read the last few characters; the strongest looks at the previous
#   one, and the model depends on it more than on any head of layer 1.
# - One or two heads of layer 1 attend to the bracket or quote still open. Zeroed,
#   each closing quote or bracket costs bits, each other character a few hundredths;
#   half or more of the extra bits still fall elsewhere.
# - Word-start heads look at a word's first letter, but the model hardly uses them;
#   no head does induction. A score defined on held-out text, its uniform baseline
#   and an ablation measured where the head should matter are what tell these apart.
#
# The closing figures, as this build computed them:

# %% tags=["measured"]
print(
    f"baselines: uniform {baselines['uniform']:.2f}, unigram "
    f"{baselines['unigram']:.2f}, bigram {baselines['bigram']:.2f} bits"
)
for seed, f in by_seed.items():
    s = f["scores"]
    print(
        f"seed {seed}: trained in {seconds[seed]:.1f} s; held-out "
        f"{f['bpc']:.3f} bits per character"
    )
    print(
        f"  open-delimiter heads {f['open heads']}, best score "
        f"{s[DELIMITER][1].max():.2f}"
    )
    print(
        f"  zeroed: closing quotes {f['quotes']:+.2f} bits, closing brackets "
        f"{f['brackets']:+.2f}, elsewhere {f['elsewhere']:+.3f}"
    )
print(f"this execution: {time.process_time():.0f} s of CPU time in all")

# %% [markdown]
# ## References
#
# - Katherine Lee, Daphne Ippolito, Andrew Nystrom et al. [Deduplicating Training
#   Data Makes Language Models Better](https://aclanthology.org/2022.acl-long.577).
#   ACL 2022. Repeated text in datasets, and train-test overlap.
# - Catherine Olsson, Nelson Elhage, Neel Nanda et al. [In-context Learning and
#   Induction Heads](https://transformer-circuits.pub/2022/in-context-learning-and-induction-heads/index.html).
#   Transformer Circuits Thread, 2022. The prefix matching score, when induction heads
#   form, knocking out heads and its caveat.
# - Nelson Elhage, Neel Nanda, Catherine Olsson et al. [A Mathematical Framework for
#   Transformer Circuits](https://transformer-circuits.pub/2021/framework/index.html).
#   Transformer Circuits Thread, 2021. Heads move information; the previous-token head.
# - Andrej Karpathy. [nanoGPT](https://github.com/karpathy/nanoGPT) (README and
#   `config/train_shakespeare_char.py`) and
#   [char-rnn](https://github.com/karpathy/char-rnn) (README): the well-known character
#   models, on Shakespeare.
# - Python Software Foundation. [History and License](https://docs.python.org/3/license.html):
#   the PSF License Version 2, and the Zero-Clause BSD licence for code in the docs.
# - PyTorch: [`torch.nn.TransformerEncoderLayer`](https://docs.pytorch.org/docs/stable/generated/torch.nn.TransformerEncoderLayer.html),
#   [`torch.optim.AdamW`](https://docs.pytorch.org/docs/stable/generated/torch.optim.AdamW.html).
#
# **Next:** [Where am I? Positions in attention](../concepts/positions.md).

# %% [markdown]
# # Attention that learned: induction heads
#
# Every attention map so far on this site came from random weights. They show how
# attention computes, not what it computes once a model has learned something. This page
# trains a tiny model while the site is built, in a few seconds on one CPU thread, and
# looks inside it. The model learns to continue text that repeats.
#
# It does so with a circuit of two heads. A head in the first layer looks at the
# previous token. A head in the second layer uses what it wrote to find where the current
# token occurred before, and copies the token that came next. Elhage et al. (2021) named
# that second head an *induction head*; Olsson et al. (2022) defined it by what it does:
# it attends to the token after an earlier copy of the current token, and it raises that
# token's logit. The picture shows the idea on a sequence from this page.

# %% tags=["plot"]
import copy
import math
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Rectangle

from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.masks import causal_mask
from attn_ref.plotting import figure_to_svg
from attn_ref.training import (
    AttentionOnlyDecoder,
    copying_scores,
    head_logits,
    model_from_playground_json,
    next_token_losses,
    one_token_induction_losses,
    part_masks,
    playground_json,
    prefix_matching_scores,
    previous_token_scores,
    repeated_tokens,
    to_torch_multihead,
    token_scores,
    train_induction,
    without_heads,
)

# One thread: results that do not depend on the core count.
torch.set_num_threads(1)
torch.set_printoptions(precision=2, sci_mode=False)

VOCAB, T = 64, 32  # vocabulary size and tokens per sequence
g = torch.Generator().manual_seed(3)
example, example_period = repeated_tokens(1, T, VOCAB, (8, 16), generator=g)
p = int(example_period)
seq = example[0].tolist()
# A query in the repeat whose token occurs once per period, and the key
# an induction head should find for it: the token after the earlier copy.
query = next(t for t in range(p + 3, T) if seq[:p].count(seq[t]) == 1)
key = query - p + 1
WIDTH = 8  # tokens shown in each row


def circuit_picture(previous_row, induction_row, names):
    """The circuit on `example`: a previous-token head at `key`, then an
    induction head at `query`, each row of weights shown on 8 tokens."""
    start = key - 3  # the window: key - 1 in its third column
    fig, ax = canvas(WIDTH + 1, 9.4)
    x = 0.5

    def token_row(y, first, last_shown):
        shown = np.array([first + c <= last_shown for c in range(WIDTH)])
        grid(ax, np.zeros(WIDTH), x, y, cmap="Greys", mask=shown[None])
        for c in np.flatnonzero(shown):
            ax.text(
                x + c + 0.5,
                y + 0.5,
                str(seq[first + c]),
                ha="center",
                va="center",
                fontsize=10,
                color="black",
            )

    note(ax, x + WIDTH / 2, 0.4, f"earlier: positions {start} to {start + 7}")
    token_row(0.7, start, T - 1)
    before = np.arange(start, start + WIDTH) <= key  # (WIDTH,): causal
    grid(
        ax,
        previous_row[start : start + WIDTH],
        x,
        2.5,
        cmap="viridis",
        decimals=1,
        mask=before[None],
        label=f"{names[0]}, query {key}",
    )
    note(
        ax,
        x + WIDTH / 2,
        4.2,
        f"the repeat: positions {start + p} to {start + p + 7}",
    )
    token_row(4.5, start + p, query)
    grid(
        ax,
        induction_row[start : start + WIDTH],
        x,
        6.3,
        cmap="viridis",
        decimals=1,
        label=f"{names[1]}, query {query}",
    )
    outlines = (
        (key - 1 - start, 0.7, "C1"),
        (query - start - p, 4.5, "C1"),
        (key - start, 0.7, "C0"),
    )
    for column, y, colour in outlines:
        ax.add_patch(
            Rectangle(
                (x + column, y),
                1,
                1,
                fill=False,
                edgecolor=colour,
                lw=2.5,
                zorder=4,
            )
        )
    # Below each row of weights: from the query's column to the key it finds.
    arrow(ax, (x + 3.5, 3.5), (x + 2.5, 3.5), bend=-0.7)
    arrow(ax, (x + 2.5, 7.3), (x + 3.5, 7.3), bend=0.7)
    note(
        ax,
        x + WIDTH / 2,
        8.0,
        f"query {query} (token {seq[query]}) finds key {key},",
    )
    note(
        ax,
        x + WIDTH / 2,
        8.6,
        f"the token after the earlier {seq[query]}: {seq[key]} comes next",
    )
    return fig


ideal_previous = np.eye(T)[key - 1]  # all of query key's weight on key - 1
ideal_induction = np.eye(T)[key]  # all of query's weight on key
figure_to_svg(
    circuit_picture(
        ideal_previous,
        ideal_induction,
        ("previous-token head", "induction head"),
    ),
    alt=f"The induction circuit on a sequence of period {p}, drawn on 8 "
    f"tokens of its first copy and of its repeat. A previous-token head at "
    f"position {key} puts weight 1 on position {key - 1}, "
    f"token {seq[key - 1]}. "
    f"In the repeat, query {query} holds token {seq[query]} again; the "
    f"induction head puts weight 1 on key {key}, the token after the earlier "
    f"{seq[query]}, which is {seq[key]}: the token that comes next.",
)

# %% [markdown]
# Read the picture from the top. Rows of numbers are tokens; rows of coloured cells are
# one query's attention weights over the tokens above them, yellow for a weight of 1 and
# dark purple for 0, hatched where the causal mask hides a key. The previous-token head,
# at the token outlined in blue, attends to the token before it (outlined in orange) and
# writes what it reads into the stream there. Later, the same orange token comes back.
# The induction head, at that query, looks for a key whose previous token is its own
# token: it finds the blue one, and copies it as its guess for the next token. Below, a
# trained model does exactly this.
#
# The page trains the model, names its heads by the two properties Olsson et al. define
# (prefix matching and copying), zeroes heads to see which ones the model depends on,
# and shows why a single layer cannot do the same. Last, it reads the mechanism off the
# trained weights.
#
# It assumes causal self-attention ([Self-attention with a causal
# mask](causal_self_attention.md)), attention with several heads ([Scaled
# dot-product attention, step by step](scaled_dot_product_step_by_step.md)) and the
# residual stream of [the transformer block](../concepts/transformer_block.md). The model here
# keeps the block's stream and its attention, and drops the rest. Symbols follow the
# [notation table](../notation.md): tokens are row vectors, shapes `(B, T, C)` for
# tokens and `(B, H, T, T)` for one layer's attention weights. (The first cell, folded
# above, holds the imports.)
#
# ## The task: random tokens that repeat
#
# A sequence here is a run of random tokens, repeated until the sequence is full. Each
# sequence draws its own period $p$ (between 8 and 16 tokens) and its own tokens, from a
# vocabulary of 64. `attn_ref.training.repeated_tokens` makes a batch of them; the
# sequence in the picture is `repeated_tokens(1, T, VOCAB, (8, 16), generator=g)`.

# %%
print(f"period p = {p}")
for start in range(0, T, p):
    run = example[0, start : start + p].tolist()
    print(f"positions {start:>2} to {start + len(run) - 1:>2}:", run)

# %% [markdown]
# The model reads a sequence left to right and, at every position $i$, predicts token
# $i + 1$. Its loss there is $-\log$ of the probability it gave the right token. The
# page splits those predictions in two (`attn_ref.training.part_masks`):
#
# - **the first part**: the predictions of tokens $1, \dots, p - 1$. They are uniformly
#   random and independent of everything before them, so no model can beat, on average,
#   the loss of a uniform guess over the vocabulary, $\ln 64$.
# - **the repeated part**: the predictions made at positions $i \ge p$. The current
#   token already occurred $p$ positions back, and the token after that occurrence is
#   the next one. A model that finds it can predict the next token, though not always
#   for sure: a token can occur twice in one period (the example has one), followed by
#   different tokens. [How low can the loss go?](#how-low-can-the-loss-go) measures
#   what that costs.
#
# The period varies on purpose. With one fixed period, the next token would always sit
# at the same distance back, and a head could find it by position alone, without
# looking at any token (exercise 4 trains a model that does exactly that).
#
# ## The model: the site's attention, and nothing else
#
# `attn_ref.training.AttentionOnlyDecoder` is a decoder-only transformer reduced to
# attention. A token embedding and a learned position embedding are added into the
# *residual stream*. Each layer is the site's `MultiHeadAttention` with a causal mask,
# and adds its output back to the stream. A linear map, the *unembedding*, turns the
# stream into one logit per token. There is no MLP and no layer norm, as in the
# attention-only models of Elhage et al. (2021): every path from input to logits is a
# product of weights and attention patterns, which makes the model easy to read.
#
# This one has two layers of two heads, in a stream of width 64, so each head has
# $d_k = 32$.

# %%
torch.manual_seed(0)
model = AttentionOnlyDecoder(VOCAB, T, embed_dim=64, num_layers=2, num_heads=2)
untrained = copy.deepcopy(model)  # kept, to compare with the trained model
H = model.num_heads
print(f"parameters: {sum(w.numel() for w in model.parameters()):,}")
print(model)

# %% [markdown]
# Before training, each attention layer is checked against PyTorch's own
# `torch.nn.MultiheadAttention`, with the same weights
# (`attn_ref.training.to_torch_multihead` copies them) and the same causal mask.
# PyTorch reads a boolean mask the other way round (`True` means *may not attend*),
# hence `~mask` in the folded cell.

# %% tags=["plot"]
x = model.embed(example)  # (B, T, C): the stream before layer 0
mask = causal_mask(T)
with torch.no_grad():
    for number, layer in enumerate(model.layers):
        ours, ours_weights = layer(x, x, x, attn_mask=mask)
        theirs, theirs_weights = to_torch_multihead(layer)(
            x, x, x, attn_mask=~mask, average_attn_weights=False
        )
        print(
            f"layer {number}: largest |attn_ref - PyTorch| output "
            f"{(ours - theirs).abs().max():.1e}, weights "
            f"{(ours_weights - theirs_weights).abs().max():.1e}"
        )
        x = x + ours  # the stream layer 1 reads

# %% [markdown]
# Both agree to float32 rounding. The model that trains below is this code.
#
# ## Training
#
# `attn_ref.training.train_induction` draws a fresh batch of 32 sequences at every
# step, computes the mean loss of every prediction in it, and takes one step of AdamW
# with a learning rate of 0.01. It runs 200 steps. The cell times them in CPU time,
# which does not count the moments when other programs have the processor.

# %% tags=["measured"]
start = time.process_time()
history = train_induction(model, steps=200, batch_size=32, lr=1e-2, seed=0)
train_seconds = time.process_time() - start
print(f"200 steps in {train_seconds:.1f} s of CPU time")

# %% [markdown]
# `history` holds each step's mean loss on the two parts of its batch. Single steps
# are noisy, so the table and the curves below also show a moving average over 10
# steps, and the first step at which that average falls below $\frac{1}{2} \ln 64$,
# half of where the repeated part started.

# %% tags=["plot"]
WINDOW = 10


def moving_average(losses):
    return np.convolve(losses, np.ones(WINDOW) / WINDOW, mode="valid")


smooth_first = moving_average(history.first)
smooth_repeated = moving_average(history.repeated)
below = np.flatnonzero(smooth_repeated < math.log(VOCAB) / 2)
# The last step of the first such window:
drop_step = int(below[0]) + WINDOW - 1
print(f"ln {VOCAB} = {math.log(VOCAB):.2f}")
print("steps       first part  repeated part  (mean over the 10 steps)")
for end in (10, 50, 100, 150, 200):
    on_first, on_repeated = smooth_first[end - 10], smooth_repeated[end - 10]
    steps_shown = f"{end - 10:>3} to {end - 1:<3}"
    print(f"{steps_shown} {on_first:>10.2f} {on_repeated:>14.2f}")
print(f"repeated part: average below ln {VOCAB} / 2 from step {drop_step}")

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(4.5, 3.2), layout="constrained")
steps = np.arange(len(history.first))
ends = steps[WINDOW - 1 :]
ax.plot(steps, history.first, color="C0", alpha=0.3, linewidth=1)
ax.plot(steps, history.repeated, color="C1", alpha=0.3, linewidth=1)
ax.plot(ends, smooth_first, color="C0", label="first part")
ax.plot(ends, smooth_repeated, color="C1", label="repeated part")
ax.axhline(math.log(VOCAB), color="gray", linestyle="--", label=f"ln {VOCAB}")
ax.axvline(drop_step, color="gray", linestyle=":", linewidth=1)
ax.set(xlabel="training step", ylabel="loss (nats)")
ax.set_title("Loss while training")
ax.legend()
figure_to_svg(
    fig,
    alt=f"Loss against training step, for the first part and the repeated "
    f"part. The first part stays near ln {VOCAB} = {math.log(VOCAB):.2f}; the "
    f"repeated part falls from {smooth_repeated[0]:.1f} to "
    f"{smooth_repeated[-1]:.1f}, "
    f"crossing half of ln {VOCAB} at step {drop_step} (dotted line).",
)

# %% [markdown]
# What to look for. The repeated part's loss (orange) first falls slowly, then drops
# steeply over a few tens of steps, and flattens out far below where it started. Olsson
# et al. saw the same shape in far larger models trained on text: a short window of
# training in which in-context learning improves abruptly, which they call a *phase
# change*. The first part's loss (blue) cannot fall far below $\ln 64$: there is nothing
# to learn there. It may even end above it, if the model, which has learnt to copy, bets
# on a token from earlier in the sequence where no repeat has started yet.
#
# ## How low can the loss go?
#
# The training batches are not a fair test. The rest of the page measures the model on
# a fixed batch of 256 new sequences, drawn from a generator of its own.

# %%
test_generator = torch.Generator().manual_seed(1000)
tokens, periods = repeated_tokens(256, T, VOCAB, (8, 16), test_generator)
first, repeated = part_masks(periods, T)  # (B, T - 1) each: which predictions
# (B, T): True where the token occurred before
in_repeat = torch.arange(T)[None, :] >= periods[:, None]
with torch.no_grad():
    logits, weights = model(tokens)
    untrained_logits, untrained_weights = untrained(tokens)
losses = next_token_losses(logits, tokens)
untrained_losses = next_token_losses(untrained_logits, tokens)
print("            first part  repeated part")
for name, per_token in (("untrained", untrained_losses), ("trained", losses)):
    on_first, on_repeated = per_token[first].mean(), per_token[repeated].mean()
    print(f"{name:<9} {on_first:>12.2f} {on_repeated:>14.2f}")

# %% [markdown]
# Zero is out of reach on this batch, for any model that matches one token. Take a
# perfect one: at every query it attends, in equal shares, to each key whose previous
# token is the current one, and predicts the tokens it finds there in the same shares.
# Where the current token occurs once per period, every match holds the next token.
# Where it occurs twice in a period, the matches disagree, and one token of context
# cannot tell which is right. `attn_ref.training.one_token_induction_losses` computes
# that head's loss at every prediction.

# %%
floor = one_token_induction_losses(tokens)  # (B, T - 1): nan if no match
ambiguous = (floor[repeated] > 0).float().mean().item()
floor_loss = floor[repeated].mean().item()
baseline_loss = losses[repeated].mean().item()
print(f"repeated-part predictions with matches that disagree: {ambiguous:.0%}")
print(f"loss on the repeated part, perfect one-token head: {floor_loss:.2f}")
print(
    f"loss on the repeated part, the trained model:      {baseline_loss:.2f}"
)

# %% [markdown]
# So the floor for this kind of solution sits a little above zero, and the trained model
# sits above the floor: within 200 steps it has learnt most of what copying can give
# (its loss started near $\ln 64$), but not all. The tests check, on every seed below,
# that the trained loss lies between the floor and half of $\ln 64$.
#
# ## What each head attends to
#
# Here are the weights of the four heads on the example sequence from the start: one
# row per query, one column per key, yellow for a weight near 1 and dark purple near 0.
# The dashed orange lines mark where the repeat starts.

# %%
with torch.no_grad():
    _, example_weights = model(example)
for number, layer_weights in enumerate(example_weights):
    print(f"layer {number}: {tuple(layer_weights.shape)}")

# %% tags=["plot"]
fig, axes = plt.subplots(2, 2, figsize=(4.5, 4.4), sharex=True, sharey=True)
fig.set_layout_engine("constrained")
allowed = causal_mask(T).numpy()  # (T, T): True where the query may look
for (layer, head), ax in zip(np.ndindex(2, H), axes.flat, strict=True):
    shown = np.ma.masked_where(~allowed, example_weights[layer][0, head])
    image = ax.imshow(shown, cmap="viridis", vmin=0, vmax=1)
    # A masked key shows the axes' background, hatched: not a weight of 0.
    ax.patch.set(facecolor="0.85", edgecolor="0.45", hatch="///")
    for line in (ax.axhline, ax.axvline):
        line(p - 0.5, color="C1", linestyle="--", linewidth=0.8)
    ax.set_title(f"layer {layer}, head {head}", fontsize=11)
    ax.set_xticks(range(0, T, 8))
    ax.set_yticks(range(0, T, 8))
for ax in axes[1]:
    ax.set_xlabel("key position")
for ax in axes[:, 0]:
    ax.set_ylabel("query position")
fig.colorbar(image, ax=axes, shrink=0.6, label="weight (hatched: masked)")
figure_to_svg(
    fig,
    alt=f"Attention weights of the four heads on a sequence of period {p}, "
    f"each a {T} by {T} map, yellow for weight 1 and dark purple for 0. "
    f"Previous-token heads show a yellow line just below the diagonal; "
    f"induction heads, in the repeated part, a yellow line {p - 1} "
    f"positions below it.",
)

# %% [markdown]
# Two patterns stand out. A *previous-token head* has a yellow line (weights near 1)
# just below the diagonal: query $i$ attends to key $i - 1$. An induction head has,
# below the dashed line, a yellow line $p - 1$ positions left of the diagonal: query $i$
# attends to key $i - p + 1$, the token that followed the earlier occurrence of token
# $i$. Which of the four heads show which pattern is the model's choice, and differs
# from one training run to another. The scores below decide it in numbers.
#
# ## Scoring where the heads attend
#
# Olsson et al. define an induction head by two properties it shows on "a repeated random
# sequence of tokens":
#
# - *prefix matching*: "The head attends back to previous tokens that were followed by
#   the current and/or recent tokens. That is, it attends to the token which induction
#   would suggest comes next."
# - *copying*: "The head's output increases the logit corresponding to the attended-to
#   token."
#
# They score prefix matching as "the average fraction of a head's attention weight given
# to the token we expect an induction head to attend to".
# `attn_ref.training.prefix_matching_scores` computes it: for each query in the repeated
# part, the total weight on the keys $j$ whose previous token equals the query's token
# ($x_{j-1} = x_i$), averaged over the queries. Alongside, `previous_token_scores`
# averages each head's weight on the previous token, $a_{i, i-1}$. A head that spreads
# its weight evenly scores above zero on both, since the right keys are among the ones
# it sees: the cell prints that baseline first.

# %%
# (T, T): each row spreads 1 evenly over the keys it may see
uniform = causal_mask(T) / torch.arange(1.0, T + 1)[:, None]
uniform = uniform.expand(len(tokens), 1, T, T)  # (T, T) -> (B, 1, T, T)
uniform_prev = previous_token_scores(uniform).item()
uniform_prefix = prefix_matching_scores(uniform, tokens, in_repeat).item()
print(
    f"uniform attention: previous-token {uniform_prev:.2f}, "
    f"prefix-matching {uniform_prefix:.2f}"
)
prev_scores = [previous_token_scores(w) for w in weights]  # one (H,) per layer
prefix_scores = [prefix_matching_scores(w, tokens, in_repeat) for w in weights]
untrained_prev = [previous_token_scores(w) for w in untrained_weights]
untrained_prefix = [
    prefix_matching_scores(w, tokens, in_repeat) for w in untrained_weights
]

# %% tags=["plot"]
print("                previous-token     prefix-matching")
print("layer head   untrained  trained   untrained  trained")
for layer, head in np.ndindex(2, H):
    print(
        f"{layer:>5} {head:>4} {untrained_prev[layer][head]:>11.2f} "
        f"{prev_scores[layer][head]:>8.2f} "
        f"{untrained_prefix[layer][head]:>11.2f} "
        f"{prefix_scores[layer][head]:>8.2f}"
    )

# %% [markdown]
# Before training, every head sits near the uniform baseline. After it, the layers
# have split the work. Layer 0 has a head whose previous-token score is far above the
# baseline, and layer 1 heads whose prefix-matching score is close to one: nearly all
# their weight goes to the token that came after the earlier occurrence of the current
# token. Since the period varies, position alone cannot tell them where that is: they
# find the earlier occurrence by its content. That is half of the definition.
#
# ## Scoring what they write: copying
#
# A head can attend to the right token and still do nothing useful with it. Copying is
# measured on what the head writes, in two ways.
#
# - **By its effect.** The model has no layer norm, so the logits are a sum of terms,
#   one per head among them: `attn_ref.training.head_logits` gives each head's own term,
#   $\text{head}_h W_O^{(h)} W_U$. For each query in the repeated part, take the token at
#   the key the head attends to most, and ask how far the head raises that token's logit
#   above its mean logit, and how often that token is the one it raises most. This is
#   Olsson et al.'s definition, measured.
# - **By its weights.** Elhage et al. read copying off a head's *OV circuit*, the
#   $64 \times 64$ matrix $W_E W_V^{(h)} W_O^{(h)} W_U$ that maps a token to the logits
#   the head writes when it attends to it. A matrix that raises each token's own logit
#   has positive eigenvalues: "copying requires positive eigenvalues", while of a random
#   matrix they "expect to have an equal number of positive and negative eigenvalues".
#   `attn_ref.training.copying_scores` sums the eigenvalues up as
#   $\sum_k \lambda_k / \sum_k |\lambda_k|$: 1 if all are positive, near 0 for random
#   weights.

# %%
copying = copying_scores(model, layer=1)  # (H,): from the weights
untrained_copying = copying_scores(untrained, layer=1)
per_head = head_logits(model, tokens, layer=1)  # (B, H, T, V)
top_key = weights[1].argmax(dim=-1)  # (B, H, T): each query's top key
# (B, H, T): the token each head attends to most, at every query
attended = tokens[:, None, :].expand(-1, H, -1).gather(2, top_key)
own = per_head.gather(-1, attended[..., None])[..., 0]  # (B, H, T)
gain = (own - per_head.mean(dim=-1)).transpose(1, 2)[in_repeat]  # (N, H)
is_top = per_head.argmax(dim=-1) == attended  # (B, H, T)
top_share = is_top.transpose(1, 2)[in_repeat].float().mean(dim=0)  # (H,)
print("layer 1       OV eigenvalues    logit of the    raised most")
print("head       untrained  trained   attended token")
for h in range(H):
    print(
        f"{h:>4} {untrained_copying[h]:>14.2f} {copying[h]:>8.2f} "
        f"{gain[:, h].mean():>+13.2f} {top_share[h]:>14.2f}"
    )

# %% [markdown]
# Both layer-1 heads copy, by both measures. Their OV circuits' eigenvalues are nearly
# all positive, where the untrained heads' spread around zero. On the test batch each
# raises the token it attends to by a few nats above its mean logit, and in nearly every
# query that token is the one it raises most.
#
# The cell below names the heads. A previous-token head scores above 0.3 on
# previous-token attention; an induction head scores above 0.3 on prefix matching *and*
# above 0.5 on copying. Both thresholds sit far above what untrained heads score, and
# far below what the trained ones do.

# %%
ROLE, COPYING = 0.3, 0.5
previous_heads = [(0, h) for h in range(H) if prev_scores[0][h] > ROLE]
induction_heads = [
    (1, h)
    for h in range(H)
    if prefix_scores[1][h] > ROLE and copying[h] > COPYING
]
print("previous-token heads:", previous_heads)
print("induction heads:     ", induction_heads)

# %% [markdown]
# Here is the picture from the top of the page again, now drawn from the trained
# model's own weights on the example: the strongest previous-token head at the key, and
# the strongest induction head at the query.

# %% tags=["plot"]
prev_head = int(prev_scores[0].argmax())  # the strongest previous-token head
ind_head = max(induction_heads, key=lambda lh: prefix_scores[1][lh[1]])[1]
trained_previous = example_weights[0][0, prev_head, key].numpy()  # (T,)
trained_induction = example_weights[1][0, ind_head, query].numpy()  # (T,)
figure_to_svg(
    circuit_picture(
        trained_previous,
        trained_induction,
        (f"layer 0 head {prev_head}", f"layer 1 head {ind_head}"),
    ),
    alt=f"The same circuit, drawn from the trained model on the example. "
    f"Layer 0 head {prev_head} at position {key} puts weight "
    f"{trained_previous[key - 1]:.2f} on position {key - 1}; layer 1 head "
    f"{ind_head} at query {query} puts weight {trained_induction[key]:.2f} "
    f"on key {key}, the token after the earlier {seq[query]}.",
)

# %% [markdown]
# On this example, both trained heads put most of their weight where the picture at the
# top put all of it: the previous token, and the key after the earlier copy.
#
# ## Which heads the model needs
#
# A score shows what a head does, not whether the model depends on it. To find out, the
# next cell silences heads and measures the loss on the repeated part again.
# `attn_ref.training.without_heads` copies the model and zeroes the block of $W_O$ that
# a head's output goes through. A layer's output is
# $\sum_h \text{head}_h W_O^{(h)} + b_O$, so this removes that head's contribution and
# nothing else. Each head goes in turn, then each group of heads named above.

# %%
ablations = {f"layer {i} head {h}": [(i, h)] for i, h in np.ndindex(2, H)}
ablations["the previous-token heads"] = previous_heads
ablations["the induction heads"] = induction_heads
ablation_losses = {}
print(f"{'zeroed':<26} loss on the repeated part")
print(f"{'nothing':<26} {baseline_loss:.2f}")
for name, heads in ablations.items():
    with torch.no_grad():
        ablated_logits, _ = without_heads(model, heads)(tokens)
    ablated_losses = next_token_losses(ablated_logits, tokens)
    ablation_losses[name] = ablated_losses[repeated].mean().item()
    print(f"{name:<26} {ablation_losses[name]:.2f}")

# %% [markdown]
# Read the table against the scores. Zeroing a head with low scores leaves the loss
# about where it was: the model does not use it for this task. Zeroing all the
# previous-token heads, or all the induction heads, sends the loss back up to about
# $\ln 64$, where it started: the model cannot continue the repeat without either half
# of the circuit. When a layer has two induction heads, as layer 1 usually has here,
# zeroing one of them raises the loss only part of the way: the other still does the
# job, less well.
#
# ## Why it takes two layers
#
# Give the same task to a model with one layer. To keep the comparison fair it gets as
# many heads, four, all in its one layer, and the same width, data, steps and learning
# rate. It has fewer parameters: one layer's projections instead of two.

# %% tags=["measured"]
torch.manual_seed(0)
one_layer = AttentionOnlyDecoder(
    VOCAB, T, embed_dim=64, num_layers=1, num_heads=4
)
start = time.process_time()
one_layer_history = train_induction(
    one_layer, steps=200, batch_size=32, lr=1e-2, seed=0
)
one_layer_seconds = time.process_time() - start
print(f"200 steps in {one_layer_seconds:.1f} s of CPU time")

# %%
with torch.no_grad():
    one_logits, one_weights = one_layer(tokens)
one_losses = next_token_losses(one_logits, tokens)
one_prefix = prefix_matching_scores(one_weights[0], tokens, in_repeat)
print(f"parameters: {sum(w.numel() for w in one_layer.parameters()):,}")
one_layer_loss = one_losses[repeated].mean().item()
print(f"loss on the repeated part: one layer {one_layer_loss:.2f}")
print(f"two layers, above: {baseline_loss:.2f}")
print("prefix-matching scores of its heads:", one_prefix)

# %% [markdown]
# Its loss on the repeated part stays far above the two-layer model's, and none of its
# heads does prefix matching. It still gets below $\ln 64$: a token seen earlier in the
# sequence is likelier than one never seen, and one layer can learn to favour those
# (Elhage et al. find such *copying heads* in one-layer models). But it cannot tell
# which earlier token comes next.
#
# Olsson et al. give the reason in a footnote: "an individual attention head computes
# attention scores only from the source and destination token. Without using
# information written by a second earlier attention head, the score from the attended
# token can't be a function of the token that precedes it." To attend to key $j$
# because $x_{j-1} = x_i$, the key at $j$ must carry $x_{j-1}$. In the input stream it
# carries only $x_j$ and its position.
#
# The first layer supplies it. A previous-token head at position $j$ attends to $j - 1$
# and writes what it reads into the stream at $j$. The induction head's key
# projection $W_K$ then reads that part of the stream. Elhage et al. call this
# *K-composition*: "$W_K$ reads in a subspace affected by a previous head".
#
# The trained weights show it. Take the strongest induction head and ask what score a
# query made from token $a$ gives a key made from token $b$.
# `attn_ref.training.token_scores` computes these $64 \times 64$ scores from the
# weights alone, in two ways. In the *direct* way, the key is made from $b$'s own
# embedding, $k_b = E_b W_K$. *Through* a head of layer 0, the key is made from what
# that head writes when it attends to a position holding $b$:
#
# $$
# k_b = (E_b W_V^{(h_0)} + b_V^{(h_0)}) \, W_O^{(h_0)} W_K
# $$
#
# For a previous-token head, that is what it writes at the position after $b$. Each
# row's largest score is the token that query prefers. (The scores leave the positions
# out; `token_scores`' documentation says what that sets aside.)

# %%
# (V, V): one row per query's token, one column per key's token
direct = token_scores(model, ind_head)
through = [token_scores(model, ind_head, through=h) for h in range(H)]


def on_diagonal(scores):
    """The share of query tokens whose top-scoring key token is their own."""
    own = scores.argmax(dim=1) == torch.arange(len(scores))
    return own.float().mean().item()


print(f"induction head: layer 1 head {ind_head}")
print(f"previous-token head: layer 0 head {prev_head}")
direct_share = on_diagonal(direct)
print(f"direct: {direct_share:.2f} of the query tokens prefer their own token")
for h in range(H):
    print(f"through layer 0 head {h}: {on_diagonal(through[h]):.2f}")

# %% tags=["plot"]
fig, axes = plt.subplots(1, 2, figsize=(4.5, 2.6), layout="constrained")
panels = [(direct, "direct")]
panels.append((through[prev_head], f"through layer 0 head {prev_head}"))
for ax, (scores, title) in zip(axes, panels, strict=True):
    ax.imshow(scores, cmap="viridis")
    ax.set_title(title, fontsize=11)
    ax.set_xlabel("key's token b")
    ax.set_xticks([0, 32, 63])
    ax.set_yticks([0, 32, 63])
axes[0].set_ylabel("query's token a")
figure_to_svg(
    fig,
    alt=f"Two {VOCAB} by {VOCAB} maps of the scores of layer 1 head "
    f"{ind_head}, from a query token to a key token, yellow for the highest. "
    f"Direct, from the key's own token: no diagonal ({direct_share:.0%} of "
    f"rows peak on it). Through the previous-token head: a yellow diagonal "
    f"({on_diagonal(through[prev_head]):.0%} of rows).",
)

# %% [markdown]
# Through the previous-token head, the scores have a yellow diagonal (yellow is the
# highest score of each map): a query of token $a$ scores highest the key whose
# *previous* token is $a$. That is prefix matching, written in the weights. The direct
# path shows no diagonal: the key's own token is not what the head looks for. Through a
# layer-0 head that is not a previous-token head, if there is one, there is no diagonal
# either.
#
# <details class="note">
# <summary>Going deeper: the other way to build an induction head</summary>
#
# Elhage et al. note a second mechanism, open to models whose position embeddings are
# added into the residual stream, as here, and Olsson et al. describe it in GPT-2. A
# first-layer head attends to the earlier occurrence of the current token itself and
# copies its *position*; the induction head then uses that position in its *query*
# (Q-composition) to attend one position further.
# The scores, the ablations and the diagonal above say which mechanism this model uses:
# the layer-0 heads that matter look at the previous token, and a layer-0 head that
# does not is not needed. The token scores also leave out what the query reads from
# layer 0, which is where Q-composition would show.
#
# </details>
#
# ## Other seeds
#
# One training run could be a lucky one. The folded cell below trains both models again,
# with the same recipe, from seeds 1, 2 and 3, and keeps them: the site's tests check
# every claim of this page on all four seeds, from these very models. Each is measured
# on a test batch of its own. For each seed, the table gives the best previous-token
# score in layer 0, and the lowest prefix-matching and copying scores among the
# induction heads it names; then the loss on the repeated part: the floor of a perfect
# one-token head, the trained model, the model with its previous-token heads zeroed,
# with its induction heads zeroed, and the one-layer model. Seed 0 is this page's model.

# %% tags=["plot"]
SEEDS = (1, 2, 3)
two_layer, one_layer_models = {0: model}, {0: one_layer}
histories, untrained_models = {0: history}, {0: untrained}
seconds = {0: (train_seconds, one_layer_seconds)}


def cpu_trained(seed, num_layers, num_heads):
    """A model of this page, trained from `seed`; its history and CPU time."""
    torch.manual_seed(seed)
    m = AttentionOnlyDecoder(VOCAB, T, 64, num_layers, num_heads)
    fresh = copy.deepcopy(m)
    begin = time.process_time()
    h = train_induction(m, steps=200, batch_size=32, lr=1e-2, seed=seed)
    return m, fresh, h, time.process_time() - begin


for seed in SEEDS:
    two, fresh, histories[seed], two_seconds = cpu_trained(seed, 2, 2)
    one, _, _, one_seconds = cpu_trained(seed, 1, 4)
    two_layer[seed], one_layer_models[seed] = two, one
    untrained_models[seed], seconds[seed] = fresh, (two_seconds, one_seconds)


def figures(seed):
    """Scores and losses on the repeated part of the seed's own batch."""
    two, one = two_layer[seed], one_layer_models[seed]
    g_test = torch.Generator().manual_seed(1000 + seed)  # 1000: seed 0
    seqs, seq_periods = repeated_tokens(256, T, VOCAB, (8, 16), g_test)
    _, seq_repeated = part_masks(seq_periods, T)
    seq_in_repeat = torch.arange(T)[None, :] >= seq_periods[:, None]
    with torch.no_grad():
        _, (w0, w1) = two(seqs)
    prev = previous_token_scores(w0)  # (H,): layer 0
    prefix = prefix_matching_scores(w1, seqs, seq_in_repeat)  # (H,): layer 1
    copies = copying_scores(two, layer=1)  # (H,)
    roles = {
        "previous": [(0, h) for h in range(H) if prev[h] > ROLE],
        "induction": [
            (1, h)
            for h in range(H)
            if prefix[h] > ROLE and copies[h] > COPYING
        ],
    }
    named = [h for _, h in roles["induction"]]
    f = {"previous": prev.max().item(), "roles": roles}
    f["prefix"] = min(prefix[h].item() for h in named)
    f["copying"] = min(copies[h].item() for h in named)
    f["floor"] = one_token_induction_losses(seqs)[seq_repeated].mean().item()
    models = {
        "trained": two,
        "previous zeroed": without_heads(two, roles["previous"]),
        "induction zeroed": without_heads(two, roles["induction"]),
        "one layer": one,
    }
    for name, m in models.items():
        with torch.no_grad():
            seq_losses = next_token_losses(m(seqs)[0], seqs)
        f[name] = seq_losses[seq_repeated].mean().item()
    return f


by_seed = {seed: figures(seed) for seed in (0, *SEEDS)}
print("      best, lowest score     loss on the repeated part")
print("seed  prev. prefix copying  floor trained no prev. no ind. 1 layer")
for seed, f in by_seed.items():
    print(
        f"{seed:>4} {f['previous']:>6.2f} {f['prefix']:>6.2f} "
        f"{f['copying']:>7.2f} {f['floor']:>6.2f} {f['trained']:>7.2f} "
        f"{f['previous zeroed']:>8.2f} {f['induction zeroed']:>7.2f} "
        f"{f['one layer']:>7.2f}"
    )

# %% [markdown]
# Each seed tells the same story, with its own numbers: a previous-token head in
# layer 0; induction heads in layer 1 that both prefix-match and copy; a loss between
# the floor and half of $\ln 64$, that goes back up towards $\ln 64$ when either kind of
# head is zeroed; and a one-layer model that stays far above the two-layer one. Which
# head takes which role may change from seed to seed. The CPU time of each run, as this
# build measured it:

# %% tags=["measured"]
for seed, (two_seconds, one_seconds) in seconds.items():
    print(
        f"seed {seed}: trained in {two_seconds:.1f} s (two layers), "
        f"{one_seconds:.1f} s (one layer)"
    )

# %% [markdown]
# ## The trained model, in a small file
#
# A page that shows this model's heads live, in the browser, needs only what the
# attention weights depend on: the two embeddings, the four projections of layer 0, and
# the query and key projections of layer 1, plus the copying score of each layer-1 head.
# `attn_ref.training.playground_json` writes those to a JSON document, each tensor as
# 8-bit integers times one scale (the format is in the function's documentation), and
# the cell saves it in the current folder. The site's build publishes it, and [the
# induction playground](../playground_induction.md) runs this very model in your
# browser, on tokens you type. Rounding each weight to one of 255 levels changes it a
# little, and so the attention weights; the cell measures by how much, on the test
# batch.

# %%
exported = playground_json(model)
Path("induction_heads.json").write_text(exported)
reloaded = model_from_playground_json(exported)
with torch.no_grad():
    _, reloaded_weights = reloaded(tokens)
pairs = zip(reloaded_weights, weights, strict=True)
changes = torch.cat([(a - b).abs().flatten() for a, b in pairs])
print(f"{len(exported.encode()):,} bytes")
print(f"change of an attention weight: largest {changes.max():.3f}")
print(f"mean change: {changes.mean():.1e}")

# %% [markdown]
# ## Summary
#
# - Trained on random tokens that repeat with varying periods, a two-layer,
#   attention-only model learns, within its 200 steps, to predict the repeated part:
#   its loss there falls from about $\ln 64$ to a small fraction of it, abruptly, after
#   a slow start. It does not reach zero, and no one-token match could: tokens that occur
#   twice in a period leave a floor, which the model approaches.
# - It does so with induction heads, as Olsson et al. define them. A layer-0 head
#   attends to the previous token; layer-1 heads attend to the token that followed the
#   earlier occurrence of the current token (prefix matching), and raise that token's
#   logit (copying, by their effect on the logits and by their OV circuits'
#   eigenvalues).
# - Zeroing the previous-token heads or the induction heads undoes what the model
#   learned; zeroing the other heads changes little.
# - One layer cannot do it: a head's scores depend only on the query's and the key's
#   own tokens and positions. A second layer's key can read what a first-layer head
#   wrote (K-composition), and the trained weights show the match between a query's
#   token and a key's *previous* token.
#
# ## Common pitfalls
#
# **Naming a head by where it attends.** A common mistake is to call every head with a
# high prefix-matching score an induction head. The score says where a head looks, not
# what it writes. The cell flips the sign of one induction head's block of $W_O$: its
# attention does not change at all (layer 1's $W_O$ feeds no attention pattern), but it
# now pushes down the token it finds.

# %%
flipped = copy.deepcopy(model)
d_k = model.layers[1].head_dim
block = slice(ind_head * d_k, (ind_head + 1) * d_k)  # head ind_head's W_O
with torch.no_grad():
    flipped.layers[1].out_proj.weight[:, block] *= -1  # W_O^(h), negated
    flipped_logits, flipped_weights = flipped(tokens)
flipped_prefix = prefix_matching_scores(flipped_weights[1], tokens, in_repeat)
flipped_copying = copying_scores(flipped, layer=1)
flipped_losses = next_token_losses(flipped_logits, tokens)
flipped_loss = flipped_losses[repeated].mean().item()
print(f"layer 1 head {ind_head}, flipped:")
print(f"  prefix matching {flipped_prefix[ind_head]:.2f}, as before")
print(f"  copying {flipped_copying[ind_head]:.2f}")
print(
    f"loss on the repeated part: {flipped_loss:.2f} "
    f"(ln 64 = {math.log(64):.2f})"
)

# %% [markdown]
# The flipped head prefix-matches as well as before, and the loss goes above $\ln 64$,
# worse than a uniform guess. The fix is the definition: check copying too, as the cell
# that named the heads does.
#
# **Expecting the loss to reach zero.** On this task a perfect induction head still pays
# for tokens that occur twice in a period: [How low can the loss go?](#how-low-can-the-loss-go)
# computes that floor on the test batch. Compare a trained loss with the floor, not with
# zero.
#
# **Passing `attn_ref`'s mask to PyTorch.** `torch.nn.MultiheadAttention` reads a boolean
# `attn_mask` the other way round: `True` means *may not attend*. A common mistake is to
# pass the causal mask of this site unchanged. The cell does, on the untrained layer 0.

# %%
x0 = untrained.embed(example)  # (1, T, C)
torch_layer = to_torch_multihead(untrained.layers[0])
with torch.no_grad():
    _, wrong = torch_layer(
        x0, x0, x0, attn_mask=causal_mask(T), average_attn_weights=False
    )
future = wrong[0, 0].triu(diagonal=1).nansum(dim=-1)  # (T,): on later keys
print(f"query 0, weight on later keys: {future[0]:.2f}")
print(f"query {T - 1}, its weights: {wrong[0, 0, -1, :3]} ...")

# %% [markdown]
# The first query attends only to keys after it, and the last, which has no key left,
# gets `nan` weights. The fix is `~mask`, as in the check against PyTorch above.
#
# ## Exercises
#
# **1. Predict, then zero.** Using only the previous-token scores of layer 0, predict
# which of its two heads the loss on the repeated part depends on more. Then zero each
# and check.

# %% tags=["solution"]
predicted = int(prev_scores[0].argmax())  # the higher previous-token score
zeroed = []
for head in range(H):
    with torch.no_grad():
        logits_zeroed, _ = without_heads(model, [(0, head)])(tokens)
    loss = next_token_losses(logits_zeroed, tokens)[repeated].mean().item()
    zeroed.append(loss)
    print(f"layer 0 head {head} zeroed: loss on the repeated part {loss:.2f}")
depends_more = int(np.argmax(zeroed)) == predicted
print("the loss depends more on the predicted head:", depends_more)

# %% [markdown]
# **2. Nothing to match.** Give the model sequences of 32 distinct tokens: no token
# repeats, so no key matches. What is its loss, against $\ln 64$? Where do the
# induction heads put their weight? Measure how spread out it is with the entropy of
# each query's weights, $-\sum_j a_{ij} \ln a_{ij}$, against that of uniform attention.

# %% tags=["solution"]
g2 = torch.Generator().manual_seed(2)
# Each row: the first T of a random order of the vocabulary, so no repeats.
orders = torch.rand(256, VOCAB, generator=g2).argsort(dim=1)  # (B, VOCAB)
distinct = orders[:, :T]  # (B, T)
with torch.no_grad():
    distinct_logits, distinct_weights = model(distinct)
distinct_loss = next_token_losses(distinct_logits, distinct).mean().item()
print(f"loss {distinct_loss:.2f}; ln {VOCAB} = {math.log(VOCAB):.2f}")
w1 = distinct_weights[1]  # (B, H, T, T)
per_query = -(w1 * w1.clamp_min(1e-30).log()).sum(dim=-1)  # (B, H, T)
entropy = per_query[:, :, 8:].mean(dim=(0, 2))  # (H,): queries 8 to T - 1
# Uniform attention over i + 1 keys has entropy ln(i + 1).
uniform_entropy = torch.log(torch.arange(9.0, T + 1)).mean()
print(f"entropy of layer 1's heads: {entropy}; uniform: {uniform_entropy:.2f}")
# With nothing to match, the induction heads still put nearly all their weight
# on a few keys, and the model's predictions are confident and wrong: its loss
# is above ln 64, worse than a uniform guess. Elhage et al.'s models attend to
# a start-of-text token when nothing matches; this one has no such token to
# rest on.

# %% [markdown]
# **3. Periods it never saw.** The model trained on periods from 8 to 16. Measure its
# loss on the repeated part for periods of 4 and 24.

# %% tags=["solution"]
unseen = {}
for period in (4, 24):
    seqs, seq_periods = repeated_tokens(256, T, VOCAB, (period, period), g2)
    _, seq_repeated = part_masks(seq_periods, T)
    with torch.no_grad():
        seq_losses = next_token_losses(model(seqs)[0], seqs)
    unseen[period] = seq_losses[seq_repeated].mean().item()
    print(f"period {period}: loss on the repeated part {unseen[period]:.2f}")
# Still far below ln 64: an induction head finds the earlier occurrence by its
# content, wherever it is, so periods it never saw work too, as long as the
# repeat fits.

# %% [markdown]
# **4. Why the period varies.** Train the one-layer model again, on sequences whose
# period is always 16. Measure its loss on the repeated part of such sequences, and on
# sequences of varying period. Does it hold for the other seeds?

# %% tags=["solution"]
fixed_models = {}
for seed in (0, *SEEDS):
    torch.manual_seed(seed)
    fixed_models[seed] = AttentionOnlyDecoder(VOCAB, T, 64, 1, 4)
    train_induction(
        fixed_models[seed], 200, 32, lr=1e-2, periods=(16, 16), seed=seed
    )
fixed_losses = {}
for name, low in (("period 16", 16), ("periods 8 to 16", 8)):
    seqs, seq_periods = repeated_tokens(256, T, VOCAB, (low, 16), g2)
    _, seq_repeated = part_masks(seq_periods, T)
    by_model = []
    for fixed in fixed_models.values():
        with torch.no_grad():
            seq_losses = next_token_losses(fixed(seqs)[0], seqs)
        by_model.append(seq_losses[seq_repeated].mean().item())
    fixed_losses[name] = by_model[0]
    shown = ", ".join(f"{loss:.2f}" for loss in by_model)
    print(f"{name}: loss on the repeated part, seeds 0 to 3: {shown}")
# With one fixed period, one layer is enough: the next token always sits 15
# positions back, which a head can find by position alone. On other periods the
# token there is the wrong one, and the model does worse than a uniform guess,
# on every seed.

# %% [markdown]
# ## References
#
# - Nelson Elhage, Neel Nanda, Catherine Olsson et al. [A Mathematical Framework for
#   Transformer Circuits](https://transformer-circuits.pub/2021/framework/index.html).
#   Transformer Circuits Thread, 2021. Attention-only transformers, the residual stream,
#   OV circuits and the eigenvalue test of copying ("Detecting Copying Behavior"),
#   Q-, K- and V-composition, copying heads in one-layer models, and induction heads in
#   two-layer models, which it names: "the creation of what we call induction heads".
# - Catherine Olsson, Nelson Elhage, Neel Nanda et al. [In-context Learning and
#   Induction Heads](https://transformer-circuits.pub/2022/in-context-learning-and-induction-heads/index.html).
#   Transformer Circuits Thread, 2022 ([arXiv:2209.11895](https://arxiv.org/abs/2209.11895)).
#   The definition of induction heads by prefix matching and copying on repeated random
#   tokens, the prefix matching score, the phase change, the footnote on why induction
#   heads need composition, and the positional mechanism seen in GPT-2.
# - PyTorch: [`torch.nn.MultiheadAttention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html)
#   (its boolean masks mean *may not attend*) and
#   [`torch.optim.AdamW`](https://docs.pytorch.org/docs/stable/generated/torch.optim.AdamW.html).
#
# Next: [the induction playground](../playground_induction.md) runs this page's model
# in your browser, on tokens you type.

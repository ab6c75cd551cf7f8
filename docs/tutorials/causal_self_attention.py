# %% [markdown]
# # Self-attention with a causal mask
#
# A model that writes text, such as GPT, predicts each token from the ones before it. Reading
# *Alice met Bob she*, it must guess *Bob* from *Alice met* alone, so *met* may not look at
# *Bob*: each token may look only at itself and the tokens before it. This page adds that rule,
# the **causal mask**, to the head of [page 2](linear_to_self_attention.md), and runs it on a
# batch of sentences. Shapes follow the [notation](../notation.md): a batch is $(B, T, C)$.
# The cells run in order, as one notebook.
#
# The picture is the whole step. The scores of page 2 get $-\infty$ wherever a key comes after
# its query (above the diagonal); the softmax turns $-\infty$ into a weight of exactly 0
# (hatched), and each row shares its weight among the tokens it may see.

# %% tags=["plot"]
import math

import torch

from attn_ref.diagrams import Box, arrow, canvas, grid, note, outline
from attn_ref.examples import (
    SENTENCE,
    SENTENCE_TOKENS,
    SENTENCE_W_K,
    SENTENCE_W_Q,
    SENTENCE_W_V,
)
from attn_ref.plotting import figure_to_svg

torch.set_grad_enabled(False)  # forward passes only
tokens = SENTENCE_TOKENS
W = [torch.tensor(M) for M in (SENTENCE_W_Q, SENTENCE_W_K, SENTENCE_W_V)]
X_drawn = torch.tensor(SENTENCE)  # (T, C)
Q_, K_, V_ = (X_drawn @ M for M in W)
scores_drawn = Q_ @ K_.T / math.sqrt(K_.shape[-1])  # (T, T)
T_drawn = len(tokens)
sees = torch.tril(torch.ones(T_drawn, T_drawn, dtype=torch.bool))
weights_drawn = torch.softmax(
    scores_drawn.masked_fill(~sees, -math.inf), dim=-1
)
fig, ax = canvas(9.4, 16.4, scale=0.36)
# The masked scores drawn as the map's lowest colour, each cell's word in
# the ink that stands out from its colour, in both schemes.
largest = scores_drawn[sees].abs().max().item()
masked_words = [
    [f"{s:.2f}" if ok else "−∞" for s, ok in zip(row, seen, strict=True)]
    for row, seen in zip(scores_drawn.tolist(), sees.tolist(), strict=True)
]
panels = [
    (scores_drawn, "scores Q Kᵀ / √2", {"decimals": 2}),
    (
        scores_drawn.masked_fill(~sees, -largest),
        "+ the mask: −∞ where\nthe key comes later",
        {"labels": masked_words},
    ),
    (
        weights_drawn,
        "softmax along\neach row",
        {"decimals": 2, "mask": sees, "cmap": "viridis"},
    ),
]
for n, (values, label, options) in enumerate(panels):
    top = 1.5 + 5.4 * n
    box = grid(
        ax,
        values,
        2.2,
        top,
        label=label if n == 0 else None,
        row_names=tokens,
        column_names=tokens if n == 0 else None,
        **options,
    )
    if n < 2:
        arrow(ax, box.bottom, (box.bottom[0], box.bottom[1] + 1.3))
        note(ax, 4.5, box.bottom[1] + 0.7, panels[n + 1][1], ha="left")
outline(ax, Box(2.2, 12.3 + 1, 4, 1))  # met's row
figure_to_svg(
    fig,
    alt="Three 4 by 4 grids for Alice, met, Bob, she, a row per query. The "
    "scores; the same with every cell above the diagonal set to minus "
    "infinity; and the weights after a softmax along each row, hatched above "
    f"the diagonal. Met's row, framed, gives {weights_drawn[1, 0]:.2f} to "
    f"Alice; she's row gives {weights_drawn[3, 0]:.2f} to Alice.",
    kind="diagram",
)

# %% [markdown]
# For the queries $Q$, keys $K$ and values $V$ of one sentence, causal self-attention is
#
# $$
# \begin{gathered}
# \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V,
# \\
# M_{ij} = \begin{cases} 0 & j \le i, \\ -\infty & j > i, \end{cases}
# \end{gathered}
# $$
#
# and $e^{-\infty} = 0$: each query spreads its weight over its own past only.
#
# ## The mask in code
#
# The head is page 2's, with its hand-set $W_Q$, $W_K$, $W_V$ from `attn_ref.examples`, applied
# as `X @ W` (what its `nn.Linear` layers compute). `torch.tril` keeps the lower triangle of a
# matrix, the diagonal included: on a matrix of ones, it is `True` where key $j$ comes at or
# before query $i$. `masked_fill` writes $-\infty$ where the mask is `False`.

# %%
import math

import torch

import attn_ref.examples as ex

X = torch.tensor(ex.SENTENCE)  # (T, C) = (4, 6): Alice, met, Bob, she
W_Q = torch.tensor(ex.SENTENCE_W_Q)  # (C, d_k) = (6, 2)
W_K = torch.tensor(ex.SENTENCE_W_K)
W_V = torch.tensor(ex.SENTENCE_W_V)
Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k) each
T, d_k = Q.shape
scores = Q @ K.T / math.sqrt(d_k)  # (T, T)
allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))  # True: j <= i
masked = scores.masked_fill(~allowed, -math.inf)  # (T, T)
weights = torch.softmax(masked, dim=-1)  # (T, T)
print(weights.numpy().round(2))

# %% [markdown]
# Above the diagonal every weight is exactly 0, and every row still sums to one. *Alice* sees
# only herself. *she* sees the whole sentence and still finds *Alice*. The mask changes *met*
# most: without it, *met* split its weight between the two names; now it may not see *Bob*
# yet, and takes *Alice* alone.

# %% tags=["plot"]
unmasked = torch.softmax(scores, dim=-1)  # (T, T): page 2's weights
fig, ax = canvas(9.6, 5.4, scale=0.4)
for n, (row, seen, label) in enumerate(
    [
        (unmasked[1], None, "met, no mask"),
        (weights[1], allowed[1], "met, causal"),
    ]
):
    box = grid(
        ax,
        row,
        3.4,
        1.3 + 2.2 * n,
        cmap="viridis",
        decimals=2,
        mask=seen,
        column_names=SENTENCE_TOKENS if n == 0 else None,
    )
    note(ax, 3.2, box.center[1], label, ha="right", fontsize=11)
    output = (row @ V).tolist()
    note(
        ax,
        7.6,
        box.center[1],
        f"→ ({output[0]:.2f}, {output[1]:.2f})",
        ha="left",
    )
note(ax, 8.4, 0.55, "output\n(Alice, Bob)", fontsize=10)
figure_to_svg(
    fig,
    alt="Met's row of weights over Alice, met, Bob, she. With no mask, "
    f"{unmasked[1, 0]:.2f} to Alice and {unmasked[1, 2]:.2f} to Bob; with the "
    f"causal mask, Bob and she are hatched and Alice gets "
    f"{weights[1, 0]:.2f}. "
    "The output moves from half Alice, half Bob to Alice.",
)

# %% [markdown]
# <details class="note">
# <summary>Going deeper: why −∞, and not a large negative number?</summary>
#
# With $-\infty$ a masked weight is exactly zero in every number format and at every size of
# the scores. A finite fill, such as $-10^{9}$ or the $-10\,000$ some code adds, is zero only
# once its exponential underflows, and that depends on both
# ([measured in depth](causal_in_depth.md#finite-fills)).
#
# </details>
#
# ## A batch of sentences
#
# A model reads many sentences at once, stacked into a batch $x$ of shape $(B, T, C)$. Here
# $B = 2$: the sentence, and *Bob met Alice she*. `x @ W_Q` multiplies the last axis, so
# the queries are $(B, T, d_k)$. `k.transpose(-2, -1)` swaps the last two axes of the keys,
# so one product gives every sentence its own $(T, T)$ scores; the one $(T, T)$ mask applies to
# every sentence (PyTorch broadcasts it over $B$).

# %%
order = [2, 1, 0, 3]  # Bob met Alice she
x = torch.stack([X, X[order]])  # (B, T, C) = (2, 4, 6)
q, k, v = x @ W_Q, x @ W_K, x @ W_V  # (B, T, d_k) each
scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, T, T)
weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
out = weights @ v  # (B, T, T) @ (B, T, d_v) -> (B, T, d_v)
print(
    "x:",
    tuple(x.shape),
    " scores:",
    tuple(scores.shape),
    " out:",
    tuple(out.shape),
)
print("met's output (Alice, Bob), each sentence:")
print(out[:, 1].numpy().round(3))

# %% tags=["plot"]
fig, ax = canvas(11.6, 7.9, scale=0.38)  # fits a phone
for b, words in enumerate(
    [SENTENCE_TOKENS, [SENTENCE_TOKENS[i] for i in order]]
):
    left = 1.6 + 5.8 * b
    grid(
        ax,
        weights[b],
        left,
        2.3,
        cmap="viridis",
        decimals=2,
        mask=allowed,
        row_names=words,
        column_names=words,
        label=f"sentence {b}: weights[{b}]",
    )
    outline(ax, Box(left, 2.3 + 1, 2, 1))  # met's row: what it may see
note(ax, 5.8, 7.3, f"weights: (B, T, T) = {tuple(weights.shape)}", fontsize=11)
figure_to_svg(
    fig,
    alt="The causal weights of the two sentences of the batch, side by side, "
    "each 4 by 4 and hatched above the diagonal. In 'Alice met Bob she', met "
    f"gives {weights[0, 1, 0]:.2f} to Alice; in 'Bob met Alice she', met "
    "gives "
    f"{weights[1, 1, 0]:.2f} to Bob, the only name before it. She gives most "
    "of her weight to Alice in both.",
)

# %% [markdown]
# In each sentence *met* takes the name before it, and *she* finds *Alice* wherever she sits:
# the head matches features, not places.
#
# ## The head, checked against PyTorch
#
# The steps fit in one function. PyTorch's `scaled_dot_product_attention` with
# `is_causal=True` applies the same mask; the two agree up to rounding.

# %%
import torch.nn.functional as F


def causal_self_attention(x):  # (B, T, C) -> (B, T, d_v), the layers above
    q, k, v = x @ W_Q, x @ W_K, x @ W_V  # (B, T, d_k) each
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, T, T)
    T = x.shape[1]
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)
    weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
    return weights @ v  # (B, T, T) @ (B, T, d_v) -> (B, T, d_v)


reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)
print(
    "same as PyTorch's:", torch.allclose(causal_self_attention(x), reference)
)

# %% [markdown]
# ## The causal property
#
# Because of the mask, the output at position $i$ depends only on tokens $0, \dots, i$. Replace
# *Bob* with *Carol*, another female name, and only the outputs from position 2 on may move.
# *she* now has two female names to choose from; *Alice* and *met* do not change, to the last
# bit.

# %% tags=["check"]
CAROL = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]  # a name, female; neither Alice nor Bob
x_carol = x[:1].clone()  # (1, T, C): Alice met Bob she
x_carol[0, 2] = torch.tensor(CAROL)  # Alice met Carol she
before, after = causal_self_attention(x[:1]), causal_self_attention(x_carol)
moved = (
    (after - before).abs().amax(dim=-1)[0]
)  # (T,): how far each output moved
print("Alice and met exactly unchanged:", bool((moved[:2] == 0).all()))
print("she's output before (Alice, Bob):", before[0, 3].numpy().round(3))
print("she's output after:              ", after[0, 3].numpy().round(3))

# %% tags=["plot"]
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

fig, ax = canvas(10.2, 6.0, scale=0.42)
carol_words = ["Alice", "met", "Carol", "she"]
xs = [1.9 + 2.3 * j for j in range(T)]


def token_box(x, y, text, colour):
    ax.add_patch(
        FancyBboxPatch(
            (x - 0.9, y - 0.4),
            1.8,
            0.8,
            boxstyle="round,pad=0.05",
            fc=colour,
            ec="black",
        )
    )
    note(ax, x, y, text, fontsize=11)


for j, word in enumerate(carol_words):  # the inputs, Bob changed to Carol
    token_box(xs[j], 1.0, word, "#f8dcc0" if j == 2 else "#cfe0f5")
for i in range(T):  # output i reads the tokens 0..i
    for j in range(i + 1):
        changed = j == 2
        ax.add_patch(
            FancyArrowPatch(
                (xs[j], 1.45),
                (xs[i], 4.05),
                arrowstyle="-|>",
                mutation_scale=10,
                lw=2.2 if changed else 0.8,
                color="#c0392b" if changed else "0.55",
            )
        )
for i in range(T):  # the outputs, and how far each moved
    token_box(xs[i], 4.5, f"{moved[i]:.2f}", "#ffffff")
note(ax, 5.35, 5.5, "how far each output moved", fontsize=11)
note(ax, 0.1, 1.0, "in", ha="left", fontsize=10)
note(ax, 0.1, 4.5, "out", ha="left", fontsize=10)
figure_to_svg(
    fig,
    alt="The tokens Alice, met, Carol and she above their outputs. Each "
    "output has an arrow from itself and every token before it; the arrows "
    "from Carol, the changed token, are thick and red, and reach only Carol's "
    "and she's outputs. Under each output, how far it moved: "
    + ", ".join(f"{m:.2f}" for m in moved.tolist())
    + ".",
    kind="diagram",
)

# %% [markdown]
# ## Common pitfalls
#
# <a id="mask-after-softmax"></a>**Masking the weights instead of the scores.** Setting the future
# weights to zero *after* the softmax, `torch.softmax(scores, -1) * allowed`, leaves rows that no
# longer sum to one: *met*'s loses the share *Bob* had. The fix: set the scores to $-\infty$
# before the softmax, which shares each row among the keys it may see.

# %% tags=["check"]
after_softmax = torch.softmax(scores, dim=-1) * allowed  # (B, T, T): wrong
print(
    "row sums, masked after:  ", after_softmax[0].sum(dim=-1).numpy().round(2)
)
print("row sums, masked before: ", weights[0].sum(dim=-1).numpy().round(2))

# %% [markdown]
# <a id="leaky-mask"></a>**`torch.tril(torch.ones(T, T), diagonal=1)`.** The offset keeps one
# diagonal more: each token sees the next one too. The shape and the row sums look right; the
# causal property catches it. With Bob changed to Carol, *met* moves:


# %% tags=["check"]
def head_with(allowed, x):  # the head, with the mask as an argument
    q, k, v = x @ W_Q, x @ W_K, x @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
    return weights @ v


leaky = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=1)
for name, mask in (("diagonal=1", leaky), ("tril", allowed)):
    change = head_with(mask, x_carol) - head_with(mask, x[:1])
    moved_at = torch.nonzero(change.abs().amax(dim=-1)[0]).flatten()
    print(f"{name}: outputs that moved:", [carol_words[i] for i in moved_at])

# %% [markdown]
# ## Exercises
#
# **1. The first token.** Predict *Alice*'s output for any scores at all. Then check it on both
# sentences of the batch.

# %% tags=["solution"]
print("first outputs:", out[:, 0].tolist())
print("first values: ", v[:, 0].tolist())
print("equal:", torch.equal(out[:, 0], v[:, 0]))
# Position 0 may see only itself: one score, a softmax over one key, weight
# exactly 1. Its output is its own value, whatever the scores.

# %% [markdown]
# **2. All scores zero.** With every score 0, what does causal attention compute at position
# $i$? Predict, then compare with the running mean of the values.

# %% tags=["solution"]
zero = torch.zeros(T, T).masked_fill(~allowed, -math.inf)  # (T, T)
average = torch.softmax(zero, dim=-1)  # row i: 1 / (i + 1) on keys 0..i
print(average.numpy().round(2))
running_mean = v.cumsum(dim=1) / torch.arange(1, T + 1).view(T, 1)
print("equal to the running mean:", torch.allclose(average @ v, running_mean))
# e^0 = 1 for each key a query may see, so row i gives 1 / (i + 1) to each:
# the mean of the values so far. Scores turn this plain average into a
# weighted one.

# %% [markdown]
# **3. A longer query.** Multiply every score of *met* by $\lambda = 0$, 1 and 10, under the
# causal mask. Predict its weights first.

# %% tags=["solution"]
for factor in (0, 1, 10):
    row = (factor * scores[0, 1]).masked_fill(~allowed[1], -math.inf)
    print(f"lambda = {factor:2}:", torch.softmax(row, dim=-1).numpy().round(3))
# lambda = 0: an even split over what met may see (Alice, met). Large
# lambda: nearly all the weight on the largest score, Alice. The future
# keys stay at exactly 0 for every lambda.

# %% [markdown]
# ## References
#
# - Vaswani et al. [Attention Is All You Need](https://arxiv.org/abs/1706.03762), NeurIPS
#   2017, section 3.2.3: the decoder's masked self-attention, "setting to $-\infty$" the
#   scores of illegal connections.
# - Andrej Karpathy. [Let's build GPT](https://www.youtube.com/watch?v=kCc8FmEb1nY), 2023: the
#   causal mask built with `torch.tril`, and the average of the past.
# - PyTorch:
#   [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html)
#   (`is_causal`) and [`torch.tril`](https://docs.pytorch.org/docs/stable/generated/torch.tril.html).
#
# **Next:** [Scaled dot-product attention and heads](scaled_dot_product_step_by_step.md) shows
# why the scores are divided by $\sqrt{d_k}$, and runs two such heads side by side.

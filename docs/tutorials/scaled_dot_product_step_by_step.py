# ---
# jupyter:
#   search:
#     boost: 2  # page 4 of the core path teaches the scaling and the heads: searches land here
# ---

# %% [markdown]
# # Scaled dot-product attention and heads
#
# The head of [page 3](causal_self_attention.md) gives each token one row of weights, but *she*
# needs two things: *who* (*Alice*) and *what happened* (*met*). **Multi-head attention** runs
# several heads side by side and mixes their outputs. This page shows why scores are divided by
# $\sqrt{d_k}$, then builds it step by step.
#
# Below, *she* goes through two hand-set heads. Head 0 asks *a female name?* and finds *Alice*;
# head 1 asks *the verb?* and finds *met*. Through $W_O$, *she* carries *alice* and *verb*.

# %% tags=["plot"]
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.examples import (
    SENTENCE,
    SENTENCE_HEADS_W_K,
    SENTENCE_HEADS_W_O,
    SENTENCE_HEADS_W_Q,
    SENTENCE_HEADS_W_V,
    SENTENCE_TOKENS,
)
from attn_ref.plotting import figure_to_svg

torch.set_grad_enabled(False)  # forward passes only
tokens = SENTENCE_TOKENS
short = ["name", "verb", "pron.", "fem.", "alice", "bob"]  # the features


def feature_names(ax, x, y):
    """The features' names above a grid at (x, y): smaller than a cell."""
    for j, name in enumerate(short):
        note(ax, x + j + 0.5, y - 0.1, name, va="bottom", fontsize=9)


Wq, Wk, Wv, Wo = (
    torch.tensor(M)
    for M in (
        SENTENCE_HEADS_W_Q,
        SENTENCE_HEADS_W_K,
        SENTENCE_HEADS_W_V,
        SENTENCE_HEADS_W_O,
    )
)
X_drawn = torch.tensor(SENTENCE)  # (T, C)
n, d = 2, 3  # heads, and the width of each
drawn_w, drawn_out = [], []
for h in range(n):
    cols = slice(h * d, (h + 1) * d)
    q_h, k_h, v_h = (X_drawn @ M[:, cols] for M in (Wq, Wk, Wv))
    s = (q_h @ k_h.T / math.sqrt(d)).masked_fill(
        ~torch.tril(torch.ones(4, 4, dtype=torch.bool)), -math.inf
    )
    drawn_w.append(torch.softmax(s, dim=-1))
    drawn_out.append(drawn_w[-1] @ v_h)
she = tokens.index("she")
fig, ax = canvas(11.4, 9.2, scale=0.37)
for h, question in enumerate(("head 0: a female name?", "head 1: the verb?")):
    top = 1.3 + 1.9 * h  # the heads share the tokens' column names
    box = grid(
        ax,
        drawn_w[h][she],
        0.6,
        top,
        cmap="viridis",
        decimals=2,
        column_names=None if h else tokens,
        label=question,
    )
    target = (5.0 + d * h + d / 2, 5.2)  # this head's half of the row below
    arrow(ax, box.right, target, bend=-0.25 if h == 0 else -0.15)
    note(ax, 5.3, top + 0.2, "× V", fontsize=11)
concat = torch.cat([drawn_out[h][she] for h in range(n)])  # (C,)
note(ax, 4.8, 5.8, "she, heads\nside by side", ha="right", fontsize=10)
grid(ax, concat, 5.0, 5.3, decimals=2, vmax=1.0)
ax.plot([5.0 + d] * 2, [5.1, 6.5], color="black", lw=2.5)  # the boundary
grid(ax, concat @ Wo, 5.0, 7.95, decimals=2, vmax=1.0)
feature_names(ax, 5.0, 7.95)
arrow(ax, (6.5, 6.4), (6.5, 7.3))
note(ax, 6.7, 6.85, "× W_O", ha="left", fontsize=11)
note(ax, 4.8, 8.45, "output", ha="right", fontsize=10)
figure_to_svg(
    fig,
    alt="She's row of weights in two heads. Head 0 gives "
    f"{drawn_w[0][she, 0]:.2f} to Alice; head 1 gives "
    f"{drawn_w[1][she, 1]:.2f} "
    "to met. Each row times its head's values gives three numbers; side by "
    "side, with a line between the heads, they make six; times W_O they "
    "become the output, which carries "
    f"alice {float((concat @ Wo)[4]):.2f} and verb "
    f"{float((concat @ Wo)[1]):.2f}.",
    kind="diagram",
)

# %% [markdown]
# <a id="the-variance-argument"></a>
#
# ## Why divide by √dₖ
#
# Take $q$ and $k$ of width $d_k$ with independent components of mean 0 and variance 1, as
# Vaswani et al. (2017, footnote 4) assume. Their dot product sums $d_k$ terms $q_m k_m$, each of
# mean 0 and variance $\mathbb{E}[q_m^2]\,\mathbb{E}[k_m^2] = 1$, and independent variances add:
#
# $$
# \operatorname{Var}(q \cdot k) = d_k :
# $$
#
# the scores spread like $\sqrt{d_k}$; divided by $\sqrt{d_k}$, their variance is 1 at every
# width. Widely spread scores make a nearly one-hot softmax, which passes almost no gradient
# back to $W_Q$ and $W_K$.
#
# <details class="note">
# <summary>Going deeper: why a saturated softmax learns slowly</summary>
#
# The softmax's derivative is $\partial p_i / \partial z_j = p_i (\delta_{ij} - p_j)$: near zero
# wherever every $p_i$ is near 0 or 1. In the paper's words, large dot products push "the
# softmax function into regions where it has extremely small gradients" (section 3.2.1). The
# [in-depth page](heads_in_depth.md#the-scale-measured-three-ways) measures the gradient's
# size too. A model could instead learn a $W_Q$ $\sqrt{d_k}$ times smaller, but it would start
# training saturated.
#
# </details>

# %% tags=["plot"]
generator = torch.Generator().manual_seed(0)
widths, trials, keys = [1, 4, 16, 64, 256, 1024], 500, 10
spread = {"plain": [], "scaled": []}  # per width: std of scores, top weight
for width in widths:
    q_draw = torch.randn(trials, 1, width, generator=generator).double()
    k_draw = torch.randn(trials, keys, width, generator=generator).double()
    z = (q_draw @ k_draw.mT)[:, 0]  # (trials, keys): variance width
    for name, s in (("plain", z), ("scaled", z / math.sqrt(width))):
        p = torch.softmax(s, dim=-1)  # (trials, keys)
        spread[name].append([s.std(), p.amax(-1).mean()])
table = {name: torch.tensor(rows) for name, rows in spread.items()}
fig, axes = plt.subplots(
    2, 1, figsize=(4.4, 2.4), sharex=True, layout="constrained"
)
for name, style in (("plain", "o-"), ("scaled", "s--")):
    label = "q·k" if name == "plain" else "q·k / √dₖ"
    axes[0].plot(widths, table[name][:, 0], style, label=label)
    axes[1].plot(widths, table[name][:, 1], style)  # the same lines as above
axes[0].plot(widths, np.sqrt(widths), ":", color="gray", label="√dₖ")
axes[1].axhline(1 / keys, color="gray", linestyle=":", label="uniform")
axes[0].set(ylabel="score std", yscale="log")
axes[1].set(ylabel="top weight", ylim=(0, 1.05), xlabel="dₖ")
axes[1].set_xscale("log", base=2)
for ax in axes:
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=9, loc="center left", bbox_to_anchor=(1, 0.5))
figure_to_svg(
    fig,
    alt=f"Against d_k on a log scale, {trials} queries of {keys} keys at each "
    "width: unscaled, the spread of the scores grows like the square root of "
    "d_k and the largest weight rises towards 1; divided by the square root "
    "of d_k, both stay flat.",
)

# %% [markdown]
# Unscaled, the spread follows $\sqrt{d_k}$ and rows drift towards one-hot; scaled, both stay put.
#
# ## Several heads, step by step
#
# With $H$ heads, each head works in $d_k = C / H$ features ([notation](../notation.md)), with
# its own $(C, d_k)$ slice of $W_Q$, $W_K$ and $W_V$. The slices fill one $(C, C)$ matrix per
# role, so one product projects every head. The hand-set matrices here hold two heads.
#
# **1. Project, then split into heads.** `view(B, T, H, d_k)` cuts each token's features into
# $H$ groups; `transpose(1, 2)` brings the heads forward: each is one more batch for page 3.

# %%
import math

import torch

import attn_ref.examples as ex

x = torch.tensor(ex.SENTENCE)[None]  # (B, T, C) = (1, 4, 6)
W_Q = torch.tensor(ex.SENTENCE_HEADS_W_Q)  # (C, C): both heads side by side
W_K = torch.tensor(ex.SENTENCE_HEADS_W_K)
W_V = torch.tensor(ex.SENTENCE_HEADS_W_V)
W_O = torch.tensor(ex.SENTENCE_HEADS_W_O)
B, T, C = x.shape
H = 2  # heads
d_k = C // H  # 3 features per head
Q, K, V = x @ W_Q, x @ W_K, x @ W_V  # (B, T, C) each
# Split: (B, T, C) -> (B, T, H, d_k) -> (B, H, T, d_k)
q, k, v = (M.view(B, T, H, d_k).transpose(1, 2) for M in (Q, K, V))
print("Q:", tuple(Q.shape), "-> q:", tuple(q.shape))

# %% tags=["plot"]
fig, ax = canvas(10.8, 10.4, scale=0.34)
c = 0.55  # the side of a cell
for row, (name, full, split) in enumerate(
    (("Q", Q, q), ("K", K, k), ("V", V, v))
):
    top = 0.95 + 3.15 * row
    box = grid(
        ax,
        full[0],
        1.3,
        top,
        cell=c,
        decimals=0,
        vmax=6.0,
        row_names=tokens,
    )
    note(ax, box.top[0], top - 0.4, f"{name}: (B, T, C)", va="bottom")
    ax.plot(
        [1.3 + d * c] * 2,
        [top, top + 4 * c + 0.1],
        color="black",
        lw=2.5,
    )
    for h in range(H):
        left = 6.4 + (d * c + 0.6) * h
        grid(
            ax,
            split[0, h],
            left,
            top,
            cell=c,
            decimals=0,
            vmax=6.0,
            label=f"head {h}",
        )
    arrow(ax, (box.x + box.width + 0.1, top + 2 * c), (6.3, top + 2 * c))
note(
    ax, 5.4, 9.95, f"each head: (B, H, T, dₖ) = {tuple(q.shape)}", fontsize=11
)
figure_to_svg(
    fig,
    alt="Q, K and V, each 4 tokens by 6 features with a thick line after "
    "feature 2, and to the right of each its two heads, 4 by 3 grids: head 0 "
    "holds features 0 to 2, head 1 features 3 to 5. Each head's pieces have "
    f"the shape (B, H, T, d_k) = {tuple(q.shape)}.",
    kind="diagram",
)

# %% [markdown]
# **2. Scores, mask, softmax, weighted values, in every head at once.** Page 3's lines,
# unchanged: they act on the last two axes, and the $(T, T)$ mask broadcasts over $B$ and $H$.

# %%
scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, H, T, T)
allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)
scores = scores.masked_fill(~allowed, -math.inf)
weights = torch.softmax(scores, dim=-1)  # (B, H, T, T)
heads = weights @ v  # (B, H, T, T) @ (B, H, T, d_k) -> (B, H, T, d_k)

# %% tags=["plot"]
fig, ax = canvas(11.8, 10.7, scale=0.36)
for h, question in enumerate(("head 0: a female name?", "head 1: the verb?")):
    top = 1.1 + 4.8 * h  # the heads share the tokens' column names
    box = grid(
        ax,
        weights[0, h],
        1.4,
        top,
        cmap="viridis",
        decimals=2,
        mask=allowed,
        row_names=tokens,
        column_names=None if h else tokens,
        label=question,
    )
    note(ax, 5.75, top + 2, "×")
    values = grid(ax, v[0, h], 6.1, top + 0.8, cell=0.6, decimals=0, vmax=6.0)
    note(ax, 8.3, top + 2, "=")
    grid(ax, heads[0, h], 8.6, top, decimals=2, vmax=1.0, label=f"head {h}")
    note(ax, values.x + values.width / 2, top + 0.45, "v", fontsize=11)
note(ax, 5.9, 10.3, f"(B, H, T, T) @ (B, H, T, dₖ) → {tuple(heads.shape)}")
figure_to_svg(
    fig,
    alt=f"Each head's causal weights, {T} by {T}, hatched above the diagonal, "
    f"times that head's values, {T} by {d_k}, give the head's output, {T} by "
    f"{d_k}. Head 0 puts its weight on Alice: met gives her "
    f"{weights[0, 0, 1, 0]:.2f} and she {weights[0, 0, 3, 0]:.2f}. Head 1 "
    "puts "
    f"it on met: Bob gives it {weights[0, 1, 2, 1]:.2f} and she "
    f"{weights[0, 1, 3, 1]:.2f}.",
    kind="diagram",
)

# %% [markdown]
# Head 0's weight sits on *Alice*, head 1's on *met*; *Bob* asks head 0 nothing and spreads it.
#
# **3. Merge, then $W_O$.** `transpose(1, 2)` and `reshape(B, T, C)` put each token's heads side
# by side; $W_O$ mixes them. This one copies head 0's *Alice* and *Bob* and head 1's *verb* into
# features; a trained $W_O$ mixes every head into every feature.

# %%
# (B, H, T, d_k) -> (B, T, H, d_k) -> (B, T, C)
merged = heads.transpose(1, 2).reshape(B, T, C)
output = merged @ W_O  # (B, T, C) @ (C, C) -> (B, T, C)

# %% tags=["plot"]
fig, ax = canvas(10.6, 11.0, scale=0.37)
m_box = grid(ax, merged[0], 1.6, 1.3, decimals=2, vmax=1.0, row_names=tokens)
ax.plot([1.6 + d, 1.6 + d], [1.3, 5.55], color="black", lw=2.5)
note(ax, 1.6 + d / 2, 0.85, "head 0", fontsize=11)
note(ax, 1.6 + d * 1.5, 0.85, "head 1", fontsize=11)
note(ax, 7.7, 3.3, "merged\n(B, T, C)", ha="left", fontsize=11)
out_top = 6.9
grid(
    ax,
    output[0],
    1.6,
    out_top,
    decimals=2,
    vmax=1.0,
    row_names=tokens,
)
feature_names(ax, 1.6, out_top)
note(ax, 7.7, out_top + 2, "output\n(B, T, C)", ha="left", fontsize=11)
for i, j in zip(*torch.nonzero(W_O, as_tuple=True), strict=True):
    arrow(ax, (1.6 + i + 0.5, 5.45), (1.6 + j + 0.5, out_top - 0.55))
note(
    ax,
    7.7,
    5.85,
    "× W_O: each 1\nof W_O is an\narrow here",
    ha="left",
    fontsize=10,
)
figure_to_svg(
    fig,
    alt="The merged heads, 4 tokens by 6 features, a thick line between head "
    "0's three features and head 1's. Arrows, one for each 1 in W_O, lead "
    "from head 0's first feature to the output's alice, from its second to "
    "bob, and from head 1's first to verb. The output, 4 by 6 in the "
    f"sentence's features: she's row holds alice {output[0, 3, 4]:.2f} and "
    f"verb {output[0, 3, 1]:.2f}.",
    kind="diagram",
)

# %% [markdown]
# <a id="multi-head-attention"></a>
#
# ## The whole module
#
# With the four matrices in `nn.Linear` layers, the steps make one module; the block runs alone.

# %%
import torch
from torch import nn


class CausalMultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"{n_heads=} must divide {d_model=}")
        self.n_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):  # x: (B, T, C), C = d_model
        B, T, C = x.shape
        H, d_k = self.n_heads, C // self.n_heads
        q = self.W_q(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        k = self.W_k(x).view(B, T, H, d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, H, d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / d_k**0.5  # (B, H, T, T)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        return self.W_o((weights @ v).transpose(1, 2).reshape(B, T, C))


# %% [markdown]
# With the hand-set matrices it gives the steps' output; with random weights, PyTorch's:

# %% tags=["check"]
import torch.nn.functional as F

attention = CausalMultiHeadAttention(d_model=C, n_heads=H)
for layer, M in zip(
    (attention.W_q, attention.W_k, attention.W_v, attention.W_o),
    (W_Q, W_K, W_V, W_O),
    strict=True,
):
    layer.weight.copy_(M.T)  # nn.Linear stores W^T
print("the sentence, same as the steps:", torch.allclose(attention(x), output))

torch.manual_seed(0)
ours = CausalMultiHeadAttention(d_model=8, n_heads=2)  # random weights
x_rand = torch.randn(3, 5, 8)  # (B, T, C)
theirs = nn.MultiheadAttention(8, 2, bias=False, batch_first=True)
in_proj = [ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]
theirs.in_proj_weight.copy_(torch.cat(in_proj))  # (3C, C)
theirs.out_proj.weight.copy_(ours.W_o.weight)
# nn.MultiheadAttention reads a boolean mask the other way round: True =
# may NOT attend (the bugs page: "A mask that means the opposite")
blocked = ~torch.tril(torch.ones(5, 5, dtype=torch.bool))
expected, _ = theirs(x_rand, x_rand, x_rand, attn_mask=blocked)
print(
    "random weights, same as nn.MultiheadAttention:",
    torch.allclose(ours(x_rand), expected, atol=1e-6),
)
split = [
    layer(x_rand).view(3, 5, 2, 4).transpose(1, 2)
    for layer in (ours.W_q, ours.W_k, ours.W_v)
]
sdpa = F.scaled_dot_product_attention(*split, is_causal=True)  # (B, H, T, d_k)
by_sdpa = ours.W_o(sdpa.transpose(1, 2).reshape(3, 5, 8))
print(
    "same as scaled_dot_product_attention(is_causal=True):",
    torch.allclose(ours(x_rand), by_sdpa, atol=1e-6),
)

# %% [markdown]
# **Your turn.** Write it from memory in `my_attention.py`; the command names any failing check:
# shape, projections, softmax, causality, heads, scaling, agreement with PyTorch.
#
# ```bash
# python -m attn_ref.check causal-mha my_attention.py
# ```
#
# ## Common pitfalls
#
# <a id="merge-without-transpose"></a>**`heads.reshape(B, T, C)` without the transpose.** Nothing
# fails, but `reshape` reads head 0 first: *Alice*'s row gets *met*'s head-0 output, a "verb"
# from the future. Fix: `transpose(1, 2)` first.

# %% tags=["check"]
broken = heads.reshape(B, T, C) @ W_O  # no transpose
print("features:     ", ex.SENTENCE_FEATURES)
print("Alice, broken:", broken[0, 0].numpy().round(2))
print("Alice, right: ", output[0, 0].numpy().round(2))

# %% [markdown]
# ## Exercises
#
# **1. One head instead of two.** Run the four $(C, C)$ matrices as *one* head of width $C$.
# Predict *she*'s weights, then compute them.

# %% tags=["solution"]
one = torch.softmax(
    ((Q @ K.transpose(-2, -1)) / math.sqrt(C)).masked_fill(
        ~allowed, -math.inf
    ),
    dim=-1,
)  # (B, T, T): one head sees the sum of both heads' scores
print("she, one head:", one[0, 3].numpy().round(2))
print("she, head 0:  ", weights[0, 0, 3].numpy().round(2))
print("she, head 1:  ", weights[0, 1, 3].numpy().round(2))
# One head adds both questions' scores into one row: Alice and met score
# alike, and she splits its weight between them. Two heads each commit to
# one token, and W_O gets both answers.

# %% [markdown]
# **2. The same vector on every key.** Add one vector $c$ to every key. Do the weights change?
# And if $c$ is added to every query?

# %% tags=["solution"]
c = torch.tensor([1.0, -2.0, 0.5])  # (d_k,): the same for every token
for name, (qq, kk) in {"keys": (q, k + c), "queries": (q + c, k)}.items():
    s = (qq @ kk.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(
        ~allowed, -math.inf
    )
    change = (torch.softmax(s, dim=-1) - weights).abs().max()
    print(f"c added to the {name}: largest change in the weights {change:.2f}")
# Keys: q_i . c is added to all of row i, and a softmax ignores a constant
# added to a row. Queries: c . k_j differs from key to key, so weights move.

# %% [markdown]
# **3. Count the parameters.** How many numbers does `CausalMultiHeadAttention(512, 8)` hold?
# Does the number of heads change it? Predict, then count.

# %% tags=["solution"]
for n_heads in (1, 8, 64):
    count = sum(
        p.numel() for p in CausalMultiHeadAttention(512, n_heads).parameters()
    )
    print(f"{n_heads:2} heads: {count:,} parameters")
print(f"4 C^2 = {4 * 512**2:,}")
# Four (C, C) matrices, whatever H: more heads cut the same matrices into
# narrower slices.

# %% [markdown]
# ## References
#
# - Vaswani et al. [Attention Is All You Need](https://arxiv.org/abs/1706.03762), NeurIPS
#   2017: the scaling and footnote 4 (section 3.2.1); multi-head attention (section 3.2.2).
# - Raschka, *Build a Large Language Model (From Scratch)*, chapter 3
#   ([its code](https://github.com/rasbt/LLMs-from-scratch/tree/main/ch03)): a causal
#   multi-head attention class of the same shape.
# - PyTorch: [`nn.MultiheadAttention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html),
#   [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html).
#
# **Next:** [the transformer block](../concepts/transformer_block.md) puts this module between a
# layer norm and the residual stream.

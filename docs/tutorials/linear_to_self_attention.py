# %% [markdown]
# # From nn.Linear to self-attention
#
# One head of self-attention is three linear layers, scaled scores, a softmax and a weighted
# average. This tutorial starts with one `nn.Linear` and checks it against its formula. It
# then computes self-attention by hand on three tokens of four features each, one step per
# cell, in NumPy.
# Finally it runs the same computation in PyTorch and checks it against PyTorch's own attention
# function and against `attn_ref`, this site's small reference implementation.
#
# It assumes some Python, NumPy and PyTorch, and nothing about attention. The
# [mental model](../concepts/mental_model.md) explains why attention is built this way. Symbols
# and shapes follow the site's [notation](../notation.md): a token is a row vector, and a
# projection multiplies from the right, as in $Q = X W_Q$ with $W_Q$ of shape $(C, d_k)$.
#
# The next tutorials build on this one: a causal mask and a batch, then ten tokens and
# several heads. [Common mistakes](#common-mistakes), at the end, quotes mistakes that are
# easy to make with this code, and shows what the code actually computes.

# %% [markdown]
# ## A linear layer
#
# A linear layer maps an input row $x$ with `in_features` entries to an output row $y$ with
# `out_features` entries:
#
# $$
# y = x W + b ,
# $$
#
# with $W$ of shape `(in_features, out_features)` and $b$ of shape `(out_features,)`. Output $j$
# is the dot product of $x$ with column $j$ of $W$, plus $b_j$.
#
# `nn.Linear(in_features, out_features)` stores the transpose. Its `weight` is $W^\top$, of
# shape `(out_features, in_features)`, one row per output. So it computes
# `x @ weight.T + bias`, which its documentation writes $y = x A^\top + b$ with $A$ the stored
# weight. Any leading axes of `x` (a batch, a sequence of tokens) are carried through.
#
# The first layer has three inputs and one output, and gets the input $x = (1, 2, 3)$. It
# starts from random numbers, so the random seed is fixed first: every run then prints the
# same numbers.

# %%
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# Forward passes only: no gradients, no grad_fn in the printouts.
torch.set_grad_enabled(False)
np.set_printoptions(precision=4, suppress=True)  # four decimals

torch.manual_seed(0)
layer = nn.Linear(in_features=3, out_features=1)
# nn.Linear stores W^T, (1, 3); W is (in_features, out_features).
W = layer.weight.detach().T  # (3, 1)
b = layer.bias.detach()  # (1,)
print(f"W = layer.weight.T, shape {tuple(W.shape)}:")
print(W)
print("b:", b)

x = torch.tensor([1.0, 2.0, 3.0])  # (in_features,) = (3,)
y = layer(x)  # (3,) -> (1,)
y_manual = x @ W + b  # (3,) @ (3, 1) + (1,) -> (1,)
print("layer(x): ", y)
print("x @ W + b:", y_manual)
print("shapes:", tuple(x.shape), "->", tuple(y.shape))
batch = x[None]  # (1, 3): a batch of one input
print("batch:", tuple(batch.shape), "->", tuple(layer(batch).shape))

# %% [markdown]
# ### Comparing floating-point results
#
# The layer and the formula agree on the printed digits. Whether they agree to the last bit
# is another matter. Floating-point arithmetic rounds after every operation, so adding the
# same numbers in another order can change the last bits, and `nn.Linear` does not promise
# to add its products in the order `x @ W + b` does. Computing the formula in float64 shows
# how far the float32 results sit from the exact value they round.

# %%
print("(0.1 + 0.2) + 0.3 =", (0.1 + 0.2) + 0.3)
print("0.1 + (0.2 + 0.3) =", 0.1 + (0.2 + 0.3))

y_float64 = x.double() @ W.double() + b.double()  # in float64
print(f"nn.Linear, float32: {y.item():.9g}")
print(f"x @ W + b, float32: {y_manual.item():.9g}")
print(f"x @ W + b, float64: {y_float64.item():.9g}")
step = torch.finfo(torch.float32).eps * abs(
    y_float64.item()
)  # about one float32 rounding step here
print(
    "float32 layer minus float64 formula, in rounding steps: "
    f"{(y.item() - y_float64.item()) / step:.1f}"
)
print("torch.allclose(y, y_manual):", torch.allclose(y, y_manual))

# %% [markdown]
# The float32 results sit a few rounding steps at most from the float64 value (the
# distance is printed in units of float32's spacing near $y$), as rounding predicts. So the right check allows for it. `torch.allclose` compares with a relative and
# an absolute tolerance, for tensors of any size; `torch.testing.assert_close` does the same
# and, when it fails, says by how much. An exact `==` is the wrong tool.
#
# <details class="note">
# <summary>Going deeper: why the order of additions changes the result</summary>
#
# A float32 number keeps 24 significant bits. After each addition the exact sum is rounded
# to the nearest representable number, so $(a + b) + c$ and $a + (b + c)$ round at different
# places and can differ in the last bit, as the two sums of 0.1, 0.2 and 0.3 above do in
# float64. `nn.Linear` calls `torch.nn.functional.linear`, which hands the products to a
# matrix routine chosen for the input's shape and the hardware. Such routines may split and
# reorder sums for speed, so a bit-for-bit match with a hand-written formula is luck, not a
# guarantee.
#
# </details>

# %% [markdown]
# ## Self-attention on three tokens
#
# Self-attention lets every token of a sequence gather information from all the tokens,
# itself included. The sequence is a matrix $X$ of shape $(T, C)$: $T$ tokens, one per row,
# with $C$ features each. Three linear layers project it to queries $Q = X W_Q$, keys
# $K = X W_K$ and values $V = X W_V$ (here without bias, as in the formula;
# `nn.MultiheadAttention`, for one, adds a bias by default), with $W_Q$ and $W_K$ of shape
# $(C, d_k)$ and $W_V$ of shape $(C, d_v)$. Then
#
# $$
# \operatorname{Attention}(X) =
# \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V ,
# $$
#
# computed in five steps:
#
# 1. project the tokens to queries $Q$, keys $K$ and values $V$;
# 2. score every query against every key: $Q K^\top$, of shape $(T, T)$;
# 3. divide the scores by $\sqrt{d_k}$;
# 4. turn each row of scores into weights with a softmax;
# 5. average the values with those weights.
#
# The three tokens are `attn_ref.examples.THREE_TOKENS`, the data whose weights the doctest
# of `attn_ref.scaled_dot_product_attention` pins. NumPy computes in float64.
#
# ### Step 1: queries, keys and values
#
# Here all three projections are the identity matrix, so that
# $Q = K = V = X$ and every later number can be checked by hand. The section
# [What the identity projections hide](#what-the-identity-projections-hide) shows what this
# choice costs.

# %%
from attn_ref.examples import THREE_TOKENS

X_np = np.array(THREE_TOKENS)  # (T, C) = (3, 4)
C = X_np.shape[-1]  # features per token
W_Q_np = W_K_np = W_V_np = np.eye(C)  # identity, (C, d_k) = (4, 4)
Q_np = X_np @ W_Q_np  # (3, 4) @ (4, 4) -> (3, 4)
K_np = X_np @ W_K_np  # (3, 4) @ (4, 4) -> (3, 4)
V_np = X_np @ W_V_np  # (3, 4) @ (4, 4) -> (3, 4)
print("X:")
print(X_np)
equal = all(np.array_equal(M, X_np) for M in (Q_np, K_np, V_np))
print("Q, K and V all equal X:", equal)

# %% [markdown]
# ### Step 2: scores
#
# Entry $(i, j)$ of $Q K^\top$ is the dot product of query $i$ with key $j$: how well token
# $j$ matches what token $i$ looks for. Row $i$ holds query $i$'s scores for every key.

# %%
scores_np = Q_np @ K_np.T  # (3, 4) @ (4, 3) -> (3, 3)
print("scores = Q K^T:")
print(scores_np)

# %% [markdown]
# ### Step 3: dividing by the square root of d_k
#
# A dot product of two vectors with $d_k$ entries is a sum of $d_k$ terms. When all the
# entries of the two vectors are independent, with mean zero and variance one, the dot
# product has variance $d_k$, so its typical size grows like $\sqrt{d_k}$; the
# [variance argument](../concepts/mental_model.md#the-variance-argument) derives it. Large
# scores push the softmax towards giving one key all the weight. Dividing by $\sqrt{d_k}$
# brings that variance back to one, whatever the width.
#
# $d_k$ is the number of features of a query (and of a key): the **last axis** of $Q$.
# Here it equals $C$ only because the projections are square.

# %%
d_k = Q_np.shape[-1]  # features per query and per key
scaled_np = scores_np / np.sqrt(d_k)  # (3, 3)
print(f"d_k = {d_k}, sqrt(d_k) = {np.sqrt(d_k):.4f}")
print("scores / sqrt(d_k):")
print(scaled_np)

# %% [markdown]
# ### Step 4: softmax
#
# The softmax turns a row of scores $z$ into weights $e^{z_j} / \sum_m e^{z_m}$: positive,
# summing to one, larger for larger scores. Each row is one query, so the sums run over the
# last axis. Subtracting the row's maximum first,
#
# $$
# \operatorname{softmax}(z)_j = \frac{e^{z_j - \max z}}{\sum_m e^{z_m - \max z}} ,
# $$
#
# changes nothing mathematically, since the factor $e^{-\max z}$ cancels. But it keeps every
# exponent at or below zero, so `exp` cannot overflow on large scores
# ([exercise 2](#exercises) shows the overflow).


# %%
def softmax_np(z):
    """Softmax over the last axis, row maximum subtracted first."""
    shifted = z - z.max(axis=-1, keepdims=True)  # (3, 3) - (3, 1)
    exps = np.exp(shifted)
    return exps / exps.sum(axis=-1, keepdims=True)  # (3, 3) / (3, 1)


weights_np = softmax_np(scaled_np)  # (3, 3)
print("weights:")
print(weights_np)
print("row sums:", weights_np.sum(axis=-1))

# %% [markdown]
# ### Step 5: weights times values
#
# Each row of weights is non-negative and sums to one. So each output row is a weighted
# average of the value rows: output row $i$ is $\sum_j a_{ij} v_j$.

# %%
output_np = weights_np @ V_np  # (3, 3) @ (3, 4) -> (3, 4)
print("output = weights V:")
print(output_np)

# %% [markdown]
# ## Reading the weights
#
# Each row of the heatmap is one query, each column one key; the numbers are the weights
# printed above. Equal scores give equal weights. The tokens are counted from 0, as in the
# [notation](../notation.md), and labelled t0, t1 and t2.

# %%
from attn_ref.plotting import attention_heatmap, figure_to_svg

tokens = ["t0", "t1", "t2"]
for query, row in zip(tokens, weights_np, strict=True):
    top = np.isclose(row, row.max())  # (3,): where the largest is
    keys = " and ".join(k for k, t in zip(tokens, top, strict=True) if t)
    print(f"{query}: largest weight {row.max():.4f}, to {keys}")

# %% tags=["plot"]
title = "Identity projections"
ax = attention_heatmap(weights_np, tokens, title=title, vmax=1.0)
figure_to_svg(ax.figure, alt=f"3 by 3 heatmap of the weights: {title}")

# %% [markdown]
# Token 1 keeps most of its attention for itself. Tokens 0 and 2 each have two keys with equal
# top scores, and give those two keys equal weights. Each of those two keys gets less than
# half of the row, because the third key keeps a share.
#
# ## The same computation in PyTorch
#
# In PyTorch the projections are `nn.Linear` layers without bias.
# A layer `nn.Linear(C, d_k)` holds $W_Q^\top$ in its `weight`, of shape $(d_k, C)$, and
# `proj_q(X)` computes $X W_Q$. Here $W_Q = I$ and $I^\top = I$, so the transposition does not
# show. The identity overwrites the random starting weights in place.
#
# <details class="note">
# <summary>Going deeper: setting a layer's weights by hand</summary>
#
# A layer's `weight` is a parameter that requires gradients, and PyTorch refuses to change
# such a tensor in place while it records operations for autograd. This page turned
# recording off at the start (`torch.set_grad_enabled(False)`); elsewhere, wrap the change in
# `with torch.no_grad():`. Much code assigns `weight.data = torch.eye(d_model)`
# instead. That works too, but autograd does not track changes made through `.data`, so it
# cannot warn when such a change breaks a gradient computation.
#
# </details>
#
# The last lines compare four computations of the same attention: NumPy's, PyTorch's by
# hand, `torch.nn.functional.scaled_dot_product_attention` (F.sdpa, which returns the output
# only) and `attn_ref.scaled_dot_product_attention` (which returns the weights too).

# %%
from attn_ref import scaled_dot_product_attention

X_pt = torch.tensor(THREE_TOKENS)  # (T, C) = (3, 4), float32
proj_q = nn.Linear(C, C, bias=False)  # weight: W_Q^T, (d_k, C)
proj_k = nn.Linear(C, C, bias=False)
proj_v = nn.Linear(C, C, bias=False)
for proj in (proj_q, proj_k, proj_v):
    proj.weight.copy_(torch.eye(C))  # W^T = W = I
Q_pt, K_pt, V_pt = proj_q(X_pt), proj_k(X_pt), proj_v(X_pt)  # (3, 4)
scores_pt = Q_pt @ K_pt.T  # (3, 4) @ (4, 3) -> (3, 3)
d_k = Q_pt.shape[-1]
weights_pt = torch.softmax(scores_pt / d_k**0.5, dim=-1)  # (3, 3)
output_pt = weights_pt @ V_pt  # (3, 3) @ (3, 4) -> (3, 4)

# F.sdpa returns the output only; attn_ref returns the weights too.
output_sdpa = F.scaled_dot_product_attention(Q_pt, K_pt, V_pt)
output_ref, weights_ref = scaled_dot_product_attention(Q_pt, K_pt, V_pt)


def gap(a, b):
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return f"{(a - b).abs().max().item():.1e}"


print("largest difference from PyTorch by hand:")
print("  NumPy weights:   ", gap(weights_np, weights_pt))
print("  NumPy output:    ", gap(output_np, output_pt))
print("  F.sdpa output:   ", gap(output_sdpa, output_pt))
print("  attn_ref weights:", gap(weights_ref, weights_pt))
print("  attn_ref output: ", gap(output_ref, output_pt))
# F.sdpa's order: Q and K scaled by d_k^(-1/4) each, then multiplied
f = d_k**-0.25
prescaled = torch.softmax((Q_pt * f) @ (K_pt * f).T, dim=-1) @ V_pt
print("F.sdpa minus Q, K scaled first:", gap(output_sdpa, prescaled))

# %% [markdown]
# All four agree, up to rounding in the last bits. NumPy computed in float64, the others
# in float32. F.sdpa and the hand-written steps both compute in float32, but in another
# order. On these inputs F.sdpa runs its plain "math" implementation, which scales the
# queries and the keys by $d_k^{-1/4}$ each before their product, instead of dividing the
# scores after it (see `_scaled_dot_product_attention_math` in
# [its source](https://github.com/pytorch/pytorch/blob/cf30153c4c131c8164ee7798e5022d810682e2cb/aten/src/ATen/native/transformers/attention.cpp)).
# Each order rounds in other places, so the last bits differ. Written by hand in F.sdpa's
# order, the computation runs the same operations in the same order, and gives the same
# bits here (the last line). `attn_ref` scales the scores after the product, as the
# hand-written steps do, but writes its softmax out (the exponentials, then one division
# by their sum) where `torch.softmax` is one fused routine; the two may round differently
# in the last bit, by at most what the lines above print.
#
# ## What the identity projections hide
#
# Identity projections give numbers one can check by hand, at a price:
#
# - **Q, K and V are the same matrix, X.** In a model the three projections are separate,
#   learned parameters. What a token looks for (its query), what it is matched on (its key)
#   and what it passes on (its value) are three different views of it.
# - **The scores are symmetric.** $Q K^\top = X X^\top$, so token $i$ matches token $j$
#   exactly as well as $j$ matches $i$. With $Q K^\top = X W_Q W_K^\top X^\top$ that no
#   longer holds in general. (The weights were not symmetric even here: each row is divided
#   by its own sum.)
# - **The output copies the input's patterns.** With $V = X$ every output row is an average
#   of input rows, so it inherits features of $X$, such as its repeated columns.
# - **The transposition is invisible.** $I^\top = I$, so `X @ weight` and `X @ weight.T`
#   give the same result, and the wrong one would go unnoticed ([exercise 3](#exercises)).
# - **$d_k = C$.** Square projections hide which width the scale depends on.
#
# Below, the same steps run with random, untrained projections (seeded, so the numbers are
# the same at every run). They go from the four features of a token down to $d_k = 2$, as
# one head of multi-head attention would.

# %%
torch.manual_seed(0)
rand_q = nn.Linear(C, 2, bias=False)  # weight: W_Q^T, (2, 4)
rand_k = nn.Linear(C, 2, bias=False)
rand_v = nn.Linear(C, 2, bias=False)
W_Q = rand_q.weight.detach().T  # (C, d_k) = (4, 2)
Q_r, K_r, V_r = rand_q(X_pt), rand_k(X_pt), rand_v(X_pt)  # (3, 2)
scores_r = Q_r @ K_r.T  # (3, 2) @ (2, 3) -> (3, 3)
d_k = Q_r.shape[-1]  # the last axis of Q: 2, not C
weights_r = torch.softmax(scores_r / d_k**0.5, dim=-1)  # (3, 3)
output_r = weights_r @ V_r  # (3, 3) @ (3, 2) -> (3, 2)
print(f"W_Q = rand_q.weight.T, shape {tuple(W_Q.shape)}:")
print(W_Q)
print("scores = Q K^T:")
print(scores_r)
print("weights:")
print(weights_r)
low, high = weights_r.min().item(), weights_r.max().item()
print(f"weights from {low:.4f} to {high:.4f}; uniform: {1 / 3:.4f}")
for name, identity, random in (
    ("scores", scores_pt, scores_r),
    ("weights", weights_pt, weights_r),
):
    same = [torch.allclose(m, m.T) for m in (identity, random)]
    print(f"{name} symmetric? identity: {same[0]}, random: {same[1]}")
sdpa_r = F.scaled_dot_product_attention(Q_r, K_r, V_r)  # (3, 2)
print("matches F.sdpa:", torch.allclose(output_r, sdpa_r))

# %% tags=["plot"]
title = "Random projections, d_k = 2"
ax = attention_heatmap(weights_r, tokens, title=title, vmax=1.0)
figure_to_svg(ax.figure, alt=f"3 by 3 heatmap of the weights: {title}")

# %% [markdown]
# The scores are small, and the weights are close to uniform. `nn.Linear` draws its starting
# weights uniformly between $\pm 1/\sqrt{n}$, with $n$ its number of inputs, so untrained
# projections give small queries and keys. Training adjusts $W_Q$, $W_K$ and $W_V$ until the
# weights help the task. The symmetries of the identity case are gone, and the result still
# matches PyTorch's own attention. Both heatmaps use one colour scale, from 0 to 1, so equal
# colours mean equal weights.
#
# ## Summary
#
# - A linear layer computes $y = x W + b$. `nn.Linear` stores $W^\top$ in its `weight`, of
#   shape `(out_features, in_features)`. Compare its result with the formula using a
#   tolerance, not `==`.
# - One head of self-attention is three such layers, here without bias ($Q = X W_Q$,
#   $K = X W_K$, $V = X W_V$), scores $Q K^\top$ divided by $\sqrt{d_k}$ with $d_k$ the
#   last axis of $Q$, a softmax over each row, and a weighted average of the values.
# - NumPy, PyTorch by hand, `torch.nn.functional.scaled_dot_product_attention` and
#   `attn_ref` agree on the three-token example up to rounding in the last bits.
#
# Next: [Self-attention with a causal mask](causal_self_attention.md) hides the future
# from each token and runs on batches. Attention alone does not see the order of the tokens
# ([exercise 4](#exercises)); the [positions page](../concepts/positions.md) shows how
# models give it that order.
#
# ## Common mistakes
#
# This tutorial began as a rewrite of a notebook that runs the same computations, called
# *the original notebook* below. Its mistakes are easy to make. Each is quoted here, with
# what the code actually computes.
#
# <a id="original-seed"></a>**An unseeded layer: `layer = nn.Linear(in_features=3,
# out_features=1, bias=True)`.** The original notebook creates its layer without fixing the
# random seed, and prints its weight and bias, "randomly initialized". They, and every
# number computed from them, change at each run, so its printed numbers cannot be
# reproduced. [A linear layer](#a-linear-layer) calls `torch.manual_seed(0)` first.
#
# <a id="original-inputs"></a>**"$x = [3,4,5]$".** Its text and its code use different
# inputs. Its text says `x = [3,4,5]`, of shape `[1x3]`. Its code runs `x =
# torch.tensor([1.0, 2.0, 3.0])`, of shape `(3,)`. Applying the weight and bias it printed
# to both inputs shows that its printed `y` came from the code. This page uses $x = (1, 2,
# 3)$ in the text and in the code. (Its comment `weight shape = [1×3]` is right:
# `(out_features, in_features)` for one output.)

# %%
first, second = nn.Linear(3, 1), nn.Linear(3, 1)
equal = torch.equal(first.weight, second.weight)
print("two layers made without a seed have equal weights:", equal)
torch.manual_seed(0)
again = nn.Linear(3, 1)
same = torch.equal(again.weight, layer.weight)
same = same and torch.equal(again.bias, layer.bias)
print("seeding with 0 again gives back the first layer:", same)

# The weight (transposed: W, not W^T), bias and y the original printed:
W_printed = torch.tensor([[-0.4424, 0.4990, -0.0855]]).T  # (3, 1)
b_printed, y_printed = torch.tensor([-0.3704]), -0.0713
for candidate in ([3.0, 4.0, 5.0], [1.0, 2.0, 3.0]):
    value = (torch.tensor(candidate) @ W_printed + b_printed).item()
    match = abs(value - y_printed) < 5e-5  # it printed 4 decimals
    print(f"x = {candidate}: x W + b = {value:.4f}, its y: {match}")

# %% [markdown]
# <a id="original-exact-comparison"></a>**`assert y == y_manual`.** It checks the layer with
# an exact comparison. That has two problems. Between tensors,
# `==` compares element by element and returns a tensor. `assert` turns it into one truth
# value only because this `y` has one element; with two outputs the `assert` raises a
# `RuntimeError` instead of checking anything. And it asks two floating-point computations
# for bit-for-bit equality, which is luck
# ([comparing floating-point results](#comparing-floating-point-results)).

# %%
print("y == y_manual gives a tensor:", y == y_manual)
two_outputs = nn.Linear(3, 2)
W2, b2 = two_outputs.weight.T, two_outputs.bias  # (3, 2), (2,)
try:
    assert two_outputs(x) == x @ W2 + b2
except RuntimeError as error:
    print("with two outputs, the check raises RuntimeError:")
    print(" ", error)
# If they differ, assert_close raises AssertionError and says how.
torch.testing.assert_close(two_outputs(x), x @ W2 + b2)
print("torch.testing.assert_close passes with two outputs")

# %% [markdown]
# <a id="original-scale"></a>**`scores / torch.sqrt(torch.tensor(d_model,
# dtype=torch.float32))`.** Its PyTorch version divides by the square root of $C$: its
# `d_model` is the token width $C$. That equals $\sqrt{d_k}$ only because its projections are
# square. Its NumPy version takes `d_k = Q.shape[1]`, the right width. In multi-head attention
# each head projects to fewer features than $C$. On the random head above ($d_k = 2$, $C = 4$)
# the two scales give different results, and only $1/\sqrt{d_k}$ matches PyTorch. In the base
# model of Vaswani et al. (2017), with $C = 512$ and 8 heads of $d_k = 64$, the wrong scale
# would shrink every score by the factor printed last. The right width is the last axis of
# $Q$ ([step 3](#step-3-dividing-by-the-square-root-of-d_k)).

# %%
# The original's scale, 1/sqrt(C), on the random head:
by_width = torch.softmax(scores_r / C**0.5, dim=-1) @ V_r  # (3, 2)
print("1/sqrt(C) matches F.sdpa:", torch.allclose(by_width, sdpa_r))
print(f"largest difference: {(by_width - sdpa_r).abs().max():.4f}")
ratio = (512 / 64) ** 0.5
print(f"C = 512, d_k = 64: sqrt(C) / sqrt(d_k) = {ratio:.4f}")

# %% [markdown]
# <a id="original-identity"></a>**"For reproducibility: manually initialize to identity".**
# The original notebook sets $W_Q = W_K = W_V = I$ with this comment. A fixed seed makes
# random projections just as reproducible, as the random head above shows. What the identity
# gives is numbers one can check by hand, and it hides what real projections do:
# [what the identity projections hide](#what-the-identity-projections-hide).
#
# ## Exercises
#
# **1. Every score doubles.** Predict first: if every scaled score of the three tokens is
# multiplied by 2, do the weights double, stay the same, or change some other way? Then
# compute them, and compare with each weight squared and its row divided by its new sum.

# %% tags=["solution"]
doubled = softmax_np(2 * scaled_np)  # (3, 3)
squared = weights_np**2
squared /= squared.sum(axis=-1, keepdims=True)  # rows sum to one
print("weights of the doubled scores:")
print(doubled)
same = np.allclose(doubled, squared)
print("equal to the squared weights, renormalised:", same)
own = weights_np[1, 1], doubled[1, 1]
print(f"t1 on itself: {own[0]:.4f} -> {own[1]:.4f}")
root = np.sqrt(Q_np.shape[-1])  # sqrt(d_k) of the identity example
unscaled = np.array_equal(2 * scaled_np, scores_np)
print(
    f"sqrt(d_k) = {root:g}; 2 * scaled_np is the unscaled scores: {unscaled}"
)
# e^(2z) = (e^z)^2: doubling every score squares every weight, then
# the row is renormalised, so large weights grow and small ones shrink.
# The last line shows that doubling undoes the division by sqrt(d_k)
# here: leaving the division out sharpens these weights in just this way.

# %% [markdown]
# **2. Overflow.** Add 100 to every score in the first row of `scaled_np` and compute its
# softmax in float32, first without subtracting the maximum (`exp`, then divide by the sum),
# then with it. Predict both results before running them.

# %% tags=["solution"]
row = torch.tensor(scaled_np[0], dtype=torch.float32) + 100  # (3,)
print("exp(row):      ", row.exp())
print("naive softmax: ", row.exp() / row.exp().sum())
shifted = (row - row.max()).exp()
print("stable softmax:", shifted / shifted.sum())
largest = torch.finfo(torch.float32).max
print(f"the largest float32 is e to the power {np.log(largest):.2f}")
# exp overflows to inf above that power, and inf / inf is nan.
# Subtracting the maximum brings every exponent to 0 or below. Adding
# a constant to a row does not change its softmax, so the stable
# result is the first row of weights_np.

# %% [markdown]
# **3. The transposition.** Make a random square projection, `nn.Linear(4, 4, bias=False)`
# after `torch.manual_seed(1)`. Predict whether `X_pt @ proj.weight` equals `proj(X_pt)`.
# Then try a projection to two features, `nn.Linear(4, 2, bias=False)`.

# %% tags=["solution"]
torch.manual_seed(1)
square = nn.Linear(4, 4, bias=False)  # weight: W^T, (4, 4)
right = torch.allclose(square(X_pt), X_pt @ square.weight.T)
wrong = torch.allclose(square(X_pt), X_pt @ square.weight)
print("proj(X) equals X @ weight.T:", right)
print("proj(X) equals X @ weight:  ", wrong)
narrow = nn.Linear(4, 2, bias=False)  # weight: W^T, (2, 4)
try:
    X_pt @ narrow.weight  # (3, 4) @ (2, 4)
except RuntimeError as error:
    print("X @ weight, with weight (2, 4):")
    print(" ", error)
# A square weight multiplies either way round and silently gives a
# wrong result; a non-square one fails at once. nn.Linear's weight is
# W^T, so X W is X @ weight.T.

# %% [markdown]
# **4. Reversing the tokens.** Reverse the order of the three tokens and rerun the identity
# computation (steps 1 to 5). Predict the new weights and outputs first.

# %% tags=["solution"]
order = [2, 1, 0]
X_rev = X_np[order]  # (3, 4): t2, t1, t0
scaled_rev = X_rev @ X_rev.T / np.sqrt(C)  # identity projections
weights_rev = softmax_np(scaled_rev)  # (3, 3)
output_rev = weights_rev @ X_rev  # (3, 4)
same_output = np.allclose(output_rev, output_np[order])
same_weights = np.allclose(weights_rev, weights_np[order][:, order])
print("the old output rows, reversed:", same_output)
print("the old weights, rows and columns reversed:", same_weights)
# Without a mask and without positions, attention does not see the
# order: reordering the tokens reorders the outputs the same way.

# %% [markdown]
# ## References
#
# - Ashish Vaswani, Noam Shazeer, Niki Parmar, Jakob Uszkoreit, Llion Jones, Aidan N. Gomez,
#   Łukasz Kaiser, Illia Polosukhin. [Attention Is All You
#   Need](https://arxiv.org/abs/1706.03762). NeurIPS 2017. Scaled dot-product attention
#   (section 3.2.1) and the base model's $C = 512$ with 8 heads of $d_k = 64$ (section 3.2.2).
# - PyTorch: [`nn.Linear`](https://docs.pytorch.org/docs/stable/generated/torch.nn.Linear.html)
#   (the stored weight's shape and its initialisation),
#   [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html),
#   [`nn.MultiheadAttention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html)
#   (its `bias=True` default),
#   [`torch.allclose`](https://docs.pytorch.org/docs/stable/generated/torch.allclose.html) and
#   [`torch.testing.assert_close`](https://docs.pytorch.org/docs/stable/testing.html).
# - David Goldberg. [What Every Computer Scientist Should Know About Floating-Point
#   Arithmetic](https://docs.oracle.com/cd/E19957-01/806-3568/ncg_goldberg.html). ACM Computing
#   Surveys, 1991. Rounding, and why the order of additions matters.

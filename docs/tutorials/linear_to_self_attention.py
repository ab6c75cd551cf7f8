# %% [markdown]
# # From nn.Linear to self-attention
#
# A self-attention layer is three linear layers and a softmax. This tutorial starts with one
# `nn.Linear`, checks it against its formula, and then computes self-attention by hand on three
# tokens with four features each, printing every intermediate result. Each step is written twice, in
# NumPy and in PyTorch, in neighbouring cells. At the end both are checked against each other, against
# PyTorch's own `torch.nn.functional.scaled_dot_product_attention` and against `attn_ref`, this site's
# small reference implementation of attention (installed with the site; see its API page).
#
# The tutorial grew out of a colleague's notebook (the *seed*). Where the seed was wrong or fragile,
# a box says so and the cell under it computes the truth.

# %% [markdown]
# ## 1. A linear layer computes y = xWᵀ + b
#
# `nn.Linear(in_features, out_features)` holds two parameters:
#
# - a weight $W$ of shape `(out_features, in_features)`, one **row** per output feature;
# - a bias $b$ of shape `(out_features,)`.
#
# Given an input $x$, it returns
#
# $$
# y = x W^\top + b ,
# $$
#
# that is $y_j = \sum_i x_i W_{ji} + b_j$: output $j$ is the dot product of the input with row $j$
# of $W$, plus $b_j$. The transpose is there because $W$ is stored one row per output. The shapes:
#
# - $x$: `(..., in_features)`; any leading axes (a batch, a sequence of tokens) are carried through;
# - $W^\top$: `(in_features, out_features)`;
# - $b$: `(out_features,)`, added to every row;
# - $y$: `(..., out_features)`.
#
# The first layer, as in the seed, has three inputs and one output.

# %%
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# Forward passes only: no gradient bookkeeping, no grad_fn in printouts.
torch.set_grad_enabled(False)
# NumPy prints four decimals, like PyTorch.
np.set_printoptions(precision=4, suppress=True)

torch.manual_seed(0)  # nn.Linear starts from random numbers: fix them
layer = nn.Linear(in_features=3, out_features=1)
print(f"W, shape {tuple(layer.weight.shape)}:")
print(layer.weight.detach())
print(f"b, shape {tuple(layer.bias.shape)}:")
print(layer.bias.detach())

# %% [markdown]
# <div class="admonition warning">
# <p class="admonition-title">The seed does not seed its layer</p>
#
# The seed creates its `nn.Linear` without fixing the random seed, so the weight, the bias and
# every number computed from them change at each run, and its printed numbers cannot be reproduced.
# Here `torch.manual_seed(0)` comes first:
# </div>

# %%
first, second = nn.Linear(3, 1), nn.Linear(3, 1)
equal = torch.equal(first.weight, second.weight)
print("two layers made without a seed have equal weights:", equal)

torch.manual_seed(0)
again = nn.Linear(3, 1)
same = torch.equal(again.weight, layer.weight)
same = same and torch.equal(again.bias, layer.bias)
print("seeding with 0 again gives back the layer above:", same)

# %% [markdown]
# Now apply the layer to one input $x = (1, 2, 3)$, and compute the formula by hand next to it. A
# one-dimensional $x$ of shape `(in_features,)` gives a $y$ of shape `(out_features,)`; the same
# numbers written as a row of shape `(1, in_features)`, a batch of one, give `(1, out_features)`.

# %%
x = torch.tensor([1.0, 2.0, 3.0])  # (in_features,) = (3,)
y = layer(x)  # (3,) -> (1,)
y_manual = x @ layer.weight.T + layer.bias  # (3,) @ (3, 1) + (1,) -> (1,)
print(f"x shape {tuple(x.shape)} -> y shape {tuple(y.shape)}")
print("y        =", y)
print("y_manual =", y_manual)

x_row = x[None, :]  # (3,) -> (1, 3): a batch of one row
y_row = layer(x_row)  # (1, 3) -> (1, 1)
print(f"x_row shape {tuple(x_row.shape)} -> y shape {tuple(y_row.shape)}")

# %% [markdown]
# <div class="admonition warning">
# <p class="admonition-title">The seed's text and code use different inputs</p>
#
# The seed's explanation says <code>x = [3, 4, 5]</code> of shape <code>[1x3]</code>, but its code
# runs <code>x = torch.tensor([1.0, 2.0, 3.0])</code>, a one-dimensional tensor of shape
# <code>(3,)</code>. Its printed <code>y</code> came from the code: applying the weight and bias the
# seed printed to both inputs shows which one reproduces it. This page uses $x = (1, 2, 3)$ in the
# text and in the code, with the shapes printed above. (The seed's comments give the weight as
# <code>[1×3]</code>: right for a layer with one output, whose weight is
# <code>(out_features, in_features)</code>. A layer with one output cannot show which axis is which;
# the next section uses a layer with two outputs.)
# </div>

# %%
# The weight, bias and y printed in the seed:
seed_weight = torch.tensor([[-0.4424, 0.4990, -0.0855]])  # (1, 3)
seed_bias = torch.tensor([-0.3704])  # (1,)
seed_y = -0.0713
for candidate in ([3.0, 4.0, 5.0], [1.0, 2.0, 3.0]):
    xc = torch.tensor(candidate)
    value = (xc @ seed_weight.T + seed_bias).item()
    match = abs(value - seed_y) < 5e-5  # the seed printed four decimals
    print(f"x = {candidate}: x W^T + b = {value:.4f}, the seed's y: {match}")

# %% [markdown]
# ### Comparing floating-point results
#
# <div class="admonition warning">
# <p class="admonition-title">The seed checks the layer with <code>assert y == y_manual</code></p>
#
# That line has two problems. First, <code>==</code> between tensors compares element by element and
# returns a tensor; <code>assert</code> can turn it into one truth value only because this
# <code>y</code> has a single element. With two outputs the same check does not run at all. Second, it
# asks two floating-point computations for bit-for-bit equality. The cells below show both problems
# and the check to use instead.
# </div>

# %%
print("y == y_manual gives a tensor:", y == y_manual)

two_outputs = nn.Linear(3, 2)
W2, b2 = two_outputs.weight, two_outputs.bias
print("a layer with two outputs has W of shape", tuple(W2.shape))
try:
    assert two_outputs(x) == x @ W2.T + b2
except RuntimeError as error:
    print("the seed's check raises RuntimeError:", error)

# %% [markdown]
# Floating-point addition rounds after every step, so it is not associative: adding the same numbers
# in another order can change the last bits. `nn.Linear` calls `F.linear`, which picks a matrix
# routine according to the input's shape and the hardware, and the order in which that routine adds up
# the products is its own business. An exact match with `x @ W.T + b` is therefore luck, not a
# guarantee. Computing the formula in float64 shows how far the float32 layer is from the value it
# rounds.

# %%
print("(0.1 + 0.2) + 0.3 =", repr((0.1 + 0.2) + 0.3))
print("0.1 + (0.2 + 0.3) =", repr(0.1 + (0.2 + 0.3)))

W, b = layer.weight, layer.bias
y_functional = F.linear(x, W, b)  # what nn.Linear calls
y_float64 = x.double() @ W.double().T + b.double()  # (3,) -> (1,)
print(f"nn.Linear,   float32: {y.item():.10f}")
print(f"F.linear,    float32: {y_functional.item():.10f}")
print(f"x @ W.T + b, float32: {y_manual.item():.10f}")
print(f"x @ W.T + b, float64: {y_float64.item():.10f}")
gap = y.item() - y_float64.item()
print(f"float32 layer minus float64 formula: {gap:.3e}")

# %% [markdown]
# The right check allows for rounding: `torch.allclose` (or `torch.testing.assert_close`, which also
# says by how much two tensors differ) compares with a relative and an absolute tolerance, and works
# for any number of elements.

# %%
print("torch.allclose(y, y_manual):", torch.allclose(y, y_manual))
close = torch.allclose(y.double(), y_float64, rtol=1e-6, atol=1e-7)
print("layer close to the float64 formula:", close)

# Raises AssertionError, with the largest difference, if they differ.
torch.testing.assert_close(two_outputs(x), x @ W2.T + b2)
print("two outputs: layer and formula agree within float32 tolerance")

# %% [markdown]
# ## 2. Self-attention on three tokens, step by step
#
# Self-attention lets every token of a sequence $X$ (shape `(T, d_model)`: $T$ tokens with
# $d_{\text{model}}$ features each) gather information from all tokens, itself included:
#
# $$
# \operatorname{Attention}(X) =
# \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V ,
# $$
#
# where $Q = X W_q^\top$, $K = X W_k^\top$ and $V = X W_v^\top$. The three projections are linear
# layers without bias, exactly the layer of section 1. The steps:
#
# 1. project the tokens to queries $Q$, keys $K$ and values $V$;
# 2. score every query against every key: $S = Q K^\top$, shape `(T, T)`, with $S_{ij} = q_i \cdot k_j$;
# 3. scale the scores by $1/\sqrt{d_k}$;
# 4. turn each row of scores into weights with a (numerically stable) softmax;
# 5. mix the values with those weights: output $= A V$, where $A$ holds the weights.
#
# The three tokens come from `attn_ref.examples.THREE_TOKENS`, the data whose attention weights the
# doctest of `attn_ref.scaled_dot_product_attention` pins, so this page and that doctest cannot
# disagree. NumPy computes in float64, PyTorch in float32.

# %% [markdown]
# ### Step 0: the tokens

# %%
from attn_ref.examples import THREE_TOKENS

X_np = np.array(THREE_TOKENS)  # (T, d_model) = (3, 4), float64
print("X (NumPy):")
print(X_np)

# %%
X_pt = torch.tensor(THREE_TOKENS)  # (T, d_model) = (3, 4), float32
print("X (PyTorch):")
print(X_pt)

# %% [markdown]
# ### Step 1: queries, keys and values
#
# As in the seed, all three projections start as the identity, so that $Q = K = V = X$ and every
# later number can be checked by hand. Section 4 shows what this choice hides. In NumPy a projection is
# a matrix stored like `nn.Linear`'s weight, `(d_out, d_model)`, and applied as `X @ W.T`. In PyTorch
# it is an `nn.Linear` without bias whose random starting weight is overwritten with the identity
# (with `copy_` while gradients are off; the seed's `weight.data = ...` also works but bypasses
# autograd's checks).

# %%
d_model = X_np.shape[-1]  # features per token
# Stored like nn.Linear's weight: (d_out, d_model).
W_q_np = np.eye(d_model)  # (d_k, d_model)
W_k_np = np.eye(d_model)  # (d_k, d_model)
W_v_np = np.eye(d_model)  # (d_v, d_model)
Q_np = X_np @ W_q_np.T  # (3, 4) @ (4, 4) -> (3, 4)
K_np = X_np @ W_k_np.T  # (3, 4) @ (4, 4) -> (3, 4)
V_np = X_np @ W_v_np.T  # (3, 4) @ (4, 4) -> (3, 4)
print("Q (NumPy):")
print(Q_np)
print("K (NumPy):")
print(K_np)
print("V (NumPy):")
print(V_np)

# %%
proj_q = nn.Linear(d_model, d_model, bias=False)
proj_k = nn.Linear(d_model, d_model, bias=False)
proj_v = nn.Linear(d_model, d_model, bias=False)
for proj in (proj_q, proj_k, proj_v):
    # Replace the random start with the identity.
    proj.weight.copy_(torch.eye(d_model))
Q_pt = proj_q(X_pt)  # (3, 4) -> (3, 4)
K_pt = proj_k(X_pt)  # (3, 4) -> (3, 4)
V_pt = proj_v(X_pt)  # (3, 4) -> (3, 4)
print("Q (PyTorch):")
print(Q_pt)
print("K (PyTorch):")
print(K_pt)
print("V (PyTorch):")
print(V_pt)

# %% [markdown]
# ### Step 2: scores
#
# Row $i$ of $S = Q K^\top$ holds the dot products of query $i$ with every key: how well each token
# matches what token $i$ is looking for.

# %%
scores_np = Q_np @ K_np.T  # (3, 4) @ (4, 3) -> (3, 3)
print("scores = Q K^T (NumPy):")
print(scores_np)

# %%
scores_pt = Q_pt @ K_pt.T  # (3, 4) @ (4, 3) -> (3, 3)
print("scores = Q K^T (PyTorch):")
print(scores_pt)

# %% [markdown]
# ### Step 3: scaling by the square root of d_k
#
# A dot product of two vectors with $d_k$ entries sums $d_k$ terms, so its spread grows like
# $\sqrt{d_k}$; large scores would push the softmax towards all-or-nothing weights. Dividing by
# $\sqrt{d_k}$ undoes that growth. Here $d_k$ is the number of features of a query (and of a key):
# the **last axis** of $Q$.
#
# <div class="admonition warning">
# <p class="admonition-title">The seed's PyTorch version divides by <code>sqrt(d_model)</code></p>
#
# It writes <code>scores / torch.sqrt(torch.tensor(d_model))</code>. The width of the tokens,
# $d_{\text{model}}$, equals $d_k$ here only because the projections are square. In multi-head
# attention each head projects to fewer features than $d_{\text{model}}$, and the two differ; section 4
# shows the difference on a head of two features. Take $d_k$ from the last axis of $Q$, as the seed's
# NumPy version does.
# </div>

# %%
d_k = Q_np.shape[-1]  # features per query and per key
scaled_np = scores_np / np.sqrt(d_k)  # (3, 3)
print(f"d_k = {d_k}, 1/sqrt(d_k) = {1 / np.sqrt(d_k):.4f}")
print("scores / sqrt(d_k) (NumPy):")
print(scaled_np)

# %%
d_k = Q_pt.shape[-1]  # features per query and per key
scaled_pt = scores_pt / d_k**0.5  # (3, 3)
print(f"d_k = {d_k}, 1/sqrt(d_k) = {1 / d_k**0.5:.4f}")
print("scores / sqrt(d_k) (PyTorch):")
print(scaled_pt)

# %% [markdown]
# ### Step 4: a numerically stable softmax
#
# The softmax of a row $z$ is $e^{z_j} / \sum_m e^{z_m}$. Subtracting the row's maximum first,
#
# $$
# \operatorname{softmax}(z)_j = \frac{e^{z_j - \max z}}{\sum_m e^{z_m - \max z}} ,
# $$
#
# changes nothing mathematically (the factor $e^{-\max z}$ cancels) but keeps every exponent at or
# below zero, so `exp` cannot overflow. Each row is one query, so the maximum and the sum run over the
# last axis.


# %%
def softmax_np(z):
    """Softmax over the last axis, row maximum subtracted first."""
    shifted = z - z.max(axis=-1, keepdims=True)  # (3, 3) - (3, 1)
    exps = np.exp(shifted)
    return exps / exps.sum(axis=-1, keepdims=True)  # (3, 3) / (3, 1)


weights_np = softmax_np(scaled_np)  # (3, 3)
print("weights (NumPy):")
print(weights_np)


# %%
def softmax_pt(z):
    """Softmax over the last axis, row maximum subtracted first."""
    shifted = z - z.amax(dim=-1, keepdim=True)  # (3, 3) - (3, 1)
    exps = shifted.exp()
    return exps / exps.sum(dim=-1, keepdim=True)  # (3, 3) / (3, 1)


weights_pt = softmax_pt(scaled_pt)  # (3, 3)
print("weights (PyTorch):")
print(weights_pt)
builtin = torch.softmax(scaled_pt, dim=-1)
print("same as torch.softmax:", torch.allclose(weights_pt, builtin))

# %% [markdown]
# The weights of the three-token example are tame; large scores show why the maximum is subtracted.
# In float32, `exp` overflows to infinity once its argument passes the log of the largest float32:

# %%
print(
    "largest float32:", torch.finfo(torch.float32).max, " its log:", math.log(torch.finfo(torch.float32).max)
)
big = torch.tensor([100.0, 101.0])
naive = big.exp() / big.exp().sum()
print("exp(big):      ", big.exp())
print("naive softmax: ", naive)
print("stable softmax:", softmax_pt(big))

# %% [markdown]
# ### Step 5: weights times values
#
# Every row of weights is non-negative and sums to one, so each output row is a weighted average of
# the value rows.

# %%
output_np = weights_np @ V_np  # (3, 3) @ (3, 4) -> (3, 4)
print("row sums of the weights (NumPy):")
print(weights_np.sum(axis=-1))
print("output = weights V (NumPy):")
print(output_np)

# %%
output_pt = weights_pt @ V_pt  # (3, 3) @ (3, 4) -> (3, 4)
print("row sums of the weights (PyTorch):")
print(weights_pt.sum(dim=-1))
print("output = weights V (PyTorch):")
print(output_pt)

# %% [markdown]
# ## 3. Check: four computations, one answer
#
# The NumPy and PyTorch versions agree, and both agree with PyTorch's fused
# `torch.nn.functional.scaled_dot_product_attention` (which returns the output only) and with
# `attn_ref.scaled_dot_product_attention` (which also returns the weights, and whose doctest pins
# them). The tolerances allow for float32 rounding; the printed differences show how small it is.

# %%
from attn_ref import scaled_dot_product_attention

# (3, 4): PyTorch's fused attention returns the output only.
output_torch = F.scaled_dot_product_attention(Q_pt, K_pt, V_pt)
# (3, 4) and (3, 3): attn_ref returns the weights too.
output_ref, weights_ref = scaled_dot_product_attention(Q_pt, K_pt, V_pt)

comparisons = {
    "NumPy vs PyTorch, weights": (weights_np, weights_pt),
    "NumPy vs PyTorch, output": (output_np, output_pt),
    "PyTorch vs F.sdpa, output": (output_pt, output_torch),
    "PyTorch vs attn_ref, weights": (weights_pt, weights_ref),
    "PyTorch vs attn_ref, output": (output_pt, output_ref),
}
for name, (a, b) in comparisons.items():
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    close = torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    largest = (a - b).abs().max().item()
    print(f"{name}: close {close}, largest difference {largest:.1e}")
    assert close, name

# %% [markdown]
# (F.sdpa is short for `torch.nn.functional.scaled_dot_product_attention`.)
#
# ## The weights as a heatmap
#
# Each row is one query, each column one key; the numbers are the weights printed above. Equal scores
# give equal weights, so a query splits its attention evenly between keys that match it equally well.

# %%
from attn_ref.plotting import attention_heatmap, figure_to_svg

tokens = ["token 1", "token 2", "token 3"]
for query, row in zip(tokens, weights_pt, strict=True):
    top = torch.isclose(row, row.max())  # (3,): True where the maximum is
    strongest = [key for key, is_top in zip(tokens, top, strict=True) if is_top]
    print(f"{query} attends most to {' and '.join(strongest)}")
ax = attention_heatmap(
    weights_pt,
    query_labels=tokens,
    title="Identity projections",
)
figure_to_svg(
    ax.figure, alt="Heatmap of the 3 by 3 attention weights with identity projections, one row per query"
)

# %% [markdown]
# ## 4. What the identity projections hide
#
# With $W_q = W_k = W_v = I$ the example is easy to check, but it is not what a trained model does:
#
# - **Q, K and V are the same matrix, $X$.** In a model the three projections are separate, learned
#   parameters: what a token looks for (its query), what it offers to be matched on (its key) and what
#   it passes on (its value) are three different views of it.
# - **The scores are symmetric.** $S = X X^\top$ gives $S_{ij} = S_{ji}$: token $i$ matches token $j$
#   exactly as well as $j$ matches $i$. With $S = X W_q^\top W_k X^\top$ that no longer holds. (The
#   weights were not symmetric even here, since each row is normalised by its own sum.)
# - **The output copies the input's patterns.** With $V = X$ every output row is an average of
#   input rows, so the output inherits features of $X$, such as its repeated columns.
# - **The transpose is invisible.** $I^\top = I$, so `X @ W` and `X @ W.T` give the same result and a
#   wrong orientation would go unnoticed.
# - **$d_k = d_{\text{model}}$.** Square projections hide which width the scale depends on.
#
# Below, the same steps run with random, untrained projections (seeded, so the numbers are the same
# at every run) from the four features of a token down to a head of two features, as one head of
# multi-head attention would.

# %%
torch.manual_seed(0)
d_head = 2  # features per query, key and value in this head
# Each weight is (d_head, d_model) = (2, 4).
rand_q = nn.Linear(d_model, d_head, bias=False)
rand_k = nn.Linear(d_model, d_head, bias=False)
rand_v = nn.Linear(d_model, d_head, bias=False)
Q_r = rand_q(X_pt)  # (3, 4) @ (4, 2) -> (3, 2)
K_r = rand_k(X_pt)  # (3, 4) @ (4, 2) -> (3, 2)
V_r = rand_v(X_pt)  # (3, 4) @ (4, 2) -> (3, 2)
scores_r = Q_r @ K_r.T  # (3, 2) @ (2, 3) -> (3, 3)
d_k_r = Q_r.shape[-1]  # d_k is the last axis of Q: 2, not d_model
weights_r = softmax_pt(scores_r / d_k_r**0.5)  # (3, 3)
output_r = weights_r @ V_r  # (3, 3) @ (3, 2) -> (3, 2)
print(f"W_q (random), shape {tuple(rand_q.weight.shape)}:")
print(rand_q.weight.detach())
print("scores = Q K^T (random projections):")
print(scores_r)
print("weights (random projections):")
print(weights_r)
print("output (random projections):")
print(output_r)
low, high = weights_r.min().item(), weights_r.max().item()
print(f"weights range from {low:.4f} to {high:.4f}; uniform: {1 / 3:.4f}")


# %%
def symmetric(m):
    return torch.allclose(m, m.T)


print("scores symmetric?")
print("  identity:", symmetric(scores_pt), " random:", symmetric(scores_r))
print("weights symmetric?")
print("  identity:", symmetric(weights_pt), " random:", symmetric(weights_r))
print("Q equals K?")
print("  identity:", torch.equal(Q_pt, K_pt), " random:", torch.equal(Q_r, K_r))

reference_r = F.scaled_dot_product_attention(Q_r, K_r, V_r)  # (3, 2)
ok = torch.allclose(output_r, reference_r)
print("1/sqrt(d_k) matches F.sdpa:", ok)
# The seed's scale, 1/sqrt(d_model):
seed_scaled = softmax_pt(scores_r / d_model**0.5) @ V_r  # (3, 2)
ok = torch.allclose(seed_scaled, reference_r)
print("the seed's 1/sqrt(d_model) matches F.sdpa:", ok)
off = (seed_scaled - reference_r).abs().max().item()
print(f"largest difference with the seed's scale: {off:.4f}")

# %% [markdown]
# Side by side, the two sets of weights: the same tokens, attended to differently because the
# projections changed. PyTorch's default initialisation draws small weights, so untrained projections
# give small scores and weights close to uniform (their range is printed above). Both panels share one
# colour scale, from 0 to 1, so equal colours mean equal weights.
# Training adjusts $W_q$, $W_k$ and $W_v$ until the patterns help the task.

# %%
import matplotlib.pyplot as plt

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
attention_heatmap(
    weights_pt,
    query_labels=tokens,
    ax=left,
    title="Identity projections",
    vmax=1.0,
)
attention_heatmap(
    weights_r,
    query_labels=tokens,
    ax=right,
    title="Random projections, d_k = 2",
    vmax=1.0,
)
figure_to_svg(
    fig, alt="Two 3 by 3 attention heatmaps side by side: identity projections, then random projections"
)

# %% [markdown]
# ## Summary
#
# - `nn.Linear` computes $x W^\top + b$ with $W$ of shape `(out_features, in_features)`; compare its
#   result with the formula using a tolerance, never with `==`.
# - Self-attention is three such layers (for $Q$, $K$, $V$), a score matrix $Q K^\top$ scaled by
#   $1/\sqrt{d_k}$ with $d_k$ the last axis of $Q$, a stable row-wise softmax and a weighted sum of
#   the values.
# - NumPy, PyTorch by hand, `torch.nn.functional.scaled_dot_product_attention` and `attn_ref` agree
#   on the three-token example up to float32 rounding.

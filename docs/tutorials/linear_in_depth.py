# %% [markdown]
# # From nn.Linear to self-attention, in depth
#
# [Page 2 of the core path](linear_to_self_attention.md) built one head on a sentence, with
# projections set by hand. This page goes over the same ground on three tokens of four
# features, small enough to check every number by hand, and takes the side roads page 2 leaves
# out: what `nn.Linear` stores, why two correct computations differ in their last bits and how
# to compare them, four implementations that agree, what identity projections hide, and where
# the rows of $X$ come from. It assumes [page 2](linear_to_self_attention.md). Symbols follow
# the [notation](../notation.md): a token is a row vector, and $Q = X W_Q$.
#
# The picture is the whole computation for one token, t1, with this page's numbers. Its query
# meets every key in a dot product. Dividing by $\sqrt{4}$ and a softmax turn the scores into
# weights that sum to one. The output is the values, averaged with those weights. Here the
# queries, keys and values are the tokens themselves, so every number can be checked by hand.

# %% tags=["plot"]
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.diagrams import Box, arrow, canvas, grid, note, outline
from attn_ref.examples import THREE_TOKENS
from attn_ref.plotting import figure_to_svg

tokens = ["t0", "t1", "t2"]
X_t = torch.tensor(THREE_TOKENS)  # (T, C) = (3, 4): queries, keys, values
seen_out, seen_weights = scaled_dot_product_attention(X_t, X_t, X_t)
fig, ax = canvas(10.4, 11.7, scale=0.42)
query_box = grid(ax, X_t[1], 1.0, 0.9, decimals=0, label="query of t1")
grid(ax, X_t, 1.0, 2.9, decimals=0, label="keys", row_names=tokens)
grid(ax, (X_t @ X_t[1])[:, None], 6.2, 2.9, decimals=0)
note(ax, 6.7, 2.5, "q · k", va="bottom")
arrow(ax, query_box.right, (6.7, 2.1), bend=-0.3)
grid(ax, X_t, 4.2, 6.9, decimals=0, label="values", row_names=tokens)
grid(ax, seen_weights[1][:, None], 9.0, 6.9, cmap="viridis", decimals=2)
note(ax, 9.5, 6.75, "weights", va="bottom")
arrow(ax, (7.2, 4.4), (9.5, 6.1), bend=-0.25)
note(ax, 9.4, 4.6, "÷ √4\nsoftmax")
note(ax, 8.6, 8.4, "×")
grid(ax, seen_out[1], 4.2, 10.6, decimals=2, label="output of t1")
note(ax, 4.0, 11.1, "Σ weight × value =", ha="right")
w = seen_weights[1].tolist()
figure_to_svg(
    fig,
    alt="Token t1's query (0, 2, 0, 2) meets the keys of t0, t1 and t2: dot "
    "products 0, 8 and 4. Divided by the square root of 4 and put through "
    f"a softmax they become the weights {w[0]:.2f}, {w[1]:.2f} and "
    f"{w[2]:.2f}, which multiply the value rows; their sum is t1's output.",
)

# %% [markdown]
# ## A linear layer
#
# A linear layer maps an input row $x$ to $y = x W + b$. `nn.Linear(in_features,
# out_features)` stores the transpose: its `weight` is $W^\top$, one row per output, and
# `layer(x)` computes `x @ layer.weight.T + layer.bias`. The seed is fixed first, so every run
# prints the same numbers.
#
# <details class="note">
# <summary>Going deeper: one output at a time, and leading axes</summary>
#
# Output $j$ is the dot product of $x$ with column $j$ of $W$, plus $b_j$. `weight` has shape
# `(out_features, in_features)`. Leading axes of `x` (a batch, a sequence of tokens) are
# carried through.
#
# </details>

# %%
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

torch.set_grad_enabled(False)  # forward passes only: no gradients
np.set_printoptions(precision=4, suppress=True)  # four decimals

torch.manual_seed(0)
layer = nn.Linear(in_features=3, out_features=2)
weight = layer.weight.detach()  # W^T: (out_features, in_features)
W, b = weight.T, layer.bias.detach()  # (3, 2), (2,)
print("layer.weight, one row per output:")
print(weight)
print("layer.bias:", b)
x = torch.tensor([1.0, 2.0, 3.0])  # (in_features,) = (3,)
y = layer(x)  # (3,) -> (2,)
y_manual = x @ W + b  # (3,) @ (3, 2) + (2,) -> (2,)
print("layer(x): ", y)
print("x @ W + b:", y_manual)
print("torch.allclose(y, y_manual):", torch.allclose(y, y_manual))

# %% tags=["plot"]
fig, ax = canvas(10.2, 5.4, scale=0.44)
grid(ax, x, 2.6, 0.9, decimals=0, label="x")
grid(ax, weight, 2.6, 2.6, decimals=2, row_names=["row 0", "row 1"])
grid(ax, b[:, None], 6.8, 2.6, decimals=2, label="b")
grid(ax, y[:, None], 9.0, 2.6, decimals=2, label="y")
for row in (0, 1):
    note(ax, 6.2, 3.1 + row, "· x +")
    note(ax, 8.4, 3.1 + row, "=")
note(ax, 4.1, 4.9, "layer.weight: one row per output", fontsize=10)
figure_to_svg(
    fig,
    alt="The input x = (1, 2, 3) above the two rows of layer.weight. Each "
    "row's dot product with x, plus its bias, is one output: "
    f"y = ({y[0]:.2f}, {y[1]:.2f}).",
)

# %% [markdown]
# <a id="the-last-bits"></a>Each output is one row of `weight` dotted with $x$, plus its bias. The layer and the
# formula agree, up to rounding in the last bits: `torch.allclose` compares with a tolerance,
# which is the right check for floating-point results, not `==`
# ([a pitfall](#exact-comparison)).
#
# <details class="note">
# <summary>Going deeper: why the order of additions changes the last bits</summary>
#
# A float32 number keeps 24 significant bits. After each addition the exact sum is rounded
# to the nearest representable number, so $(a + b) + c$ and $a + (b + c)$ round at different
# places and can differ in the last bit, as the two sums of 0.1, 0.2 and 0.3 below do in
# float64. `nn.Linear` hands its products to a matrix routine chosen for the shape and the
# hardware, which may split and reorder its sums for speed, so a bit-for-bit match with a
# hand-written formula is luck, not a guarantee. Computing the formula in float64 shows how
# far the float32 results sit from the exact value: a few rounding steps at most (printed in
# units of float32's spacing near each output).
#
# </details>

# %% tags=["deeper"]
print("(0.1 + 0.2) + 0.3 =", (0.1 + 0.2) + 0.3)
print("0.1 + (0.2 + 0.3) =", 0.1 + (0.2 + 0.3))
y_float64 = x.double() @ W.double() + b.double()  # (2,), in float64
step = torch.finfo(torch.float32).eps * y_float64.abs()  # (2,)
for name, result in (("nn.Linear", y), ("x @ W + b", y_manual)):
    steps = (result.double() - y_float64) / step  # (2,)
    print(f"{name} minus float64, in rounding steps:", steps.numpy())

# %% [markdown]
# ## Self-attention on three tokens
#
# Self-attention lets every token of a sequence gather information from all the tokens,
# itself included. The sequence is a matrix $X$ of shape $(T, C)$, one token per row. Three
# linear layers without bias project it to queries $Q = X W_Q$, keys $K = X W_K$ and values
# $V = X W_V$. Then
#
# $$
# \operatorname{Attention}(X) =
# \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V ,
# $$
#
# in five steps: project; score every query against every key, $Q K^\top$ of shape
# $(T, T)$; divide by $\sqrt{d_k}$; turn each row of scores into weights with a softmax;
# average the values with those weights.
#
# ### Steps 1 to 3: queries, keys and values, scores, scaled
#
# The tokens are `attn_ref.examples.THREE_TOKENS`, in float64. All three projections are the
# identity, so $Q = K = V = X$ ([what this costs](#what-the-identity-projections-hide)).
# Entry $(i, j)$ of $Q K^\top$ is how well token $j$ matches what token $i$ looks for.
# Dividing by $\sqrt{d_k}$ keeps the scores' spread the same whatever the width
# ([why](scaled_dot_product_step_by_step.md#the-variance-argument)). $d_k$ is the **last
# axis** of $Q$; it equals $C$ here only because the projections are square.

# %%
X_np = np.array(THREE_TOKENS)  # (T, C) = (3, 4)
C = X_np.shape[-1]  # features per token
W_Q_np = W_K_np = W_V_np = np.eye(C)  # identity, (C, d_k) = (4, 4)
Q_np = X_np @ W_Q_np  # (3, 4) @ (4, 4) -> (3, 4)
K_np = X_np @ W_K_np  # (3, 4) @ (4, 4) -> (3, 4)
V_np = X_np @ W_V_np  # (3, 4) @ (4, 4) -> (3, 4)
equal = all(np.array_equal(M, X_np) for M in (Q_np, K_np, V_np))
print("Q, K and V all equal X:", equal)
scores_np = Q_np @ K_np.T  # (3, 4) @ (4, 3) -> (3, 3)
d_k = Q_np.shape[-1]  # features per query and per key
scaled_np = scores_np / np.sqrt(d_k)  # (3, 3)
print("scores = Q K^T:")
print(scores_np)
print(f"d_k = {d_k}; scores / sqrt(d_k):")
print(scaled_np)

# %% [markdown]
# ### Steps 4 and 5: softmax, then weights times values
#
# The softmax turns a row of scores $z$ into weights $e^{z_j} / \sum_m e^{z_m}$: positive,
# summing to one, larger for larger scores. Each row is one query, so the sums run over the
# last axis. Subtracting the row's maximum first,
#
# $$
# \operatorname{softmax}(z)_j = \frac{e^{z_j - \max z}}{\sum_m e^{z_m - \max z}} ,
# $$
#
# changes nothing mathematically (the factor $e^{-\max z}$ cancels), but keeps every exponent
# at or below zero, so `exp` cannot overflow on large scores ([exercise 2](#exercises)). Each
# output row is then a weighted average of the value rows: $o_i = \sum_j a_{ij} v_j$.


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
output_np = weights_np @ V_np  # (3, 3) @ (3, 4) -> (3, 4)
print("output = weights V:")
print(output_np)

# %% [markdown]
# Token 1 keeps most of its attention for itself. Tokens 0 and 2 each have two keys with equal
# top scores and give them equal weights, each less than half of the row: the third key keeps
# a share.

# %% [markdown]
# ## The same computation in PyTorch
#
# In PyTorch the projections are `nn.Linear` layers without bias: `proj_q(X)` computes
# $X W_Q$, with $W_Q^\top$ in `proj_q.weight`. The cell compares four computations of the same
# attention: NumPy's, PyTorch's by hand, `torch.nn.functional.scaled_dot_product_attention`
# (F.sdpa, which returns the output only) and `attn_ref.scaled_dot_product_attention` (which
# returns the weights too).

# %%
X_pt = torch.tensor(THREE_TOKENS)  # (T, C) = (3, 4), float32
proj_q = nn.Linear(C, C, bias=False)  # weight: W_Q^T, (d_k, C)
proj_k = nn.Linear(C, C, bias=False)
proj_v = nn.Linear(C, C, bias=False)
for proj in (proj_q, proj_k, proj_v):
    proj.weight.copy_(torch.eye(C))  # W^T = W = I
Q_pt, K_pt, V_pt = proj_q(X_pt), proj_k(X_pt), proj_v(X_pt)  # (3, 4)
scores_pt = Q_pt @ K_pt.T  # (3, 4) @ (4, 3) -> (3, 3)
weights_pt = torch.softmax(scores_pt / d_k**0.5, dim=-1)  # (3, 3)
output_pt = weights_pt @ V_pt  # (3, 3) @ (3, 4) -> (3, 4)
output_sdpa = F.scaled_dot_product_attention(Q_pt, K_pt, V_pt)
output_ref, weights_ref = scaled_dot_product_attention(Q_pt, K_pt, V_pt)
pairs = [(weights_np, weights_pt), (output_np, output_pt)]  # NumPy's
pairs += [(output_sdpa, output_pt), (weights_ref, weights_pt)]  # F.sdpa's...
pairs += [(output_ref, output_pt)]  # ...and attn_ref's, against by hand
agree = all(torch.allclose(torch.as_tensor(a).float(), b) for a, b in pairs)
print("all four agree:", agree)

# %% [markdown]
# All four agree, up to rounding in the last bits: NumPy computed in float64, the others in
# float32, each in its own order.
#
# <details class="note">
# <summary>Going deeper: the last bits, and weights set by hand</summary>
#
# The cell below prints how far apart the four computations are. On these inputs F.sdpa runs
# its plain "math" implementation, which scales the queries and the keys by $d_k^{-1/4}$ each
# before their product, instead of dividing the scores after it (see
# `_scaled_dot_product_attention_math` in
# [its source](https://github.com/pytorch/pytorch/blob/cf30153c4c131c8164ee7798e5022d810682e2cb/aten/src/ATen/native/transformers/attention.cpp)).
# Each order rounds in other places. Written by hand in F.sdpa's order, the computation runs
# the same operations in the same order and gives the same bits (the last line). `attn_ref`
# scales the scores after the product, as the hand-written steps do, but writes its softmax
# out (the exponentials, then one division by their sum) where `torch.softmax` is one fused
# routine; the two may differ in the last bit.
#
# The identity overwrote the layers' random weights in place. A layer's `weight` is a
# parameter that requires gradients, and PyTorch refuses to change such a tensor in place
# while it records operations for autograd. This page turned recording off at the start
# (`torch.set_grad_enabled(False)`); elsewhere, wrap the change in `with torch.no_grad():`.
# Much code assigns `weight.data = torch.eye(d_model)` instead. That works too, but autograd
# does not track changes made through `.data`, so it cannot warn when such a change breaks a
# gradient computation.
#
# </details>


# %% tags=["deeper"]
def gap(a, b):
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return f"{(a - b).abs().max().item():.1e}"


names = ["NumPy weights", "NumPy output", "F.sdpa output", "attn_ref weights"]
names += ["attn_ref output"]
print("largest difference from PyTorch by hand:")
for name, pair in zip(names, pairs, strict=True):
    print(f"  {name + ':':18}", gap(*pair))
f = d_k**-0.25  # F.sdpa's order: Q and K scaled first, then multiplied
prescaled = torch.softmax((Q_pt * f) @ (K_pt * f).T, dim=-1) @ V_pt
print("F.sdpa minus Q, K scaled first:", gap(output_sdpa, prescaled))

# %% [markdown]
# ## What the identity projections hide
#
# Identity projections give numbers one can check by hand, at a price:
#
# - **Q, K and V are the same matrix, X.** In a model they are three different, learned views
#   of a token: what it looks for (query), what it is matched on (key), what it passes on
#   (value).
# - **The scores are symmetric.** $Q K^\top = X X^\top$: token $i$ matches token $j$ exactly as
#   well as $j$ matches $i$. With $X W_Q W_K^\top X^\top$ that no longer holds.
# - **The transposition is invisible.** $I^\top = I$, so `X @ weight` and `X @ weight.T`
#   agree, and the wrong one would go unnoticed ([exercise 3](#exercises)).
# - **$d_k = C$.** Square projections hide which width the scale depends on.
#
# <details class="note">
# <summary>Going deeper: what plain dot products get wrong</summary>
#
# On five random tokens: $X X^\top$ is symmetric, and by the Cauchy–Schwarz inequality
# $x_i \cdot x_j \le \lVert x_i \rVert \lVert x_j \rVert$, below the self-score
# $\lVert x_i \rVert^2$ whenever $x_j$ is shorter than $x_i$. So each query's top key is
# itself or a longer vector, and making a token longer draws weight from every query that
# scores it positively. With projections, the score is $x_i W_Q W_K^\top x_j^\top$: a learned
# $(C, C)$ matrix $W_Q W_K^\top$ of rank at most $d_k$ compares the tokens. It need not be
# symmetric, and it can ignore some features and amplify others.
#
# </details>

# %% tags=["deeper"]
torch.manual_seed(0)
X_plain = torch.randn(5, 8)  # (T, C): random token vectors
scores_plain = X_plain @ X_plain.T  # (T, T): x_i · x_j
print("plain scores X X^T:")
print(scores_plain.numpy().round(2))
A_plain = torch.softmax(scores_plain / 8**0.5, dim=-1)  # (T, T)
print(
    "scores symmetric:",
    torch.allclose(scores_plain, scores_plain.T),
    " weights symmetric:",
    torch.allclose(A_plain, A_plain.T),
)
top = scores_plain.argmax(dim=-1)  # (T,): each query's top key
lengths = X_plain.norm(dim=-1)  # (T,)
print(
    "each query's top key:",
    top.tolist(),
    " lengths:",
    lengths.numpy().round(2),
)
print(
    "each top key is the query or a longer vector:",
    all(lengths[top] >= lengths),
)
others = [i for i in range(5) if i != 2 and scores_plain[i, 2] > 0]
print("other queries with a positive score for token 2:", others)
loud = {}  # s -> (T, T): the weights with token 2 scaled by s
for s in (1.0, 2.0, 4.0):
    X_loud = X_plain.clone()
    X_loud[2] *= s
    loud[s] = torch.softmax(X_loud @ X_loud.T / 8**0.5, dim=-1)  # (T, T)
    print(
        f"token 2 scaled by {s:g}, weight on it:",
        loud[s][:, 2].numpy().round(3),
    )

# %% [markdown]
# Below, the same steps run with random, untrained, seeded projections, from four features
# down to $d_k = 2$, as one head of multi-head attention would.

# %%
torch.manual_seed(0)
rand_q = nn.Linear(C, 2, bias=False)  # weight: W_Q^T, (2, 4)
rand_k = nn.Linear(C, 2, bias=False)
rand_v = nn.Linear(C, 2, bias=False)
Q_r, K_r, V_r = rand_q(X_pt), rand_k(X_pt), rand_v(X_pt)  # (3, 2) each
scores_r = Q_r @ K_r.T  # (3, 2) @ (2, 3) -> (3, 3)
d_k = Q_r.shape[-1]  # the last axis of Q: 2, not C
weights_r = torch.softmax(scores_r / d_k**0.5, dim=-1)  # (3, 3)
output_r = weights_r @ V_r  # (3, 3) @ (3, 2) -> (3, 2)
sdpa_r = F.scaled_dot_product_attention(Q_r, K_r, V_r)  # (3, 2)
print("matches F.sdpa:", torch.allclose(output_r, sdpa_r))
low, high = weights_r.min().item(), weights_r.max().item()
print(f"weights from {low:.4f} to {high:.4f}; uniform: {1 / 3:.4f}")

# %% [markdown]
# In the picture, each entry of $Q$ is a row of $X$ (left) dotted with a column of $W_Q$
# (above), as the frames show. $W_Q$ is `rand_q.weight.T`.

# %% tags=["plot"]
fig, ax = canvas(11.9, 9.3, scale=0.38)
x_box = grid(ax, X_pt, 0.7, 5.8, decimals=0, row_names=tokens)
note(ax, 2.7, 9.3, "X", va="top")
note(
    ax,
    2.7,
    2.9,
    "each entry below:\nthe row of X to its left\n· the column above it",
    fontsize=10,
)
left = 5.4
for name, proj, result in (
    ("Q", rand_q, Q_r),
    ("K", rand_k, K_r),
    ("V", rand_v, V_r),
):
    grid(ax, proj.weight.T, left, 0.9, decimals=2, label=f"$W_{name}$")
    grid(ax, result, left, 5.8, decimals=2)
    note(ax, left + 1, 9.3, f"${name} = X W_{name}$", va="top")
    left += 2.2
outline(ax, Box(x_box.x, x_box.y + 1, 4, 1))  # t1's row of X,
outline(ax, Box(5.4 + 1, 0.9, 1, 4))  # column 1 of W_Q,
outline(ax, Box(5.4 + 1, 5.8 + 1, 1, 1))  # and their dot product
figure_to_svg(
    fig,
    alt="The three tokens X, a 3 by 4 matrix, times the random 4 by 2 "
    "matrices W_Q, W_K and W_V drawn above, give the 3 by 2 matrices Q, K "
    f"and V below them. Framed: t1's row of X and column 1 of W_Q, whose dot "
    f"product is Q's entry {Q_r[1, 1]:.2f}.",
)

# %% [markdown]
# The second picture puts the two heads side by side. With identity projections the scores
# mirror across the diagonal; with random ones they do not. The random head's weights are
# close to uniform; training adjusts $W_Q$, $W_K$ and $W_V$ until they help the task.
#
# <details class="note">
# <summary>Going deeper: reading the second picture</summary>
#
# The weights are not symmetric even with the identity: each row is divided by its own sum.
# The random head's scores are small because `nn.Linear` draws its starting weights between
# $\pm 1/\sqrt{n}$, with $n$ its number of inputs. Both weight grids share one colour scale,
# from 0 (dark purple) to 1 (yellow).
#
# </details>

# %% tags=["plot"]
fig, ax = canvas(9.6, 9.6, scale=0.44)
note(ax, 3.1, 0.4, "identity, $d_k = 4$")
note(ax, 7.5, 0.4, "random, $d_k = 2$")
note(ax, 0.2, 3.3, "scores", rotation=90)
note(ax, 0.2, 7.5, "weights", rotation=90)
for left, scores, weights, decimals in (
    (1.6, scores_pt, weights_pt, 0),
    (6.0, scores_r, weights_r, 2),
):
    names = tokens if left == 1.6 else None
    grid(
        ax,
        scores,
        left,
        1.8,
        decimals=decimals,
        row_names=names,
        column_names=tokens,
    )
    grid(
        ax,
        weights,
        left,
        6.0,
        cmap="viridis",
        decimals=2,
        row_names=names,
        column_names=tokens,
    )
for name, identity, random in (
    ("scores", scores_pt, scores_r),
    ("weights", weights_pt, weights_r),
):
    same = [torch.allclose(m, m.T) for m in (identity, random)]
    print(f"{name} symmetric? identity: {same[0]}, random: {same[1]}")
figure_to_svg(
    fig,
    alt="Scores and weights of the three tokens, one row per query: with "
    "identity projections the scores are symmetric and t1 gives itself "
    f"{weights_pt[1, 1]:.2f}; with the random projections the scores are "
    f"not symmetric and every weight lies between {low:.2f} and {high:.2f}.",
)

# %% [markdown]
# ## Common pitfalls
#
# <a id="unseeded-layer"></a>**Numbers nobody can reproduce.** A layer made without a seed,
# `layer = nn.Linear(3, 2)`, draws new weights at every run, and every number computed from it
# changes with them. Prose and code that disagree do the same harm: if the text says
# $x = (3, 4, 5)$ and the code runs $(1, 2, 3)$, a reader who checks $y = x W + b$ by hand
# gets another $y$. The fix: seed before making the layer, and use one input in the text and
# in the code.

# %% tags=["check"]
first, second = nn.Linear(3, 2), nn.Linear(3, 2)
equal = torch.equal(first.weight, second.weight)
print("two layers made without a seed have equal weights:", equal)
torch.manual_seed(0)
again = nn.Linear(3, 2)
same = torch.equal(again.weight, layer.weight)
same = same and torch.equal(again.bias, layer.bias)
print("seeding with 0 again gives back the first layer:", same)
for candidate in ([3.0, 4.0, 5.0], [1.0, 2.0, 3.0]):
    by_hand = torch.tensor(candidate) @ W + b  # (2,)
    match = torch.allclose(by_hand, y)
    print(f"x = {candidate}: x W + b = {by_hand.numpy()}, y: {match}")

# %% [markdown]
# <a id="exact-comparison"></a>**`assert y == y_manual`.** Between tensors, `==` compares
# element by element and returns a tensor. `assert` can read a one-element tensor as a truth
# value, but this layer has two outputs, so the `assert` raises a `RuntimeError` instead of
# checking anything. And bit-for-bit equality of two floating-point computations is luck
# ([a linear layer](#a-linear-layer)). The fix: `torch.testing.assert_close`, which allows for
# rounding and says by how much two tensors differ when they do.

# %% tags=["check"]
print("y == y_manual gives a tensor:", y == y_manual)
try:
    assert y == y_manual
except RuntimeError as error:
    print("the check raises", type(error).__name__)
torch.testing.assert_close(y, y_manual)  # raises AssertionError if not
print("torch.testing.assert_close passes")

# %% [markdown]
# <a id="scale-by-width"></a>**`scores / math.sqrt(d_model)`.** Dividing by the square root of
# the token width $C$ instead of $d_k$ is right only when the projections are square. In
# multi-head attention each head projects to fewer features than $C$. On the random head
# above ($d_k = 2$, $C = 4$) the two scales give different outputs, and only $1/\sqrt{d_k}$
# matches PyTorch. In the base model of Vaswani et al. (2017), with $C = 512$ and 8 heads of
# $d_k = 64$, the wrong scale would shrink every score by the factor printed last. The fix:
# take $d_k$ from the last axis of $Q$ (`Q.shape[-1]`).

# %% tags=["check"]
by_width = torch.softmax(scores_r / C**0.5, dim=-1) @ V_r  # 1/sqrt(C)
print("1/sqrt(C) matches F.sdpa:", torch.allclose(by_width, sdpa_r))
print(f"largest difference: {(by_width - sdpa_r).abs().max():.4f}")
ratio = (512 / 64) ** 0.5
print(f"C = 512, d_k = 64: sqrt(C) / sqrt(d_k) = {ratio:.4f}")

# %% [markdown]
# <a id="identity-for-reproducibility"></a>**Identity projections "for reproducibility".**
# A seed makes runs repeat just as well. The identity only makes numbers checkable by hand,
# and hides what real projections do ([what it hides](#what-the-identity-projections-hide)).
#
# <a id="pitfall-context"></a>**"An embedding carries no context, so a model needs an extra CLS
# token to add it."** The rows of $X$ are looked up: an embedding is a learned row per word of
# the vocabulary (a one-hot vector times a matrix $W_E$), so both *the* of a sentence get the
# same row. Attention adds the context: below, one layer with random weights gives *cat*
# different outputs in two sentences, with no extra token. The CLS token of BERT and ViT is
# another idea: a learned vector in front of the sequence whose last output summarises it for
# classification.

# %% tags=["check"]
vocab = ["a", "cat", "mat", "on", "ran", "sat", "the"]
words = ["the", "cat", "sat", "on", "the", "mat"]
ids = torch.tensor([vocab.index(word) for word in words])  # (T,)
one_hot = F.one_hot(ids, len(vocab)).float()  # (T, D), D = len(vocab)
torch.manual_seed(0)
W_E = torch.randn(len(vocab), C)  # (D, C), learned in a real model
embedding = nn.Embedding.from_pretrained(W_E)  # PyTorch's lookup table
X_words = embedding(ids)  # (T, C)
print("one-hot @ W_E == lookup:", torch.equal(one_hot @ W_E, X_words))
print("both 'the' get the same row:", torch.equal(X_words[0], X_words[4]))
W_context = [torch.randn(C, C) for _ in range(3)]  # one layer's W_Q, W_K, W_V


def in_context(sentence):  # one self-attention layer over the words' rows
    X_s = embedding(torch.tensor([vocab.index(word) for word in sentence]))
    Q_s, K_s, V_s = (X_s @ W_s for W_s in W_context)  # (T, C) each
    return scaled_dot_product_attention(Q_s, K_s, V_s)[0]  # (T, C)


other_words = ["a", "cat", "ran"]
Y1, Y2 = in_context(words), in_context(other_words)
print("'cat' in sentence 1:", Y1[1].numpy().round(4))
print("'cat' in sentence 2:", Y2[1].numpy().round(4))
same_the = torch.allclose(Y1[0], Y1[4], atol=1e-6)
print("the two 'the' of sentence 1, same output:", same_the)

# %% [markdown]
# <a id="pitfall-mixing"></a>**"Attention only mixes information; it creates no new
# features."** Half true: each output averages the values, feature by feature within their
# range. But $V = X W_V$ are learned features, and the weights depend on $X$ too, so attention
# is not linear: doubling $X$ does not double the output (last line). An output projection and
# an MLP follow ([the transformer block](../concepts/transformer_block.md)).

# %% tags=["check"]
torch.manual_seed(0)
X_mix = torch.randn(5, 8)  # (T, C): five random tokens
W_mix = [torch.randn(8, 4) for _ in range(3)]  # W_Q, W_K, W_V: (C, d_k)


def mix(X_in):  # one self-attention layer: output (T, d_k), weights (T, T)
    return scaled_dot_product_attention(*(X_in @ W_in for W_in in W_mix))


out_mix, A_mix = mix(X_mix)
V_mix = X_mix @ W_mix[2]  # (T, d_k): new, linear features of X
inside = (V_mix.min(dim=0).values <= out_mix) & (
    out_mix <= V_mix.max(dim=0).values
)
difference = (mix(2 * X_mix)[0] - 2 * out_mix).abs().max().item()
print("output = A @ V:", torch.allclose(out_mix, A_mix @ V_mix, atol=1e-6))
print("every output feature within its range over V:", bool(inside.all()))
print(f"largest difference, f(2 X) - 2 f(X): {difference:.2f}")

# %% [markdown]
# ## Exercises
#
# **1. Every score doubles.** If every scaled score is multiplied by 2, do the weights double,
# stay the same, or change some other way? Predict, then compare with each weight squared and
# its row divided by its new sum.

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
# softmax in float32, without and then with subtracting the maximum. Predict both results.

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
# **3. The transposition.** After `torch.manual_seed(1)`, does `X_pt @ proj.weight` equal
# `proj(X_pt)` for `proj = nn.Linear(4, 4, bias=False)`? And for `nn.Linear(4, 2, bias=False)`?

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
# **4. Reversing the tokens.** Reverse the three tokens and rerun steps 1 to 5 with identity
# projections. Predict the new weights and outputs first.

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
# - Vaswani et al. [Attention Is All You Need](https://arxiv.org/abs/1706.03762), NeurIPS
#   2017: scaled dot-product attention (section 3.2.1); the base model's $C = 512$ with 8
#   heads of $d_k = 64$ (section 3.2.2).
# - PyTorch: [`nn.Linear`](https://docs.pytorch.org/docs/stable/generated/torch.nn.Linear.html)
#   (the stored weight's shape and its initialisation),
#   [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html),
#   [`torch.allclose`](https://docs.pytorch.org/docs/stable/generated/torch.allclose.html) and
#   [`torch.testing.assert_close`](https://docs.pytorch.org/docs/stable/testing.html).
# - David Goldberg. [What Every Computer Scientist Should Know About Floating-Point
#   Arithmetic](https://docs.oracle.com/cd/E19957-01/806-3568/ncg_goldberg.html), 1991:
#   rounding, and why the order of additions matters.
#
# - Devlin et al. [BERT](https://arxiv.org/abs/1810.04805), 2019, section 3, and Dosovitskiy
#   et al. [An Image is Worth 16x16 Words](https://arxiv.org/abs/2010.11929) (ViT), 2021,
#   section 3.1: the class token.
#
# **Next:** [Causal self-attention, in depth](causal_in_depth.md), or back to the core path,
# [page 3: self-attention with a causal mask](causal_self_attention.md). Attention alone does
# not see the order of the tokens ([exercise 4](#exercises)); the
# [positions page](../concepts/positions.md) shows how models give it that order.

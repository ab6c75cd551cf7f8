# %% [markdown]
# # Scaled dot-product attention, step by step
#
# This tutorial follows ten tokens through every step of scaled dot-product attention:
# the projections to queries, keys and values, the scaled scores, the softmax, and the
# weighted sum of the values. It works one product of weights and values out by hand.
# Then it builds multi-head attention from the same steps, and checks the results
# against PyTorch.
#
# It assumes you know what queries, keys and values are for
# ([the mental model](../concepts/mental_model.md)), and have followed
# the steps once on three tokens
# ([From nn.Linear to self-attention](linear_to_self_attention.md)). The symbols are
# those of the [notation table](../notation.md): tokens are row vectors, $Q = X W_Q$,
# and shapes are `(B, T, C)` for tokens and `(B, H, T, d_k)` for heads.
#
# $$
# \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V
# $$
#
# The two tutorials before this one ran a head on three tokens, then on a batch with a
# causal mask. This one prints every intermediate, then splits the work into several
# heads. [Common mistakes](#common-mistakes), at the end, quotes mistakes that are easy to
# make here, with what is true instead.
#
# ## The input: ten tokens in a batch
#
# Each token is a row of ten features: fixed numbers that stand for token embeddings with
# a positional encoding already added (a vector per position, so that order can matter;
# [positions in attention](../concepts/positions.md) shows how such encodings are made). A
# batch axis in front gives the layout `(B, T, C)`: batch, tokens, channels (features).
# The first cell imports what the tutorial uses, then builds that tensor.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from IPython.display import Markdown
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from attn_ref import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from attn_ref.examples import AV_VALUES, AV_WEIGHTS, TEN_TOKENS
from attn_ref.plotting import attention_heatmap, figure_to_svg

torch.set_printoptions(precision=2, sci_mode=False)
np.set_printoptions(precision=2, suppress=True)  # 10 by 10: a row a line
torch.set_grad_enabled(False)  # forward passes only
print("torch", torch.__version__)

X = torch.tensor(TEN_TOKENS).unsqueeze(0)  # (T, C) -> (B, T, C)
B, T, C = X.shape
print(f"B = {B} sequence, T = {T} tokens, C = {C} features per token")
print("X[0], one token per row:", X[0].numpy(), sep="\n")

# %% [markdown]
# The width $C$ is the **last** axis, `X.size(-1)`; axis 1 counts the tokens. Here both
# are ten, which hides a mix-up of the two.
#
# ## Queries, keys and values
#
# Each token is projected three times: $Q = X W_Q$, $K = X W_K$ and $V = X W_V$, where $W_Q$
# and $W_K$ have shape $(C, d_k)$ and $W_V$ has shape $(C, d_v)$. A trained model learns
# these matrices. This first half takes identity matrices instead, so that the arithmetic of
# attention can be followed on the tokens themselves: $d_k = d_v = C$, and $Q$, $K$ and $V$
# are copies of $X$.

# %%
W_Q = W_K = W_V = torch.eye(C)  # (C, d_k) with d_k = C
Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # each (B, T, C) @ (C, C)
print("Q, K and V all equal X:", all(torch.equal(M, X) for M in (Q, K, V)))

# %% [markdown]
# ## Scaled scores
#
# The score of query $i$ for key $j$ is the dot product $q_i \cdot k_j$, divided by
# $\sqrt{d_k}$, the square root of the keys' width. `K.transpose(-2, -1)` swaps the
# last two axes of `K`, so that one product pairs every query with every key: a
# `(B, T, T)` tensor, one row per query.
#
# Why divide? If the components of $q$ and $k$ are zero-mean, unit-variance and
# independent, $q \cdot k$ has variance $d_k$, and dividing by $\sqrt{d_k}$ brings it back
# to one, whatever the width (derived in
# [the variance argument](../concepts/mental_model.md#the-variance-argument)). Without the
# division, wide keys give large scores, and large scores push the softmax towards one
# winner per row. These ten tokens need not meet those conditions, but the division
# still lowers the largest weight of every row, as the cell prints after the scores.

# %%
d_k = K.size(-1)  # the width of each key
scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (B, T, T)
print(f"d_k = {d_k}, sqrt(d_k) = {math.sqrt(d_k):.4f}")
print("scores.shape =", tuple(scores.shape))
print(scores[0].numpy())
unscaled = Q @ K.transpose(-2, -1)  # (B, T, T), not divided
print("largest weight of each row, without the division and with it:")
print(torch.softmax(unscaled, dim=-1).amax(dim=-1)[0].numpy())
print(torch.softmax(scores, dim=-1).amax(dim=-1)[0].numpy())

# %% [markdown]
# ## Softmax: from scores to weights
#
# A softmax along the last axis turns each row of scores into weights that are positive
# and sum to one. Row $i$ says how much token $i$ takes from each token. The heatmap
# below the printed checks shows every weight, one row per query and one column per key,
# with its value written in its cell.

# %%
weights = torch.softmax(scores, dim=-1)  # (B, T, T), over the keys
print("weights.shape =", tuple(weights.shape))
row_sums = weights.sum(dim=-1)  # (B, T)
print("every row sums to one:", torch.allclose(row_sums, torch.ones(B, T)))
strongest = weights[0].argmax(dim=-1)  # (T,): each query's strongest key
itself = torch.equal(strongest, torch.arange(T))
print("each token's strongest key is itself:", itself)
print("scores symmetric:", torch.allclose(scores, scores.mT))

# %% tags=["plot"]
labels = [f"t{i}" for i in range(T)]
fig, ax = plt.subplots(figsize=(4.4, 3.8), layout="constrained")
attention_heatmap(weights[0], labels, ax=ax, title="Q = K = V = X")
figure_to_svg(fig, alt="10 by 10 heatmap of the weights, a row per query")

# %% [markdown]
# The diagonal is bright. With identity projections, the score of token $i$ with itself
# is its squared length divided by $\sqrt{d_k}$, $x_i \cdot x_i / \sqrt{d_k}$, and here it
# is the largest score of every row. Nothing guarantees it: a token pointing the same way
# as $x_i$ but twice as long would score higher ([exercise 2](#exercises)).
#
# <details class="note">
# <summary>Going deeper: what identity projections hide</summary>
#
# With $W_Q = W_K = I$ the scores are symmetric: $q_i \cdot k_j = x_i \cdot x_j = q_j \cdot k_i$,
# so token $i$ scores token $j$ exactly as token $j$ scores token $i$. With learned
# projections the score is $x_i W_{QK} x_j^\top$ with $W_{QK} = W_Q W_K^\top$, and it equals
# the score of $j$ for $i$ for every pair of vectors only when $W_{QK}$ is symmetric: what a
# token looks for can differ from what it offers. The multi-head part below prints that
# its scores are not symmetric.
# And with $W_V = I$ the output is a blend of the tokens themselves, as wide as they
# are; multi-head attention, below, uses narrower heads.
#
# </details>
#
# ## The weighted sum of the values
#
# The output of token $i$ mixes the value rows with the weights of row $i$:
# $o_i = \sum_j a_{ij} v_j$, that is $O = A V$. It has one row per query and as many
# columns as $V$: the output is as wide as the values. `attn_ref`, this site's reference
# implementation, and PyTorch's own function compute the same.

# %%
output = weights @ V  # (B, T, T) @ (B, T, d_v) -> (B, T, d_v)
print("output.shape =", tuple(output.shape))
print(output[0].numpy())
ours, ours_w = scaled_dot_product_attention(Q, K, V)  # attn_ref
theirs = F.scaled_dot_product_attention(Q, K, V)  # PyTorch's
same = torch.allclose(output, ours, atol=1e-6) and torch.allclose(
    weights, ours_w, atol=1e-6
)
print("attn_ref agrees (allclose, atol=1e-6):", same)
print(
    "PyTorch agrees (allclose, atol=1e-6):",
    torch.allclose(output, theirs, atol=1e-6),
)
gap = (output - theirs).abs().max()
print(f"largest |difference| from PyTorch: {gap:.1e}")

# %% [markdown]
# ## A worked example: weights times values, by hand
#
# Take three tokens, weights $A$ whose rows sum to one, and values $V$ with four
# features. Each row of $O = AV$ mixes the three value rows, with the weights of the
# same row of $A$: row 0 is $a_{00} v_0 + a_{01} v_1 + a_{02} v_2$. Element by element,
# $O_{ij} = \sum_k A_{ik} V_{kj}$: row $i$ of $A$ times column $j$ of $V$. The cell
# prints the tensors, then writes every sum out from them.

# %%
A = torch.tensor(AV_WEIGHTS)  # (3, 3): row i weighs the 3 tokens
V_small = torch.tensor(AV_VALUES)  # (3, 4): one value row per token
AV = A @ V_small  # (3, 3) @ (3, 4) -> (3, 4)
print("A =", A.numpy(), "V =", V_small.numpy(), sep="\n")
print("AV =", AV.numpy(), sep="\n")
boxes = []  # one block of sums per row of O, typeset by the site
for i, a_row in enumerate(A.tolist()):
    lines = []
    for j, v_column in enumerate(V_small.T.tolist()):
        pairs = zip(a_row, v_column, strict=True)  # (A_ik, V_kj) for k = 0..2
        terms = " + ".join(rf"{a:.4g} \times {v:.4g}" for a, v in pairs)
        lines.append(rf"O_{{{i}{j}}} &= {terms} &&= {AV[i, j]:.4g}")
    boxes.append(
        "$$\n\\begin{aligned}" + r" \\ ".join(lines) + "\\end{aligned}\n$$"
    )
Markdown("\n\n".join(boxes))

# %% [markdown]
# ## Multi-head attention
#
# Multi-head attention runs $H$ attentions side by side. Head $h$ (counted from 0, like
# the tokens) has its own learned projections $W_Q^{(h)}$, $W_K^{(h)}$ and $W_V^{(h)}$,
# of shape $(C, d_k)$ with $d_k = C / H$. The heads' outputs are concatenated, and an
# output projection $W_O$ of shape $(C, C)$ mixes them:
#
# $$
# \text{head}_h = \operatorname{Attention}(X W_Q^{(h)},\; X W_K^{(h)},\; X W_V^{(h)})
# $$
#
# $$
# \operatorname{MultiHead}(X) = \operatorname{Concat}(\text{head}_0, \dots, \text{head}_{H-1})\, W_O
# $$
#
# In code the $H$ matrices $W_Q^{(h)}$ sit side by side in one $(C, C)$ matrix $W_Q$.
# One product projects the tokens for all heads at once, and a reshape hands each head
# its slice. $H$ must divide $C$; this tutorial takes two heads. The weights are those of
# a seeded, untrained `torch.nn.MultiheadAttention`: they show how the computation runs,
# not patterns worth interpreting.
#
# `nn.MultiheadAttention` stores its weights transposed, as `nn.Linear` does. Its
# `in_proj_weight`, of shape `(3C, C)`, stacks $W_Q^\top$, $W_K^\top$ and $W_V^\top$,
# and its `out_proj.weight` is $W_O^\top$. The cells transpose them back, so that the
# code reads like the notation: $Q = X W_Q + b_Q$, with the bias $b_Q$ the layer adds.
#
# Then `split_heads` cuts the features into $H$ slices of $d_k$ and moves the head axis
# in front of the tokens: `(B, T, C)` becomes `(B, H, T, d_k)`. Each head is then an
# independent batch of attention. Head 0 gets the first $d_k$ features of every token,
# head 1 the next.

# %%
torch.manual_seed(0)  # the layer's random initial weights
num_heads = 2
mha = nn.MultiheadAttention(C, num_heads, batch_first=True)
print("in_proj_weight:", tuple(mha.in_proj_weight.shape))  # W^T stacked
# (3C, C) -> three (C, C), each transposed back: W_Q, not W_Q^T
W_Q, W_K, W_V = (w.T for w in mha.in_proj_weight.chunk(3))
b_q, b_k, b_v = mha.in_proj_bias.chunk(3)  # (3C,) -> three (C,)
Q_mh = X @ W_Q + b_q  # (B, T, C) @ (C, C) -> (B, T, C)
K_mh = X @ W_K + b_k
V_mh = X @ W_V + b_v
full_scores = Q_mh @ K_mh.mT  # (B, T, T), all features at once
print("scores symmetric now:", torch.allclose(full_scores, full_scores.mT))
# (B, T, C) -> (B, H, T, d_k)
q, k, v = (split_heads(t, num_heads) for t in (Q_mh, K_mh, V_mh))
d_head = C // num_heads  # d_k of each head
print("q, k, v split into heads:", tuple(q.shape))
second = torch.equal(q[:, 1], Q_mh[..., d_head:])  # (B, T, d_k)
print(f"head 1 holds features {d_head}..{C - 1} of Q:", second)

# %% [markdown]
# ### Attention in each head
#
# The same scaled dot-product attention runs in every head at once. Each head divides by
# the square root of its own width $d_k = C / H$, not of $C$.

# %%
# (B, H, T, d_k) -> outputs (B, H, T, d_k) and weights (B, H, T, T)
head_outputs, head_weights = scaled_dot_product_attention(q, k, v)
print(f"scale 1/sqrt(d_k) = {1 / math.sqrt(d_head):.4f}")
print("head_outputs:", tuple(head_outputs.shape))
print("head_weights:", tuple(head_weights.shape))

# %% tags=["plot"]
size = (4.4, 3.8 * num_heads)  # the heads stacked, for narrow screens
fig, axes = plt.subplots(num_heads, 1, figsize=size, layout="constrained")
for h, ax in enumerate(axes):
    attention_heatmap(head_weights[0, h], labels, ax=ax, title=f"Head {h}")
figure_to_svg(
    fig, alt=f"{num_heads} heatmaps of 10 by 10 weights, a head each"
)

# %% [markdown]
# ### Concatenate, project, and check
#
# `merge_heads` undoes the split: it moves the head axis back behind the tokens and lays
# the heads' outputs side by side, `(B, H, T, d_k)` to `(B, T, H d_k)`, which is
# `(B, T, C)`. That is $\operatorname{Concat}(\text{head}_0, \dots, \text{head}_{H-1})$. Then
# $W_O$ mixes the heads' features, so that every output feature can draw on every head.
#
# PyTorch's layer, called on the same tokens, gives the same output and the same
# weights. So does `attn_ref.MultiHeadAttention`, once `from_torch` has copied the
# layer's weights into it.

# %%
concat = merge_heads(head_outputs)  # (B, H, T, d_k) -> (B, T, C)
W_O = mha.out_proj.weight.T  # stored as W_O^T: (C, C)
mh_output = concat @ W_O + mha.out_proj.bias  # (B, T, C)
print("mh_output.shape =", tuple(mh_output.shape))
# PyTorch's layer, asked for one (T, T) matrix of weights per head
mha_output, mha_head_weights = mha(X, X, X, average_attn_weights=False)
ours_mh_output, _ = MultiHeadAttention.from_torch(mha)(X, X, X)
checks = {
    "step by step == nn.MultiheadAttention": (mh_output, mha_output),
    "attn_ref == nn.MultiheadAttention": (ours_mh_output, mha_output),
    "per-head weights agree": (head_weights, mha_head_weights),
}
for label, (a, b) in checks.items():
    print(f"{label}:", torch.allclose(a, b, atol=1e-6))
gap = (mh_output - mha_output).abs().max()
print(f"largest |difference| of the outputs: {gap:.1e}")

# %% [markdown]
# <details class="note">
# <summary>Going deeper: the layouts and weights nn.MultiheadAttention returns</summary>
#
# By default `nn.MultiheadAttention` expects `(T, B, C)`, tokens first; `batch_first=True`,
# used here, makes it `(B, T, C)`, the layout of `scaled_dot_product_attention`. It
# returns the attention weights beside the output, averaged over the heads, `(B, T, T)`,
# unless `average_attn_weights=False` asks for one matrix per head, `(B, H, T, T)`. With
# `need_weights=False` it returns no weights, and its documentation says it can then use
# the optimized `scaled_dot_product_attention` and reach its best performance.
#
# </details>
#
# ### What several heads cost
#
# The paper that introduced multi-head attention says that, because each head is
# narrower, "the total computational cost is similar to that of single-head attention
# with full dimensionality" (Vaswani et al., 2017, section 3.2.2). That is true of the
# arithmetic, not of the memory. PyTorch's `FlopCounterMode` counts the floating-point
# operations (FLOPs) of matrix products. The cell counts them at sizes like those of a
# large language model, $T = 16384$ tokens of width $C = 4096$, on tensors of PyTorch's
# `meta` device. Those have shapes but no data: nothing is computed or allocated, yet the
# shapes, the counts and the sizes are those of the real computation.


# %%
def counted(f, *args):
    """f(*args), and the FLOPs PyTorch counts in its matrix products."""
    with FlopCounterMode(display=False) as counter:
        result = f(*args)
    return result, counter.get_total_flops()


x_big = torch.empty(1, 16384, 4096, device="meta")  # (B, T, C), no data
W_big = torch.empty(4096, 4096, device="meta")  # (C, C)
_, flops = counted(lambda: [x_big @ W_big for _ in range(4)])  # 4 of them
print(f"the four projections, for any H: {flops:.3e} FLOPs")
print("  H   d_k  QK^T and AV FLOPs  (B, H, T, T) weights")
for H in (1, 8, 32):
    q_big = split_heads(x_big, H)  # (B, H, T, C / H)
    (_, w), n = counted(scaled_dot_product_attention, q_big, q_big, q_big)
    print(f"{H:3}  {q_big.size(-1):4}  {n:17.3e}  {w.nbytes / 2**30:g} GiB")

# %% [markdown]
# - The projections cost the same whatever $H$: they are the same $(C, C)$ products, and
#   the heads are cut out of their results.
# - The products $QK^\top$ and $AV$ cost $2 T^2 d_k$ FLOPs each, per head and sequence (a
#   multiplication and an addition per term). $H$ heads of width $C / H$ cost exactly
#   what one head of width $C$ costs.
# - The scores and the weights are `(B, H, T, T)`: $H$ times the memory of one head's
#   `(B, T, T)`. The scaling and the softmax also act on each of their elements, so
#   their work grows $H$ times too. That stays small next to the products while $d_k$ is
#   large: per element of the scores, the two products do $4 d_k$ FLOPs, the softmax a
#   few operations. (Kernels that never store the whole matrix avoid its memory: see
#   [Attention without the T×T matrix](efficient_attention.md).)
#
# ## Summary
#
# - The width of the tokens is the **last** axis of `(B, T, C)`; the tokens are axis 1.
# - The scores are $QK^\top / \sqrt{d_k}$, one row per query. The softmax turns each row
#   into weights that sum to one. The output mixes the value rows with those weights,
#   and is as wide as the values.
# - Multi-head attention splits the projected features into $H$ heads of $C / H$,
#   attends in each, concatenates the heads and projects them with $W_O$. Step by step,
#   `attn_ref` and `torch.nn.MultiheadAttention` agree.
# - $H$ heads cost the FLOPs of one head of full width, but their scores and weights, when
#   stored, take $H$ times the memory.
#
# Next: [the transformer block](../concepts/transformer_block.md) puts multi-head attention
# where a model uses it, between a layer norm and the residual stream, beside an MLP.
#
# ## Common mistakes
#
# This tutorial began as a rewrite of a notebook that follows the same ten tokens, called
# *the original notebook* below. It gets the steps of attention right. Where its code, its
# numbers or its words are not right, they are quoted below, each with what is true,
# computed.
#
# **1. `d_model = pos_encoded_embeddings.size(1)`.** It reads the model width from the
# token axis. In a `(B, T, C)` tensor axis 1 is $T$, the
# number of tokens; the width $C$ is `size(-1)`. Its code runs only because its example
# has as many tokens as features. Keep the first four tokens, and its identity matrix
# gets the wrong size (first lines of the cell below).
# [The input](#the-input-ten-tokens-in-a-batch) reads the width from the last axis.
#
# **2. "$O$ is the output matrix of shape (number of tokens, $d_\text{model}$)".**
# It takes the output's width from the model, and gives the values the same shape. But the
# output takes its width from the values, not from the model: $O = AV$ has as many columns
# as $V$, which equals $d_\text{model}$ there only because its $W_V$ is square. Values four
# features wide give an output four features wide (last lines of the cell), as [the weighted
# sum of the values](#the-weighted-sum-of-the-values) says.

# %%
first_four = X[:, :4, :]  # (B, 4, C): now T and C differ
try:
    first_four @ torch.eye(first_four.size(1))  # its d_model: T, not C
except RuntimeError as error:
    print("identity of size(1): RuntimeError:", error)
right = first_four @ torch.eye(first_four.size(-1))  # (B, 4, C)
print("identity of size(-1): shape", tuple(right.shape))
narrow = weights @ V[..., :4]  # values 4 features wide: (B, T, 4)
print("values of width 4 give an output of shape", tuple(narrow.shape))

# %% [markdown]
# **3. Its "Expected Output", `original_claimed` in the cell below.** It writes out the
# sums of the
# [worked example](#a-worked-example-weights-times-values-by-hand) correctly, then gives
# a result that is wrong in most entries. A quick check shows that it cannot be right:
# each row of $A$ sums to one, and each row of $V$ rises by the same step from one column
# to the next, so each row of $O = AV$ must rise by that same step. Its rows rise by
# another. It also calls each output element "a weighted sum of the corresponding value
# matrix"; it is each output *row* that is a weighted sum, of the value *rows*. The
# first lines of the cell below check it.
#
# **4. "Combining Heads and Final Linear Transformation".** Its last step is one head and
# a random layer. It sets
# `heads = 1` and `head_dim = d_model`, reshapes the output with
# `view(N, -1, heads * head_dim)`, and passes it through a freshly created `nn.Linear`.
# With one head there is nothing to combine: the reshape returns the same tensor. The
# linear layer is untrained and created without a random seed, so its "final output" is
# random numbers that change from run to run, and nobody can reproduce the matrix it
# prints. Two layers created from two seeds show how much the result depends on the
# draw (last lines of the cell). What the step should be is
# [multi-head attention](#multi-head-attention), above.

# %%
# 3. The original notebook's "Expected Output", quoted
original_claimed = torch.tensor(
    [
        [0.62, 0.74, 0.86, 0.98],
        [0.42, 0.54, 0.66, 0.78],
        [0.64, 0.76, 0.88, 1.00],
    ]
)
wrong = ~torch.isclose(original_claimed, AV, atol=5e-3)  # (3, 4)
print(f"wrong entries: {int(wrong.sum())} of {wrong.numel()}")
print("step from column to column in V, in AV, and in its result:")
steps = [M.diff(dim=-1).numpy() for M in (V_small, AV, original_claimed)]
print(*steps, sep="\n")

# 4. its view(N, -1, heads * head_dim), with heads = 1 and head_dim = C
combined = output.view(B, -1, 1 * C)
print("the reshape changed nothing:", torch.equal(combined, output))
finals = []
for seed in (0, 1):
    torch.manual_seed(seed)
    finals.append(nn.Linear(C, C)(combined))  # random, untrained
gap = (finals[0] - finals[1]).abs().max()
print(f"two random 'final outputs' differ by up to {gap:.2f}")

# %% [markdown]
# ## Exercises
#
# **1. Shift the keys, then the queries.** Add the same vector $c$ to every key of the
# identity-projection example, and keep the queries. Predict whether the weights change.
# Then add $c$ to every query instead, and keep the keys. Compute both, and explain.

# %% tags=["solution"]
g = torch.Generator().manual_seed(1)
c = torch.randn(C, generator=g)  # (C,): the same vector for every token
scale = 1 / math.sqrt(d_k)
keys_shifted = torch.softmax(Q @ (K + c).mT * scale, dim=-1)  # (B, T, T)
queries_shifted = torch.softmax((Q + c) @ K.mT * scale, dim=-1)
change_k = (keys_shifted - weights).abs().max()
change_q = (queries_shifted - weights).abs().max()
print(f"keys + c:    largest change in the weights {change_k:.1e}")
print(f"queries + c: largest change in the weights {change_q:.2f}")
# Keys: q_i . c is added to the whole of row i, which a softmax ignores.
# Queries: c . k_j changes from key to key, so the weights move.

# %% [markdown]
# **2. A token that outshines itself.** Every token above gives its largest weight to
# itself. Append an eleventh token, $2 x_0$. Derive which key query 0 now prefers, and
# the ratio of its weight on the new token to its weight on itself. Then compute both.

# %% tags=["solution"]
X11 = torch.cat([X, 2 * X[:, :1]], dim=1)  # (B, T + 1, C): t10 is 2 x_0
_, weights11 = scaled_dot_product_attention(X11, X11, X11)  # W = I
row = weights11[0, 0]  # the weights of query 0: (T + 1,)
print("query 0's strongest key:", row.argmax().item())
print(f"weight on t10 / weight on t0: {(row[10] / row[0]).item():.2f}")
derived = math.exp((X[0, 0] @ X[0, 0]).item() / math.sqrt(d_k))
print(f"derived, exp(|x_0|^2 / sqrt(d_k)): {derived:.2f}")
# Query 0 gives t10 the score 2 |x_0|^2 / sqrt(d_k), twice t0's; and two
# weights of one row are in the ratio e^(s - s') of their scores s, s'.

# %% [markdown]
# **3. Merge the heads with a reshape.** A common bug merges the heads with
# `head_outputs.reshape(B, T, C)` and no transpose. Predict whether it raises an error,
# and which numbers land in row 0. Then fix it without `merge_heads`.

# %% tags=["solution"]
broken = head_outputs.reshape(B, T, C)  # no error: the sizes match
print("broken merge == concat:", torch.equal(broken, concat))
first_two = head_outputs[0, 0, :2].flatten()  # head 0, tokens 0 and 1
same_row = torch.equal(broken[0, 0], first_two)
print("row 0 is head 0 of tokens 0, 1:", same_row)
# (B, H, T, d_k) -> (B, T, H, d_k) -> (B, T, C)
fixed = head_outputs.transpose(1, 2).reshape(B, T, C)
print("fixed merge == concat:", torch.equal(fixed, concat))
# reshape reads memory in order, all of head 0 first: a row of C numbers
# holds C / d_k tokens of one head. The transpose puts heads side by side.

# %% [markdown]
# ## References
#
# - Ashish Vaswani, Noam Shazeer, Niki Parmar, Jakob Uszkoreit, Llion Jones, Aidan N.
#   Gomez, Łukasz Kaiser, Illia Polosukhin.
#   [Attention Is All You Need](https://arxiv.org/abs/1706.03762). NeurIPS 2017.
#   Scaled dot-product attention (section 3.2.1), multi-head attention and its cost
#   (section 3.2.2).
# - PyTorch documentation:
#   [`torch.nn.functional.scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html),
#   [`torch.nn.MultiheadAttention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html)
#   (its `in_proj_weight`, `need_weights` and `average_attn_weights`),
#   [`torch.nn.Linear`](https://docs.pytorch.org/docs/stable/generated/torch.nn.Linear.html)
#   (its `weight` of shape `(out_features, in_features)`), and
#   [`FlopCounterMode`](https://docs.pytorch.org/docs/main/generated/torch.utils.flop_counter.FlopCounterMode.html).
# - On this site: [the variance argument](../concepts/mental_model.md#the-variance-argument)
#   for dividing by $\sqrt{d_k}$, and the [notation table](../notation.md).

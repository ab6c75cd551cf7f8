# %% [markdown]
# # Scaled dot-product attention, step by step
#
# Ten tokens, each an embedding with ten features to which a positional encoding
# (a fixed vector per position, so that order can matter) has been added, go through
# every step of scaled dot-product attention here: projections to queries, keys
# and values, scaled scores, softmax, and the weighted sum of the values. Every
# intermediate is printed with its shape. Then the product of attention weights
# and values is worked out by hand on a small example, and the tutorial ends
# with real multi-head attention on the same ten tokens, checked against
# `torch.nn.MultiheadAttention` and with `attn_ref`, this site's small reference
# implementation of attention.
#
# <div class="arithmatex">
# $$
# \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V
# $$
# </div>
#
# The tutorial grew out of a colleague's notebook (the *seed*). Where the seed's
# code, numbers or explanations are wrong, a warning says so and the cell below
# it computes what is true. The site runs this file in a fresh kernel at every
# build, and the button above downloads it as a notebook.

# %%
import math

import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown
from torch import nn

from attn_ref import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from attn_ref.examples import AV_VALUES, AV_WEIGHTS, TEN_TOKENS
from attn_ref.plotting import attention_heatmap, figure_to_svg

torch.set_printoptions(precision=4, sci_mode=False, linewidth=68)
torch.set_grad_enabled(False)  # forward passes only: no gradients
print("torch", torch.__version__)

# %% [markdown]
# ## The input: one batch of ten tokens
#
# The embeddings come from `attn_ref.examples.TEN_TOKENS`, one row per token.
# A batch axis in front gives the layout `(B, T, C)`, for batch, tokens (time)
# and channels (features): the layout of `torch.nn.functional.scaled_dot_product_attention`,
# and of `nn.MultiheadAttention` when it is created with `batch_first=True` (its
# default is `(T, B, C)`).

# %%
X = torch.tensor(TEN_TOKENS).unsqueeze(0)  # (T, C) -> (B, T, C)
B, T, C = X.shape
print(f"X.shape = {tuple(X.shape)}")
print(f"B = {B} sequence, T = {T} tokens, C = {C} features per token")
X

# %% [markdown]
# <div class="admonition warning">
# <p class="admonition-title">The seed reads the model width from the wrong axis</p>
#
# The seed sets `d_model = pos_encoded_embeddings.size(1)`. Axis 1 of a
# `(B, T, C)` tensor is `T`, the number of tokens; the model width `C` is the
# last axis, `size(-1)`. The seed's code only runs because this example has as
# many tokens as features. Take the first four tokens and the two axes part
# ways: the seed's identity matrix gets the wrong size and the product fails.
#
# </div>

# %%
print("X.size(1) =", X.size(1), "(tokens)")
print("X.size(-1) =", X.size(-1), "(features)")

first_four = X[:, :4, :]  # (B, T, C) -> (B, 4, C)
print("first_four.shape =", tuple(first_four.shape))
print("first_four.size(1) =", first_four.size(1))
print("first_four.size(-1) =", first_four.size(-1))
try:
    first_four @ torch.eye(first_four.size(1))  # the seed's d_model
except RuntimeError as error:
    print("identity of size(1): RuntimeError:", error)
fixed = first_four @ torch.eye(first_four.size(-1))  # (B, 4, C)
print("identity of size(-1): shape", tuple(fixed.shape))

# %% [markdown]
# ## Queries, keys and values
#
# Each token is projected three times: $Q = X W^Q$, $K = X W^K$, $V = X W^V$.
# Like the seed, this first half uses identity matrices for the three
# projections, so that the arithmetic of attention can be followed on the raw
# embeddings. The model width is read from the last axis.

# %%
d_model = X.size(-1)  # C, the features per token
W_q = torch.eye(d_model)  # (C, C)
W_k = torch.eye(d_model)  # (C, C)
W_v = torch.eye(d_model)  # (C, C)

Q = X @ W_q  # (B, T, C) @ (C, C) -> (B, T, C)
K = X @ W_k  # (B, T, C) @ (C, C) -> (B, T, C)
V = X @ W_v  # (B, T, C) @ (C, C) -> (B, T, C)
print("d_model =", d_model)
print("Q.shape =", tuple(Q.shape))
print("Q =", Q, sep="\n")

# %%
print("K.shape =", tuple(K.shape))
print("K =", K, sep="\n")

# %%
print("V.shape =", tuple(V.shape))
print("V =", V, sep="\n")
same = torch.equal(Q, X) and torch.equal(K, X) and torch.equal(V, X)
print("Q, K and V all equal X:", same)

# %% [markdown]
# ## Scaled scores
#
# The score of query $i$ for key $j$ is the dot product $q_i \cdot k_j$,
# divided by $\sqrt{d_k}$, where $d_k$ is the width of the keys: the last axis
# of `K`. `K.transpose(-2, -1)` swaps the token and feature axes, so the
# product pairs every query with every key.

# %%
d_k = K.size(-1)  # the width of each key
# (B, T, d_k) @ (B, d_k, T) -> (B, T, T)
scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)
print(f"d_k = {d_k}, sqrt(d_k) = {math.sqrt(d_k):.4f}")
print("scores.shape =", tuple(scores.shape))
scores

# %% [markdown]
# Why divide? If the features of $q$ and $k$ were independent with variance
# one, $q \cdot k$ would be a sum of $d_k$ such products and have variance
# $d_k$. Large scores push the softmax towards a single winner per row.
# Dividing by $\sqrt{d_k}$ brings the variance back to one. The cell below
# compares the largest weight of each row with and without the division.

# %%
unscaled = Q @ K.transpose(-2, -1)  # (B, T, T)
print("largest weight per row, scaled:")
print(torch.softmax(scores, dim=-1).amax(dim=-1))
print("largest weight per row, unscaled:")
print(torch.softmax(unscaled, dim=-1).amax(dim=-1))

# %% [markdown]
# ## Softmax: from scores to weights
#
# A softmax along the last axis turns each row of scores into weights that are
# positive and sum to one: row $i$ says how much token $i$ takes from each
# token.

# %%
weights = torch.softmax(scores, dim=-1)  # (B, T, T), over the keys
print("weights.shape =", tuple(weights.shape))
print("row sums:", weights.sum(dim=-1))
weights

# %%
token_labels = [f"t{i}" for i in range(T)]
ax = attention_heatmap(
    weights[0],
    query_labels=token_labels,
    title="Identity projections (Q = K = V = X)",
)
figure_to_svg(
    ax.figure, alt="Heatmap of the 10 by 10 attention weights with identity projections, one row per query"
)

# %% [markdown]
# <div class="admonition note">
# <p class="admonition-title">What the identity projections hide</p>
#
# With $W^Q = W^K = W^V = I$ there is nothing to learn, and three things hold
# here that do not hold in a trained model:
#
# - **The scores are symmetric**: $q_i \cdot k_j = x_i \cdot x_j = q_j \cdot k_i$,
#   so token $i$ scores token $j$ exactly as token $j$ scores token $i$. With
#   learned projections the score is $x_i W^Q (W^K)^\top x_j^\top$, which differs
#   from the score of $j$ for $i$ unless $W^Q (W^K)^\top$ is symmetric: what a
#   token looks for can differ from what it offers.
# - **Tokens mostly attend to themselves**: $x_i \cdot x_i = \lVert x_i \rVert^2$
#   is often the largest score in row $i$. That is not guaranteed (a longer
#   vector can beat it), but the cell below shows it is true for every token
#   here: the heatmap's bright diagonal.
# - **The output is a blend of the inputs themselves**, since $V = X$, and the
#   key width $d_k$ is the model width; multi-head attention, below, uses
#   narrower heads.
#
# </div>

# %%
print("scores symmetric:", torch.allclose(scores, scores.mT))
strongest = weights[0].argmax(dim=-1)  # (T,): the strongest key per query
print("strongest key of each query:", strongest.tolist())
itself = torch.equal(strongest, torch.arange(T))
print("every token's strongest key is itself:", itself)

# %% [markdown]
# ## The weighted sum of the values
#
# The output for token $i$ mixes the value rows with the weights of row $i$:
# $o_i = \sum_j A_{ij} v_j$, that is $O = A V$.

# %%
output = weights @ V  # (B, T, T) @ (B, T, C) -> (B, T, C)
print("output.shape =", tuple(output.shape))
output

# %% [markdown]
# The same computation by `attn_ref.scaled_dot_product_attention` and by
# PyTorch's `torch.nn.functional.scaled_dot_product_attention`:

# %%
ours_output, ours_weights = scaled_dot_product_attention(Q, K, V)
torch_output = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
print("attn_ref output matches:", torch.allclose(output, ours_output))
print("attn_ref weights match:", torch.allclose(weights, ours_weights))
print("PyTorch output matches:", torch.allclose(output, torch_output))
gap = (output - torch_output).abs().max().item()
print(f"largest |difference| from PyTorch: {gap:.2e}")

# %% [markdown]
# <div class="admonition warning">
# <p class="admonition-title">The seed's shapes leave out two things</p>
#
# The seed gives the weights the shape (tokens, tokens) and the values and the
# output the shape (tokens, $d_\text{model}$). In its own ten-token code every
# one of them also has the batch axis in front, `(B, T, T)` and `(B, T, C)`. And the
# output takes its width from the **values**, not from the model: $O = AV$ has
# as many columns as $V$, which equals $d_\text{model}$ here only because $W^V$
# is square. Values four features wide give an output four features wide; the
# worked example below has four value columns, and each head of the multi-head
# attention further down has $C / H$.
#
# </div>

# %%
print("weights:", tuple(weights.shape))
print("values: ", tuple(V.shape))
print("output: ", tuple(output.shape))
narrow_values = V[..., :4]  # (B, T, C) -> (B, T, 4)
narrow_output = weights @ narrow_values  # (B, T, T) @ (B, T, 4)
print("values four features wide:", tuple(narrow_values.shape))
print("give an output of shape:  ", tuple(narrow_output.shape))

# %% [markdown]
# ## A worked example: attention weights times values, by hand
#
# Three tokens, weights $A$ of shape (3, 3) whose rows sum to one, and values
# $V$ with four features. The product is the same computation as the doctest
# in `attn_ref.examples`, which pins its result: the doctest fails if the data
# change.

# %%
A = torch.tensor(AV_WEIGHTS)  # (3, 3): row i weighs the 3 tokens
V_small = torch.tensor(AV_VALUES)  # (3, 4): one value row per token
AV = A @ V_small  # (3, 3) @ (3, 4) -> (3, 4), as in the doctest
print("A.shape =", tuple(A.shape), " row sums:", A.sum(dim=-1))
print("V.shape =", tuple(V_small.shape))
print("AV.shape =", tuple(AV.shape))
AV


# %% [markdown]
# Element by element, $O_{ij} = \sum_k A_{ik} V_{kj}$: row $i$ of $A$ times
# column $j$ of $V$. The cell below writes out every sum from the tensors
# above (nothing is typed in by hand):


# %%
def number(x: torch.Tensor) -> str:
    """A tensor element as a short decimal: 0.2, 0.62, 1."""
    return f"{x.item():.4g}"


def display_math(environment: str, latex: str) -> str:
    """A LaTeX environment shown as display math, in a box that scrolls sideways."""
    begin, end = rf"\begin{{{environment}}}", rf"\end{{{environment}}}"
    return f'<div class="arithmatex">\n{begin}\n{latex}\n{end}\n</div>\n\n'


blocks = []
for i in range(A.size(0)):  # one block of sums per row of O
    lines = []
    for j in range(V_small.size(1)):
        pairs = zip(A[i], V_small[:, j], strict=True)  # (A_ik, V_kj) for each k
        terms = " + ".join(rf"{number(a)} \times {number(v)}" for a, v in pairs)
        result = number(AV[i, j])
        lines.append(rf"O_{{{i + 1}{j + 1}}} &= {terms} &&= {result}")
    blocks.append(display_math("align*", " \\\\\n".join(lines)))
rows = r" \\ ".join(" & ".join(number(x) for x in row) for row in AV)
matrix = rf"O = AV = \begin{{bmatrix}} {rows} \end{{bmatrix}}"
Markdown("".join(blocks) + display_math("equation*", matrix))

# %% [markdown]
# Read row by row, each output row is a mix of the three value rows, with the
# weights of the same row of $A$:

# %%
row_0 = A[0, 0] * V_small[0] + A[0, 1] * V_small[1] + A[0, 2] * V_small[2]
print("A[0] =", A[0])
print("A[0,0]*V[0] + A[0,1]*V[1] + A[0,2]*V[2] =")
print(row_0)
print("AV[0] =")
print(AV[0])

# %% [markdown]
# <div class="admonition warning">
# <p class="admonition-title">The seed's "Expected Output" is wrong</p>
#
# The seed writes the sums out correctly but evaluates them wrongly. Its
# matrix is quoted in the cell below and compared with the product computed
# above. There is a quick way to see that it cannot be right: every row of $A$
# sums to one and every row of $V$ rises by the same step from one column to
# the next, so every row of $O = AV$ must rise by that same step too. The seed's
# rows rise by a different one. The seed also says each output element is "a
# weighted sum of the corresponding value matrix"; it is the value *rows* that
# are mixed, as shown above.
#
# </div>

# %%
# The seed's "Expected Output", quoted
seed_claimed = torch.tensor(
    [
        [0.62, 0.74, 0.86, 0.98],
        [0.42, 0.54, 0.66, 0.78],
        [0.64, 0.76, 0.88, 1.00],
    ]
)
wrong = ~torch.isclose(seed_claimed, AV, atol=5e-3)  # (3, 4)
print(f"entries the seed got wrong: {int(wrong.sum())} of {wrong.numel()}")
print("seed minus computed:", seed_claimed - AV, sep="\n")
print("step from column to column in V:", V_small.diff(dim=-1), sep="\n")
print("step from column to column in AV:", AV.diff(dim=-1), sep="\n")
print("step in the seed's matrix:", seed_claimed.diff(dim=-1), sep="\n")

# %% [markdown]
# ## The seed's "combining heads" is not multi-head attention
#
# <div class="admonition warning">
# <p class="admonition-title">One head, a reshape that does nothing, and a random layer</p>
#
# The seed's last step sets `heads = 1` and `head_dim = d_model`, reshapes the
# output with `view(N, -1, heads * head_dim)`, and passes it through a freshly
# created `nn.Linear`. With one head there is nothing to concatenate: the
# reshape returns the same tensor. The linear layer is untrained and created
# without a seed, so its "final output" is random numbers that change on every
# run; nobody can reproduce the seed's printed matrix. Two layers created from
# two seeds show how much the result depends on the draw:
#
# </div>

# %%
heads, head_dim = 1, d_model
combined = output.view(B, -1, heads * head_dim)  # (B, T, 1 * C)
print("the reshape changed nothing:", torch.equal(combined, output))

finals = []
for seed in (0, 1):
    torch.manual_seed(seed)
    fc_out = nn.Linear(heads * head_dim, d_model)  # random, untrained
    finals.append(fc_out(combined))  # (B, T, C) -> (B, T, C)
gap = (finals[0] - finals[1]).abs().max().item()
print(f"largest |difference| between two random 'final outputs': {gap:.4f}")

# %% [markdown]
# ## Multi-head attention, for real
#
# Multi-head attention runs $H$ attentions side by side, each in its own
# slice of $d_k = C / H$ features, with learned projections, then concatenates
# the heads and mixes them with an output projection $W^O$:
#
# <div class="arithmatex">
# $$
# \text{head}_h = \operatorname{Attention}(X W^Q_h,\; X W^K_h,\; X W^V_h)
# $$
# </div>
#
# <div class="arithmatex">
# $$
# \operatorname{MultiHead}(X) = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_H)\, W^O
# $$
# </div>
#
# $H$ must divide $C$; the cell prints which head counts fit, and takes two.
# The weights are those of a seeded `torch.nn.MultiheadAttention`, untrained,
# so the heads show *how* the computation works, not patterns worth
# interpreting. PyTorch stores the three input projections stacked in one
# `(3C, C)` matrix, and applies each as $x W^\top + b$.

# %%
print("head counts that divide C:", [h for h in range(1, C + 1) if C % h == 0])
num_heads = 2
torch.manual_seed(0)
mha = nn.MultiheadAttention(embed_dim=C, num_heads=num_heads, batch_first=True)
d_head = C // num_heads  # d_k of each head
print(f"C = {C}, num_heads = {num_heads}, d_k per head = {d_head}")
print("in_proj_weight:", tuple(mha.in_proj_weight.shape))
print("out_proj.weight:", tuple(mha.out_proj.weight.shape))

# (3C, C) -> three (C, C), and (3C,) -> three (C,)
W_q_mh, W_k_mh, W_v_mh = mha.in_proj_weight.chunk(3)
b_q_mh, b_k_mh, b_v_mh = mha.in_proj_bias.chunk(3)
Q_mh = X @ W_q_mh.T + b_q_mh  # (B, T, C) @ (C, C) -> (B, T, C)
K_mh = X @ W_k_mh.T + b_k_mh  # (B, T, C) @ (C, C) -> (B, T, C)
V_mh = X @ W_v_mh.T + b_v_mh  # (B, T, C) @ (C, C) -> (B, T, C)
print("Q.shape =", tuple(Q_mh.shape))
print("K.shape =", tuple(K_mh.shape))
print("V.shape =", tuple(V_mh.shape))
raw = Q_mh @ K_mh.mT  # (B, T, T)
print("scores symmetric now:", torch.allclose(raw, raw.mT))

# %% [markdown]
# ### Split into heads
#
# `split_heads` cuts the features into $H$ slices of $d_k$ and moves the head
# axis in front of the tokens, so that each head is an independent batch of
# attention: `(B, T, C)` becomes `(B, H, T, d_k)`. Head 0 gets the first $d_k$
# features of every token, head 1 the next.

# %%
q = split_heads(Q_mh, num_heads)  # (B, T, C) -> (B, H, T, d_k)
k = split_heads(K_mh, num_heads)  # (B, T, C) -> (B, H, T, d_k)
v = split_heads(V_mh, num_heads)  # (B, T, C) -> (B, H, T, d_k)
print("q.shape =", tuple(q.shape))
print("k.shape =", tuple(k.shape))
print("v.shape =", tuple(v.shape))
for h in range(num_heads):
    features = Q_mh[..., h * d_head : (h + 1) * d_head]  # (B, T, d_k)
    print(
        f"head {h} holds features {h * d_head}..{(h + 1) * d_head - 1}:",
        torch.equal(q[:, h], features),
    )

# %% [markdown]
# ### Attention in each head
#
# The same scaled dot-product attention as above runs in every head at once.
# Each head divides by the square root of its own width $d_k = C / H$, not of
# $C$.

# %%
# (B, H, T, d_k) -> outputs (B, H, T, d_k) and weights (B, H, T, T)
head_outputs, head_weights = scaled_dot_product_attention(q, k, v)
print(f"scale 1/sqrt(d_k) = {1 / math.sqrt(q.size(-1)):.4f}")
print("head_outputs.shape =", tuple(head_outputs.shape))
print("head_weights.shape =", tuple(head_weights.shape))
torch_heads = torch.nn.functional.scaled_dot_product_attention(q, k, v)
print(
    "PyTorch's function agrees:",
    torch.allclose(head_outputs, torch_heads, atol=1e-6),
)
for h in range(num_heads):
    strongest = head_weights[0, h].argmax(dim=-1).tolist()
    print(f"head {h}, strongest key of each query: {strongest}")

# %%
fig, axes = plt.subplots(
    num_heads,
    1,
    figsize=(7.7, 6.3 * num_heads),
    layout="constrained",
)
for h, ax in enumerate(axes):
    attention_heatmap(
        head_weights[0, h],
        query_labels=token_labels,
        ax=ax,
        title=f"Head {h} (random, untrained projections)",
    )
figure_to_svg(fig, alt=f"{num_heads} heatmaps of 10 by 10 attention weights, one per head, one row per query")

# %% [markdown]
# ### Concatenate the heads
#
# `merge_heads` undoes the split: it moves the head axis back behind the
# tokens and lays the heads' outputs side by side, `(B, H, T, d_k)` to
# `(B, T, H * d_k)`, which is `(B, T, C)`. That is
# $\operatorname{Concat}(\text{head}_1, \dots, \text{head}_H)$:

# %%
concat = merge_heads(head_outputs)  # (B, H, T, d_k) -> (B, T, H * d_k)
side_by_side = torch.cat(head_outputs.unbind(dim=1), dim=-1)  # (B, T, C)
print("concat.shape =", tuple(concat.shape))
print("same as torch.cat of the heads:", torch.equal(concat, side_by_side))

# %% [markdown]
# ### The output projection
#
# $W^O$ mixes the heads' features, so that every output feature can draw on
# every head:

# %%
W_o, b_o = mha.out_proj.weight, mha.out_proj.bias  # (C, C), (C,)
mh_output = concat @ W_o.T + b_o  # (B, T, C) @ (C, C) -> (B, T, C)
print("mh_output.shape =", tuple(mh_output.shape))
mh_output

# %% [markdown]
# ### Check against `torch.nn.MultiheadAttention`
#
# PyTorch's layer, called on the same tokens, gives the same output.
# `attn_ref.MultiHeadAttention.from_torch` copies the layer's weights into
# `attn_ref`'s own implementation, which reproduces it too. By default PyTorch
# returns the weights averaged over the heads, `(B, T, T)`; the mean of the
# per-head weights above is the same matrix, and with
# `average_attn_weights=False` PyTorch returns the per-head weights themselves.

# %%
# (B, T, C) and the head-averaged weights (B, T, T)
mha_output, mha_weights = mha(X, X, X)
print("mha output:", tuple(mha_output.shape))
print("mha weights:", tuple(mha_weights.shape))
print(
    "step by step == nn.MultiheadAttention:",
    torch.allclose(mh_output, mha_output, atol=1e-6),
)

ours = MultiHeadAttention.from_torch(mha)
ours_mh_output, ours_head_weights = ours(X, X, X)  # (B, T, C), (B, H, T, T)
print(
    "MultiHeadAttention.from_torch(mha) == nn.MultiheadAttention:",
    torch.allclose(ours_mh_output, mha_output, atol=1e-6),
)
gap = (ours_mh_output - mha_output).abs().max().item()
print(f"  largest |difference|: {gap:.2e}")

mean_weights = head_weights.mean(dim=1)  # (B, H, T, T) -> (B, T, T)
print(
    "mean of the per-head weights == mha's averaged weights:",
    torch.allclose(mean_weights, mha_weights, atol=1e-6),
)
gap = (mean_weights - mha_weights).abs().max().item()
print(f"  largest |difference|: {gap:.2e}")

_, mha_head_weights = mha(X, X, X, average_attn_weights=False)
print(
    "per-head weights == mha's with average_attn_weights=False:",
    torch.allclose(ours_head_weights, mha_head_weights, atol=1e-6),
)

# %% [markdown]
# ## Summary
#
# - The model width is the **last** axis of `(B, T, C)`; the token count is
#   axis 1. Reading the wrong one only goes unnoticed while the two are equal.
# - Scores are $QK^\top / \sqrt{d_k}$, one row per query; the softmax turns each
#   row into weights that sum to one; the output mixes the value rows with
#   those weights, and is as wide as the values.
# - Multi-head attention splits the projected features into $H$ heads of
#   $C / H$, attends in each, concatenates the heads and projects them with
#   $W^O$. Step by step, `attn_ref` and `torch.nn.MultiheadAttention` agree.

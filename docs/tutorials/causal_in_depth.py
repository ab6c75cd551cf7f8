# %% [markdown]
# # Causal self-attention, in depth
#
# [Page 3 of the core path](causal_self_attention.md) added the causal mask to a head on a
# sentence. This page runs one head of causal self-attention on a batch of random tokens, the
# shape a GPT-style model sees, and takes the side roads page 3 leaves out: the average of the
# past as one matrix product, how large the scores are, why the mask uses $-\infty$ and what
# finite fills leak, padding on the right and on the left, queries with no key to see, and
# what a weight does and does not mean. It assumes [page 3](causal_self_attention.md). Shapes
# follow the [notation](../notation.md): a batch is $(B, T, C)$, and $Q = X W_Q$.
#
# The picture is the simplest causal attention, on this page's eight positions: each position
# averages itself and every position before it. Row $i$ is the query at position $i$, column
# $j$ the key at position $j$. Query $i$ gives each position it may see the weight
# $1/(i + 1)$; the hatched cells are its future.

# %% tags=["plot"]
from attn_ref.diagrams import Box, canvas, grid, note, outline
from attn_ref.examples import BATCH_SHAPE
from attn_ref.masks import causal_mask
from attn_ref.plotting import figure_to_svg

positions = [str(t) for t in range(BATCH_SHAPE[1])]  # 8 positions
sees = causal_mask(len(positions))  # (T, T): True where query i sees key j
past = sees / sees.sum(dim=-1, keepdim=True)  # 1 / (i + 1) on row i
fig, ax = canvas(10.2, 10.2, scale=0.41)
grid(
    ax,
    past,
    1.6,
    1.6,
    cmap="viridis",
    decimals=2,
    mask=sees,
    row_names=positions,
    column_names=positions,
)
note(ax, 5.6, 0.35, "key position j (looked at)")
note(ax, 0.35, 5.6, "query position i (looking)", rotation=90)
figure_to_svg(
    fig,
    alt="An 8 by 8 grid of weights, one row per query position: row i "
    "gives the weight 1/(i + 1) to each of positions 0 to i (1.00, then "
    "0.50 twice, down to 0.12 eight times); every cell above the diagonal, "
    "the future, is hatched.",
)

# %% [markdown]
# For the queries $Q$, keys $K$ and values $V$ of one sequence, causal self-attention is
#
# $$
# \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V,
# $$
#
# where $d_k$ is the head size and the mask
#
# $$
# M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}
# $$
#
# sends the score of every later key to $-\infty$, whose exponential is $0$: each query spreads
# its weight over its own past only.
#
# <details class="note">
# <summary>Going deeper: why attention, and not a recurrent network</summary>
#
# Before the transformer, most language models read text with recurrent networks (RNNs),
# which update one hidden state token by token. Step $t$ cannot start before step $t - 1$ is
# done, so the steps of one sequence never run in parallel: in the words of Vaswani et al.
# (2017), this "inherently sequential nature precludes parallelization within training
# examples". And what an early token contributed reaches a late one only through every update
# in between, squeezed into one state of fixed size. Attention was first added to recurrent
# translation models (Bahdanau et al., 2014). The transformer ("Attention Is All You Need",
# Vaswani et al., 2017) drops the recurrence and keeps only attention: every position looks
# directly at every position it may see, all at once, in a few matrix products. The paper's
# Table 1 compares the layers: the number of sequential operations, and the longest path
# between two positions, stay constant for self-attention but grow like $T$ for a recurrent
# layer. The price is a $T \times T$ matrix of scores per sequence, whose time and memory grow
# like $T^2$ ([Attention without the T×T matrix](efficient_attention.md) computes it in tiles).
#
# </details>
#
# ## The batch
#
# $B$ sequences of $T$ tokens, each token a row of $C$ features (channels). The tokens are
# Gaussian noise drawn with a fixed seed: they stand for no words.

# %%
import math

import numpy as np
import torch
import torch.nn as nn

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import BATCH_SEED, BATCH_SHAPE, HEAD_SIZE
from attn_ref.masks import causal_mask, padding_mask

torch.set_grad_enabled(False)  # nothing is trained here
np.set_printoptions(precision=3, suppress=True)  # tensors print as arrays
B, T, C = BATCH_SHAPE  # batch, time (tokens), channels (features)
head_size = HEAD_SIZE  # d_k
torch.manual_seed(BATCH_SEED)
x = torch.randn(B, T, C)  # (B, T, C)
print("x:", tuple(x.shape), " token 0 of sequence 0:", x[0, 0, :4].numpy())

# %% [markdown]
# ## The simplest attention: an average of the past
#
# Start from a score of zero for every pair of tokens. Set the scores of later tokens to
# $-\infty$ and take the softmax of each row: row $i$ keeps $i + 1$ zeros, which become $i + 1$
# equal weights, the picture's. One product then averages the past of every token of every
# sequence at once. The names are those of Karpathy's lecture: `tril` is the lower triangle of
# ones (`torch.tril`), `wei` the weights, and `xbow` ("x, bag of words") the average, which,
# like a bag of words, ignores the order of what it averages.

# %%
tril = torch.tril(torch.ones(T, T))  # (T, T): 1 on and below the diagonal
wei_avg = torch.zeros((T, T))  # every score zero
wei_avg = wei_avg.masked_fill(tril == 0, float("-inf"))  # hide the future
wei_avg = torch.softmax(wei_avg, dim=-1)  # (T, T): the picture's weights
xbow = wei_avg @ x  # (T, T) @ (B, T, C) -> (B, T, C), every sequence
running_mean = x.cumsum(dim=1) / torch.arange(1, T + 1).view(T, 1)
print("the weights of the picture:", torch.allclose(wei_avg, past))
same = torch.allclose(xbow, running_mean, atol=1e-6)
print("equal to the running mean of x:", same)

# %% [markdown]
# Here every earlier token counts the same. Self-attention makes the weights depend on the
# data.
#
# <details class="note">
# <summary>Going deeper: attention as messages on a graph</summary>
#
# Karpathy (2023) describes the weights as a directed graph. The $T$ tokens of a sequence are
# its nodes, and an edge from node $j$ to node $i$ carries the weight $a_{ij}$. Each node sends
# a message (its value), and node $i$ receives the sum of the messages of the nodes that point
# to it, each times its edge's weight: row $i$ of the weights lists the edges into node $i$.
# The causal mask keeps only the edges from earlier nodes and each node's edge to itself. Each
# sequence of the batch is a graph of its own: no edge joins two sequences. And the nodes have
# no position: apart from the mask, nothing in attention tells a node where it sits, which is
# why models add [positional information](../concepts/positions.md) to the tokens.
#
# </details>
#
# ## Queries, keys and scores
#
# Each token emits a query (what it looks for), a key (what it offers) and a value (what it
# passes on), each of size $d_k$: $Q = X W_Q$, as `query(x)` computes it. One batched product
# `q @ k.transpose(-2, -1)` gives one $(T, T)$ matrix of scores per sequence. Dividing by
# $\sqrt{d_k}$ keeps their spread the same for any head size
# ([why](scaled_dot_product_step_by_step.md#the-variance-argument)).
#
# <details class="note">
# <summary>Going deeper: the shapes, and the order of the layers</summary>
#
# $W_Q$ has shape $(C, d_k)$. Transposing the last two axes of `k` turns each $(T, d_k)$ block
# into $(d_k, T)$. The layers draw their weights from the seeded generator, so the order in
# which they are made decides which weights each gets.
#
# </details>

# %%
# Drawn from the seeded generator in this order: key, query, value.
key = nn.Linear(C, head_size, bias=False)
query = nn.Linear(C, head_size, bias=False)
value = nn.Linear(C, head_size, bias=False)
k, q, v = key(x), query(x), value(x)  # each (B, T, d_k)
print("query.weight:", tuple(query.weight.shape), " q, k, v:", tuple(q.shape))
same = torch.allclose(q, x @ query.weight.T)
print("q equals x @ W_Q, with W_Q = query.weight.T:", same)
raw_scores = q @ k.transpose(-2, -1)  # (B, T, d_k) @ (B, d_k, T) -> (B, T, T)
scores = raw_scores / math.sqrt(head_size)  # (B, T, T)
print("scores:", tuple(scores.shape))

# %% [markdown]
# <details class="note">
# <summary>Going deeper: how large are these scores?</summary>
#
# The division brings a dot product of $d_k$ independent zero-mean, unit-variance components
# back to unit variance. Here the components are not unit-variance: `nn.Linear` starts from
# small weights, so $q$ and $k$ vary less than the tokens do, and even the raw scores spread
# less than $\sqrt{d_k}$ (the cell below).
#
# </details>

# %% tags=["deeper"]
print(f"variance of x {x.var():.3f}, of q {q.var():.3f}, of k {k.var():.3f}")
print(
    f"std of the raw scores {raw_scores.std():.3f}, "
    f"of the scaled scores {scores.std():.3f}"
)

# %% [markdown]
# ## The causal mask
#
# Query $i$ may look only at keys $0, \dots, i$. `attn_ref.masks.causal_mask(T)` is `True` on
# those pairs, on and below the diagonal: where `tril` above is 1. Every score above the
# diagonal becomes $-\infty$, and each row goes through a softmax:
#
# $$
# a_{ij} = \frac{e^{s_{ij}}}{\sum_{j'} e^{s_{ij'}}}, \qquad e^{-\infty} = 0 .
# $$

# %%
allowed = causal_mask(T)  # (T, T): True where query i may see key j <= i
masked = scores.masked_fill(~allowed, float("-inf"))  # (B, T, T), over B
wei = torch.softmax(masked, dim=-1)  # (B, T, T)
future = wei[:, ~allowed].max().item()
print("largest weight above the diagonal, any sequence:", future)
ones = torch.ones(B, T)
print("every row sums to one:", torch.allclose(wei.sum(dim=-1), ones))
first = torch.equal(wei[:, 0], wei_avg[0].expand(B, T))
print("first row of every sequence is [1, 0, ..., 0]:", first)

# %% [markdown]
# The first picture follows query 5 of sequence 0: its scores, the two future keys set to
# $-\infty$, the softmax. The second shows every row of sequence 0 and their sums.

# %% tags=["plot"]
t = 5  # the query the picture follows
fig, ax = canvas(9.0, 6.9, scale=0.5)
stages = (
    (
        f"scores of query {t}: q · k / √{head_size}",
        None,
        "RdBu_r",
        scores[0, t],
    ),
    ("the future set to −∞", allowed[t], "RdBu_r", scores[0, t]),
    ("softmax: weights, summing to 1", allowed[t], "viridis", wei[0, t]),
)
for n, (words, seen, cmap, row) in enumerate(stages):
    top = 1.5 + 2.1 * n
    signed = cmap != "viridis"  # one colour scale for both rows of scores
    grid(
        ax,
        row,
        0.5,
        top,
        cmap=cmap,
        decimals=2,
        mask=seen,
        vmax=scores[0, t].abs().max().item() if signed else None,
        column_names=positions if n == 0 else None,
        label=words,
    )
for j in range(t + 1, T):
    note(ax, 0.5 + j + 0.5, 4.9, "−∞", fontsize=10)  # under the hatching
w = wei[0, t].tolist()
figure_to_svg(
    fig,
    alt=f"Query {t} of sequence 0 in three rows of eight cells: its scores "
    f"against keys 0 to 7; the same with keys {t + 1} and {t + 2} hatched, "
    "set to minus infinity; and its weights after the softmax, "
    + ", ".join(f"{v:.2f}" for v in w[: t + 1])
    + ", with the two future keys hatched.",
)

# %% tags=["plot"]
fig, ax = canvas(11.2, 10.2, scale=0.37)
weights_box = grid(
    ax,
    wei[0],
    1.6,
    1.6,
    cmap="viridis",
    decimals=2,
    mask=allowed,
    row_names=positions,
    column_names=positions,
)
grid(
    ax,
    wei[0].sum(dim=-1)[:, None],
    10.0,
    1.6,
    cmap="viridis",
    decimals=2,
    label="sum",
)
outline(ax, Box(1.6, 1.6 + t, t + 1, 1))  # the row of the picture above
note(ax, 5.6, 0.35, "key position")
note(ax, 0.35, 5.6, "query position", rotation=90)
figure_to_svg(
    fig,
    alt="The 8 by 8 causal attention weights of sequence 0, one row per "
    "query, hatched above the diagonal; the first row is 1.00 and the "
    "others are uneven; every row sums to 1.00. Row 5 is framed.",
)

# %% [markdown]
# **Everything above the diagonal is exactly zero**, not just tiny: $e^{-\infty} = 0$. **Every
# row sums to one.** **The first row is $[1, 0, \dots, 0]$ in every sequence, whatever the
# scores**: query 0 sees only key 0. Unlike the average, the other rows are uneven: each query
# spreads its weight according to its scores.
#
# <a id="finite-fills"></a>**Why $-\infty$, and not a large negative number?** With $-\infty$ a masked weight is zero
# in every number format and at every scale; a finite fill is zero only if it underflows.
#
# <details class="note">
# <summary>Going deeper: finite fills, BERT's −10&nbsp;000, and float16</summary>
#
# Code often masks with a large finite number $c$, such as $-10^{9}$. A masked key then gets
# the weight $e^{c - m} / \sum_j e^{s_j - m}$ ($m$ the largest score), zero only if the
# exponential underflows, which depends on the number format and the size of the scores.
#
# The cell below measures the weight that leaks to future keys. First with fills of growing
# size: small fills leak, large ones underflow to exactly zero in float32. Then with the mask
# *added* to the scores, as the original BERT code adds $-10\,000$ (its comment calls this
# "effectively the same as removing these entirely"). Multiplying the scores by a growing
# factor stands in for a model whose scores have grown large: once they are about as large as
# the constant, future keys get weight, while $-\infty$ never leaks. Last, float16 cannot hold
# $-10^{9}$: a conversion turns it into $-\infty$. With $-\infty$ itself, the masked weights
# are exactly zero in float16 too.
#
# </details>


# %% tags=["deeper"]
def future_weight(weights):  # largest total weight a query gives to later keys
    return weights.masked_fill(allowed, 0.0).sum(dim=-1).max().item()


for fill in (-1.0, -10.0, -1e4, -math.inf):
    leak = future_weight(torch.softmax(scores.masked_fill(~allowed, fill), -1))
    print(f"fill {fill:g}: weight on future keys {leak:.3g}")
bert = torch.zeros(T, T).masked_fill(~allowed, -1e4)  # 0 or -10 000
for factor in (1, 1_000, 10_000):
    added = future_weight(torch.softmax(scores * factor + bert, -1))
    inf = future_weight(
        torch.softmax((scores * factor).masked_fill(~allowed, -math.inf), -1)
    )
    print(
        f"scores x {factor}: future weight {added:.3g} with -1e4 added, "
        f"{inf:.3g} with -inf"
    )
print("largest finite float16:", torch.finfo(torch.float16).max)
print("-1e9 in float16:", torch.tensor(-1e9).half().item())
print(
    "float16 with -inf, weight on future keys:",
    future_weight(torch.softmax(masked.half(), -1)),
)

# %% [markdown]
# ## The output, checked against PyTorch
#
# Each output row mixes the *values* of the positions it may see:
# $o_i = \sum_{j \le i} a_{ij} v_j$. `torch.nn.functional.scaled_dot_product_attention` with
# `is_causal=True` computes the same in one call, and `attn_ref.scaled_dot_product_attention`
# too (returning the weights as well), to within float32 rounding. The last lines put the
# whole head in one six-line function.

# %%
out = wei @ v  # (B, T, T) @ (B, T, d_k) -> (B, T, d_k)
first_output = torch.equal(out[:, 0], v[:, 0])  # query 0 sees only key 0
print("out:", tuple(out.shape), " out[:, 0] is v[:, 0]:", first_output)
sdpa = torch.nn.functional.scaled_dot_product_attention
reference = sdpa(q, k, v, is_causal=True)  # (B, T, d_k)
out_ref, wei_ref = scaled_dot_product_attention(q, k, v, is_causal=True)
print(f"largest |out - PyTorch|: {(out - reference).abs().max():.1e}")
print(f"largest |out - attn_ref|: {(out - out_ref).abs().max():.1e}")


def causal_self_attention(x):  # (B, T, C) -> (B, T, d_k), the layers above
    q, k, v = query(x), key(x), value(x)  # each (B, T, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_size)  # (B, T, T)
    allowed = causal_mask(x.shape[1])  # (T, T)
    weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
    return weights @ v  # (B, T, T) @ (B, T, d_k) -> (B, T, d_k)


same = torch.equal(causal_self_attention(x), out)
print("the function, same as the steps:", same)

# %% [markdown]
# ## The causal property
#
# Because of the mask, the output at position $i$ depends only on tokens $0, \dots, i$. The
# cell replaces token 5 of sequence 0 with new random numbers and measures how far each output
# of the function moves.

# %% tags=["check"]
changed = 5
x_changed = x.clone()
new_token = torch.Generator().manual_seed(0)
x_changed[0, changed] = torch.randn(C, generator=new_token)  # a new token 5
moved = (causal_self_attention(x_changed) - out).abs().amax(dim=-1)  # (B, T)
before = (moved[0, :changed] == 0).all().item()
print(f"positions 0 to {changed - 1} exactly unchanged:", before)
print("other sequences exactly unchanged:", (moved[1:] == 0).all().item())

# %% tags=["plot"]
fig, ax = canvas(10.4, 5.6, scale=0.43)
grid(
    ax,
    moved,
    2.2,
    1.6,
    cmap="Reds",
    vmin=0.0,
    decimals=2,
    vmax=moved.max().item(),
    row_names=[f"seq {b}" for b in range(B)],
    column_names=positions,
)
outline(ax, Box(2.2 + changed, 1.6, 1, 1))  # the changed token
note(ax, 6.2, 0.35, "how far each output moved")
figure_to_svg(
    fig,
    alt=f"How far each output moved when token {changed} of sequence 0 "
    "changed, as a 4 by 8 grid, one row per sequence: zero everywhere "
    f"except positions {changed} to {T - 1} of sequence 0 ("
    + ", ".join(f"{m:.2f}" for m in moved[0, changed:].tolist())
    + ").",
)

# %% [markdown]
# Every position before the changed token stays exactly where it was, to the last bit: the
# new token enters their rows only with weight exactly $0$. Positions from 5 on move. Other
# sequences do not.
#
# ## Padding: sequences of different lengths
#
# Real batches pad sequences of different lengths to a common $T$.
# `attn_ref.masks.padding_mask(lengths, T)` marks the real keys; `&` with the causal mask
# gives one $(B, T, T)$ mask. The padding goes on the right (after the tokens) or on the left
# (common when generating: every sequence then ends at the same position).

# %%
lengths = [8, 5, 3, 6]  # real tokens per sequence; the rest is padding
real = padding_mask(lengths, T)  # (B, 1, T): True on the real keys
mask = allowed & real  # (T, T) & (B, 1, T) -> (B, T, T): padding on the right
mask_left = allowed & real.flip(-1)  # padding on the left: real tokens last
out_pad, wei_pad = scaled_dot_product_attention(q, k, v, attn_mask=mask)
out_left, wei_left = scaled_dot_product_attention(q, k, v, attn_mask=mask_left)
moved_real = max(
    (out_pad[s, :n] - out_ref[s, :n]).abs().max().item()
    for s, n in enumerate(lengths)
)
print("right padding, largest change of a real token's output:", moved_real)
no_key = ~mask_left.any(dim=-1)  # (B, T): queries whose keys are all masked
found = [torch.nonzero(row).flatten().tolist() for row in no_key]
print("left padding, queries with no key to see, per sequence:")
print(found)

# %% tags=["plot"]
fig, ax = canvas(10.6, 7.2, scale=0.42)
for left, weights, words in (
    (1.0, wei_pad, "on the right"),
    (6.2, wei_left, "on the left"),
):
    box = grid(
        ax,
        weights[2],
        left,
        1.7,
        cmap="viridis",
        cell=0.5,
        mask=(mask if left == 1.0 else mask_left)[2],
        row_names=positions,
        column_names=positions,
    )
    note(ax, box.center[0], 0.5, f"padding {words}")
note(
    ax, 8.2, 6.3, f"rows {found[2][0]} to {found[2][-1]}: no key", fontsize=10
)
figure_to_svg(
    fig,
    alt=f"The weights of sequence 2 ({lengths[2]} real tokens of {T}) under "
    "each mask. With the padding on the right, rows 0 to 2 see their "
    "past as before. With the padding on the left, the real tokens are "
    f"positions {T - lengths[2]} to {T - 1}, and rows {found[2][0]} to "
    f"{found[2][-1]} have every key hatched: no key to see.",
)

# %% [markdown]
# On the right, the causal mask already hides the padding from every real token: the padding
# mask changes nothing for them (the printed $0$). On the left, the first queries of a short
# sequence are padding, and so is every key they may see: a softmax over nothing is $0/0$.
# `attn_ref` returns zeros for such a query. Padded queries' outputs mean nothing either way
# and must be left out of the loss.
#
# <details class="note">
# <summary>Going deeper: a query with no key, left padding, and nn.MultiheadAttention</summary>
#
# The first cell compares, on the first query of sequence 2: `attn_ref`; PyTorch's
# `scaled_dot_product_attention`, in the version printed; a plain softmax over the $-\infty$
# scores; and a finite fill of $-10^{9}$, which hides the problem: every key gets the same
# score, so the query spreads its weight evenly over keys it must not see. A `nan` does not
# stay where it starts: fed into one more attention layer that masks the padding correctly,
# the padded keys get weight exactly $0$, but $0 \cdot \text{nan}$ is `nan`, so the real
# tokens are poisoned too. Older PyTorch versions returned `nan` here as well: the bugs page
# has [a table of what each version returns](../practice/bugs.md#a-query-with-no-key-to-see),
# measured, and the pull request that made `scaled_dot_product_attention` return zeros.
#
# With the padding first, the causal mask alone lets every real token attend to the padding
# before it. The second cell runs each sequence on its own, without padding, and compares its
# real tokens with the batch: equal, to float rounding, with the padding mask; different with
# the causal mask alone, wherever there is padding.
#
# `nn.MultiheadAttention` reads a boolean mask the other way round: `True` means *may not*
# attend. Called as usual, with `need_weights=True`, it computes the weights with a plain
# softmax, so a query with no key gets `nan`. With `need_weights=False` it calls
# `scaled_dot_product_attention` instead (see its source, `torch/nn/functional.py`), and its
# output stays finite, as long as the layer does not take its fast path. That path runs a
# fused kernel, which still returns `nan`. The layer takes it in eval mode with gradients off,
# for self-attention (query, key and value the same tensor) with an even number of heads, among
# other conditions (see `MultiheadAttention.forward` in `torch/nn/modules/activation.py`). In
# the third cell the first layer, in training mode with one head and called on `q`, `k` and
# `v`, does not take it; the second, in eval mode with two heads and called on `q` three
# times, does. The layers project their inputs again with their own random weights, so only
# `nan` is compared, not values.
#
# </details>

# %% tags=["deeper"]
reference_left = torch.nn.functional.scaled_dot_product_attention(
    q, k, v, attn_mask=mask_left
)
plain = torch.softmax(scores.masked_fill(~mask_left, -math.inf), dim=-1)
finite = torch.softmax(scores.masked_fill(~mask_left, -1e9), dim=-1)
print(f"sequence 2, query 0, torch {torch.__version__}, first four entries:")
compared = {
    "attn_ref weights": wei_left,
    "attn_ref output": out_left,
    "PyTorch SDPA output": reference_left,
    "plain softmax weights": plain,
    "weights with a -1e9 fill": finite,
}
for name, tensor in compared.items():
    print(f"  {name}:", tensor[2, 0, :4].numpy())
out_plain = plain @ v  # (B, T, d_k), nan where a query has no key
next_layer, _ = scaled_dot_product_attention(
    out_plain, out_plain, out_plain, attn_mask=mask_left
)
next_layer_zeros, _ = scaled_dot_product_attention(
    out_left, out_left, out_left, attn_mask=mask_left
)
real_tokens = slice(T - lengths[2], T)  # sequence 2's, at the end
print("one layer later, nan in the real tokens of sequence 2:")
after_plain = next_layer[2, real_tokens].isnan().any(dim=-1)
after_zeros = next_layer_zeros[2, real_tokens].isnan().any(dim=-1)
print("  after the plain softmax:", after_plain.numpy())
print("  after attn_ref's zeros: ", after_zeros.numpy())


# %% tags=["deeper"]
for s, n in enumerate(lengths):
    alone, _ = scaled_dot_product_attention(
        q[s, T - n :], k[s, T - n :], v[s, T - n :], is_causal=True
    )
    with_pad, causal_only = (
        (o[s, T - n :] - alone).abs().max().item() for o in (out_left, out)
    )
    print(
        f"sequence {s}: largest difference {with_pad:.1e}",
        f"with a padding mask, {causal_only:.1e} causal only",
    )


# %% tags=["deeper"]
torch.manual_seed(0)
mha = nn.MultiheadAttention(head_size, num_heads=1, batch_first=True)
mha_out, _ = mha(
    q, k, v, attn_mask=~mask_left
)  # True = may not attend; need_weights=True
mha_out_sdpa, _ = mha(q, k, v, attn_mask=~mask_left, need_weights=False)
print(
    "nan for a query with no key, need_weights=True: ",
    mha_out[no_key].isnan().any().item(),
)
print(
    "nan for a query with no key, need_weights=False:",
    mha_out_sdpa[no_key].isnan().any().item(),
)
fast = nn.MultiheadAttention(
    head_size, num_heads=2, batch_first=True
).eval()  # even H
blocked = (~mask_left).repeat_interleave(
    2, dim=0
)  # (B * H, T, T): one mask per head
fast_out, _ = fast(
    q, q, q, attn_mask=blocked, need_weights=False
)  # the fast path
print(
    "nan for a query with no key, fast path:         ",
    fast_out[no_key].isnan().any().item(),
)

# %% [markdown]
# ## Common pitfalls
#
# <a id="no-division"></a>**`wei = q @ k.transpose(-2, -1)`, with no division.** Code can say
# in a comment that the scores are divided by $\sqrt{d_k}$ and still leave the division out.
# The weights then come from scores spread $\sqrt{d_k}$ times as wide, and are sharper: after the first
# row, the largest weight of every row is higher (below). Query 7's unscaled weights put three
# keys (6, 7 and 3, almost level) far ahead of the other four; its scaled row is much closer
# to uniform. The fix: divide, as [`scores`](#queries-keys-and-scores) does ([exercise 3](#exercises) shows
# what the missing division amounts to).

# %% tags=["check"]
wei_unscaled = torch.softmax(
    raw_scores.masked_fill(~allowed, float("-inf")), dim=-1
)  # (B, T, T), no division
print("row maxima, unscaled:", wei_unscaled[0].amax(dim=-1).numpy())
print("row maxima, scaled:  ", wei[0].amax(dim=-1).numpy())
print("query 7, unscaled, in %:", (100 * wei_unscaled[0, 7]).numpy().round(2))
print("query 7, scaled, in %:  ", (100 * wei[0, 7]).numpy().round(2))
left_out = wei_unscaled[0, 7, [1, 2, 4, 5]]  # the other four keys
print(
    f"keys 1, 2, 4 and 5, unscaled: largest {left_out.max():.2%}, "
    f"mean {left_out.mean():.2%}"
)

# %% [markdown]
# <a id="mixes-tokens"></a>**`out = wei @ x`.** Mixing the tokens instead of their values
# leaves out the value projection: the output keeps the token width $C$, not $d_k$ (the first
# line below). `wei @ x` is right only for the average of the past, where `wei` is one
# $(T, T)$ matrix of equal weights and there is no value projection; with learned scores there
# is one matrix per sequence, and the values to mix. The fix: `out = wei @ v`, as in
# [the output](#the-output-checked-against-pytorch).
#
# <a id="meaning"></a>**"The model learned that these tokens are related."** Here nothing was
# learned: the tokens are noise and the projections random. Other seeds, on the same tokens,
# make query 7 prefer other keys (below). Nor is a weight a similarity: the score of query $i$
# against key $j$, $(x_i W_Q) \cdot (x_j W_K)$, differs from that of query $j$ against key $i$
# (the last line). Only a trained model's weights can mean "this earlier token helps here"
# ([induction heads](induction_heads.md) shows one).
#
# <details class="note">
# <summary>Going deeper: where the reading comes from</summary>
#
# A library is a common picture of Q, K and V: the query is the question, the keys the labels
# on the books, the values their contents. It invites reading a high weight as "these tokens
# are similar in meaning".
#
# </details>

# %% tags=["check"]
out_of_tokens = wei_unscaled @ x  # (B, T, T) @ (B, T, C) -> (B, T, C)
print("wei @ x:", tuple(out_of_tokens.shape), " wei @ v:", tuple(out.shape))
favourites = []
for init_seed in range(5):  # other random W_K, W_Q; the same tokens
    torch.manual_seed(init_seed)
    W_K, W_Q = torch.randn(2, C, head_size)
    query_7 = (x[0] @ W_K) @ (x[0, 7] @ W_Q)  # (T,): query 7's scores
    favourites.append(query_7.argmax().item())
print("query 7's favourite key, random seeds 0 to 4:", favourites)
asymmetry = (scores - scores.transpose(-2, -1)).abs().max()
print(f"largest |score(i, j) - score(j, i)|: {asymmetry:.2f}")

# %% [markdown]
# <a id="attention-date"></a>**"Attention was introduced by the 2017 transformer paper."**
# Bahdanau et al. (2014) added it to a recurrent translation model. The transformer's novelty
# is a model "based solely on attention mechanisms, dispensing with recurrence and
# convolutions entirely".
#
# <details class="note">
# <summary>Going deeper: what the 2017 paper says of its predecessors</summary>
#
# Its abstract says the best models of its day "also connect the encoder and decoder through
# an attention mechanism".
#
# </details>
#
# ## Exercises
#
# **1. Break the mask, catch the leak.** A mask built with
# `torch.tril(torch.ones(T, T), diagonal=1)` looks almost right. Which outputs of sequence 0
# move when token 5 changes, with it, with no mask (as in an encoder), and with the right
# mask? Predict, then run the causal check with each. Does any other sequence move?


# %% tags=["solution"]
def head_with_mask(x, allowed):  # the head, with the mask as an argument
    scores = query(x) @ key(x).transpose(-2, -1) / math.sqrt(head_size)
    weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
    return weights @ value(x)  # (B, T, d_k)


leaky = torch.tril(torch.ones(T, T), diagonal=1).bool()  # j <= i + 1
encoder = torch.ones(T, T, dtype=torch.bool)  # no mask: every key
for name, m in (
    ("diagonal=1", leaky),
    ("no mask", encoder),
    ("causal_mask", causal_mask(T)),
):
    change = head_with_mask(x_changed, m) - head_with_mask(x, m)
    moved_m = change.abs().amax(dim=-1)  # (B, T)
    moved_positions = torch.nonzero(moved_m[0]).flatten().tolist()
    print(
        f"{name}: moved {moved_positions}; other sequences",
        moved_m[1:].max().item(),
    )
# With diagonal=1, query 4 sees key 5 and moves: the check catches the leak.
# Without a mask, every position moves. The other sequences never move: each is
# a graph of its own.

# %% [markdown]
# **2. From an average to attention.** Multiply every score of query 7 by $\lambda$, as a
# query layer $\lambda$ times larger would. Predict its weights for $\lambda = 0$ and for a
# large $\lambda$, then compute them for $\lambda$ = 0, 1, 10, 1000.

# %% tags=["solution"]
for factor in (0, 1, 10, 1000):
    print(
        f"lambda = {factor:4}:",
        torch.softmax(factor * scores[0, 7], dim=-1).numpy(),
    )
# lambda = 0: every score is 0, so the weights are uniform, the average of the
# past. Large lambda: the weight moves to the largest scores, and in the limit
# to the single largest one: a hard choice instead of a mix.

# %% [markdown]
# **3. The missing division is a temperature.** Show that the unscaled weights of the first
# pitfall are the scaled weights of a head whose $W_Q$ is $\sqrt{d_k}$ times larger, and check
# it. What does the missing division change, then?

# %% tags=["solution"]
q_big = x @ (query.weight.T * math.sqrt(head_size))  # (B, T, d_k)
scores_big = q_big @ k.transpose(-2, -1) / math.sqrt(head_size)  # (B, T, T)
wei_big = torch.softmax(scores_big.masked_fill(~allowed, -math.inf), dim=-1)
print(
    "largest |difference| from the unscaled weights:",
    (wei_big - wei_unscaled).abs().max().item(),
)
# (x W_Q sqrt(d_k)) . k / sqrt(d_k) = q . k. A model trained without the
# division can learn the same functions. What changes is the start (sharper
# weights at initialisation) and so the path training takes from there.

# %% [markdown]
# ## References
#
# - Vaswani et al. [Attention Is All You Need](https://arxiv.org/abs/1706.03762), NeurIPS
#   2017: scaled dot-product attention, the masked decoder, and (Table 1) the comparison with
#   recurrent layers.
# - Bahdanau, Cho, Bengio. [Neural Machine Translation by Jointly Learning to Align and
#   Translate](https://arxiv.org/abs/1409.0473), 2014: attention in a recurrent translation
#   model.
# - Andrej Karpathy. [Let's build GPT](https://www.youtube.com/watch?v=kCc8FmEb1nY), 2023,
#   with its code, [karpathy/ng-video-lecture](https://github.com/karpathy/ng-video-lecture):
#   the average of the past as a matrix product, and attention as messages on a graph.
# - Devlin et al. [BERT](https://arxiv.org/abs/1810.04805), 2019, and its
#   [`modeling.py`](https://github.com/google-research/bert/blob/master/modeling.py): the
#   $-10\,000$ added to masked scores.
# - PyTorch:
#   [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html)
#   and [`nn.MultiheadAttention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html).
#
# **Next:** [Scaled dot-product attention and heads, in depth](heads_in_depth.md), or back to
# the core path, [page 4: scaled dot-product attention and heads](scaled_dot_product_step_by_step.md).

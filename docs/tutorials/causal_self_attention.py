# %% [markdown]
# # Self-attention from scratch, with a causal mask
#
# This tutorial builds one head of causal self-attention, the kind a GPT-style model uses,
# one tensor at a time. It starts from the simplest attention there is, an average of
# the past, and turns it into the learned version, whose weights depend on the data. It
# assumes you have met queries, keys and values
# ([From nn.Linear to self-attention](linear_to_self_attention.md),
# [the mental model](../concepts/mental_model.md)). Symbols and shapes follow the site's
# [notation](../notation.md): tokens are row vectors, $Q = X W_Q$, and a batch has
# shape $(B, T, C)$.
#
# The previous tutorial ran one head on three tokens. This one runs it on a batch of
# longer sequences, and hides each token's future. [Common mistakes](#common-mistakes),
# at the end, quotes mistakes that are easy to make here, with what the code computes.
#
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
# stops position $i$ from looking at any later position $j > i$.
#
# ## Why attention
#
# Before the transformer, most language models read text with recurrent networks (RNNs). An
# RNN keeps one hidden state and updates it token by token: the state after token $t$
# is computed from the state after token $t - 1$ and from token $t$. Two problems follow.
#
# - **Sequential processing.** Step $t$ cannot start before step $t - 1$ is done, so the
#   steps of one sequence run one after another, never in parallel. In the words of
#   Vaswani et al. (2017), this "inherently sequential nature precludes parallelization
#   within training examples".
# - **Long-range dependencies.** Take "The cat, which sat on the mat, ran away." To
#   understand "ran", a reader needs "cat", with five words in between, and must not
#   pick "mat", which is nearer. In an RNN, what "cat" contributed reaches "ran" only
#   through the updates for every word in between, squeezed into one state of fixed size.
#
# The transformer ("Attention Is All You Need", Vaswani et al., 2017) drops the recurrence
# and keeps only attention, a mechanism first added to recurrent translation models
# (Bahdanau et al., 2014).
# Every position looks directly at every position it may see, and decides how much to take
# from each. All positions do this at
# once, in a few matrix products. The paper's Table 1 compares the layers: the number
# of sequential operations, and the longest path between two positions, stay constant
# for self-attention but grow like $T$ for a recurrent layer. The price is a
# $T \times T$ matrix of scores per sequence, which this page builds: its time and
# memory grow like $T^2$ ([Attention without the T×T matrix](efficient_attention.md)
# computes it in tiles, never holding it whole).
#
# ## The batch
#
# There are $B$ sequences. Each has $T$ tokens, and each token is a row vector of $C$
# features (channels). The tokens are Gaussian noise drawn with a fixed random seed: they
# stand for no words and carry no meaning.

# %%
import math

import numpy as np
import torch
import torch.nn as nn
from IPython.display import HTML, display

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import BATCH_SEED, BATCH_SHAPE, HEAD_SIZE
from attn_ref.masks import causal_mask, padding_mask
from attn_ref.plotting import attention_heatmap, figure_to_svg

torch.set_grad_enabled(False)  # nothing is trained here
np.set_printoptions(
    precision=3, suppress=True
)  # tensors print as NumPy arrays: narrower
print("torch", torch.__version__)
# batch, time (tokens per sequence), channels (features per token)
B, T, C = BATCH_SHAPE
head_size = HEAD_SIZE  # d_k
torch.manual_seed(BATCH_SEED)
x = torch.randn(B, T, C)  # (B, T, C)
print(
    "x:", tuple(x.shape), " token 0 of sequence 0 starts", x[0, 0, :4].numpy()
)

# %% [markdown]
# ## The simplest attention: an average of the past
#
# Say each token should gather what came before it. The simplest way is to replace
# token $t$ by the average of tokens $0, \dots, t$: attention with equal weights. Start
# from a score of zero for every pair of tokens, so that no token prefers any other.
# Set the scores of later tokens to $-\infty$, and take the softmax of each row. Row $i$
# keeps $i + 1$ zeros, which the softmax turns into $i + 1$ equal weights of $1/(i+1)$.

# %%
tril = torch.tril(torch.ones(T, T))  # (T, T): 1 on and below the diagonal
wei_avg = torch.zeros((T, T))  # every score zero
wei_avg = wei_avg.masked_fill(
    tril == 0, float("-inf")
)  # hide the later tokens
wei_avg = torch.softmax(wei_avg, dim=-1)  # (T, T)
print("weights of the average of the past:")
print(wei_avg.numpy())
xbow = (
    wei_avg @ x
)  # (T, T) @ (B, T, C) -> (B, T, C): one matrix serves every sequence
running_mean = x.cumsum(dim=1) / torch.arange(1, T + 1).view(T, 1)  # (B, T, C)
print(
    "equal to the running mean of x:",
    torch.allclose(xbow, running_mean, atol=1e-6),
)

# %% [markdown]
# One matrix product averages the past of every token at once. But every earlier token
# counts the same, whatever it holds. A useful model must let each token choose whom
# to listen to.
#
# ## Attention is a communication mechanism
#
# Karpathy (2023) puts it this way, and it is a good way to see what the weights do.
# Picture the $T$ tokens of a sequence as the nodes of a directed graph. An edge
# from node $j$ to node $i$ carries the weight $a_{ij}$. Each node sends a message (its
# value), and node $i$ receives the sum of the messages of the nodes that point to it,
# each times its edge's weight. The matrix of weights *is* the graph: row $i$ lists the
# edges into node $i$.
#
# The causal mask keeps only the edges from earlier nodes, and each node's edge to
# itself. So each node hears only the nodes before it, and itself. In the average
# above, all edges into a node carry the same weight. Self-attention makes the weights
# depend on the data: each node computes them from what it holds and what the others
# hold.
#
# Two more things follow from the picture. Each sequence of the batch is a graph of its
# own: no edge joins two sequences. And the nodes have no position: apart from the
# mask, nothing in attention tells a node where it sits, which is why models add
# [positional information](../concepts/positions.md) to the tokens.
#
# ## Queries, keys and values
#
# Each token emits three vectors of size $d_k$. Its **query** says what it looks for,
# its **key** what it offers, and its **value** what it passes on. With tokens as rows,
# $q_t = x_t W_Q$, $k_t = x_t W_K$ and $v_t = x_t W_V$, where $W_Q$ and $W_K$ have shape
# $(C, d_k)$ and $W_V$ has shape $(C, d_v)$, here with $d_v = d_k$; for a whole sequence,
# $Q = X W_Q$.
#
# `nn.Linear(C, d_k)` stores its matrix transposed: `query.weight` has shape
# $(d_k, C)$, it holds $W_Q^\top$, and `query(x)` computes `x @ query.weight.T`. The
# cell creates `key`, then `query`, then `value`. Each layer draws its initial weights
# from the same seeded random generator, so the order decides which weights each gets.

# %%
# Drawn from the seeded generator in this order: key, query, value.
key = nn.Linear(C, head_size, bias=False)
query = nn.Linear(C, head_size, bias=False)
value = nn.Linear(C, head_size, bias=False)
# each (B, T, C) @ (C, d_k) -> (B, T, d_k)
k, q, v = key(x), query(x), value(x)
print("query.weight:", tuple(query.weight.shape), " q, k, v:", tuple(q.shape))
print(
    "q equals x @ W_Q, with W_Q = query.weight.T:",
    torch.allclose(q, x @ query.weight.T),
)

# %% [markdown]
# ## Scores, scaled by the square root of the head size
#
# Every query is compared with every key of its sequence by a dot product. For the
# whole batch that is one batched matrix product. Transposing the last two dimensions
# of `k` turns each $(T, d_k)$ block into $(d_k, T)$, so the product holds one
# $(T, T)$ matrix of scores per sequence: row $i$ is query $i$, column $j$ is key $j$.
#
# The scores are then divided by $\sqrt{d_k}$. If the components of $q$ and $k$ are
# zero-mean, unit-variance and independent, a dot product of $d_k$ of them has
# variance $d_k$, and the division brings it back to one for any head size
# ([the variance argument](../concepts/mental_model.md#the-variance-argument)).
# Without it, wider heads give larger scores, and the softmax piles the weight onto a
# few keys.
#
# Here the components are not unit-variance: `nn.Linear` starts from small weights, so
# $q$ and $k$ vary less than the tokens do, and even the raw scores spread less than
# $\sqrt{d_k}$.

# %%
raw_scores = q @ k.transpose(-2, -1)  # (B, T, d_k) @ (B, d_k, T) -> (B, T, T)
scores = raw_scores / math.sqrt(head_size)  # (B, T, T)
print("scores:", tuple(scores.shape))
print(f"variance of x {x.var():.3f}, of q {q.var():.3f}, of k {k.var():.3f}")
print(
    f"std of the raw scores {raw_scores.std():.3f}, "
    f"of the scaled scores {scores.std():.3f}"
)

# %% [markdown]
# ## The causal mask
#
# A causal model predicts each token from the ones before it, so query $i$ may only
# look at keys $0, \dots, i$. `attn_ref.masks.causal_mask(T)` is `True` on those pairs, on
# and below the diagonal: the pairs where `tril` above is 1. Every score above the diagonal
# becomes $-\infty$, and each row goes through a softmax:
#
# $$
# a_{ij} = \frac{e^{s_{ij}}}{\sum_{j'} e^{s_{ij'}}}, \qquad e^{-\infty} = 0 .
# $$

# %%
allowed = causal_mask(
    T
)  # (T, T), True where query i may see key j, i.e. j <= i
masked = scores.masked_fill(
    ~allowed, float("-inf")
)  # (B, T, T): the mask broadcasts over B
wei = torch.softmax(masked, dim=-1)  # (B, T, T)
print("weights of sequence 0:")
print(wei[0].numpy())
print(
    "largest weight above the diagonal, any sequence:",
    wei[:, ~allowed].max().item(),
)
print(
    "every row sums to one:", torch.allclose(wei.sum(dim=-1), torch.ones(B, T))
)
print(
    "first row of every sequence is [1, 0, ..., 0]:",
    torch.equal(wei[:, 0], wei_avg[0].expand(B, T)),
)

# %% tags=["plot"]
ax = attention_heatmap(
    wei[0], title="Causal attention weights, sequence 0", mask=allowed
)
alt = (
    f"Heatmap of the {T} by {T} weights of sequence 0, zero above the diagonal"
)
display(HTML(figure_to_svg(ax.figure, alt=alt)))

# %% [markdown]
# Three things to see in the weights. **Everything above the diagonal is exactly
# zero**, not just tiny: the exponential of $-\infty$ is zero. **Every row sums to
# one**: the softmax divides by the sum over the keys the query may see. **The first
# row is $[1, 0, \dots, 0]$ in every sequence, whatever the scores**: query 0 sees only
# key 0, and a softmax over one number $s$ gives $e^{s}/e^{s} = 1$. Unlike the average,
# the other rows are uneven: each query spreads its weight according to its scores.
#
# ## Why −∞, and not a large negative number
#
# Code often masks with a large finite number, such as $-10^{9}$ or $-10^{4}$, instead
# of $-\infty$. A finite constant $c$ gives a masked key the weight
# $e^{c - m} / \sum_j e^{s_j - m}$, where $m$ is the largest score. That weight is zero only
# when the exponential underflows, which depends on the number format and on the size
# of the scores. With $-\infty$, the weight is $e^{-\infty} = 0$ in every format and at
# every scale.
#
# <details class="note">
# <summary>Going deeper: finite fills, BERT's −10&nbsp;000, and float16</summary>
#
# The cell below measures the weight that leaks to future keys. First with fills of
# growing size: small fills leak, large ones underflow to exactly zero in float32.
# Then with the mask *added* to the scores, as the original BERT code adds
# $-10\,000$ (its comment calls this "effectively the same as removing these
# entirely"). Multiplying the scores by a growing factor stands in for a model whose
# scores have grown large: once they are about as large as the constant, future keys
# get weight, while $-\infty$ never leaks. Last, float16 cannot hold $-10^{9}$: a
# conversion turns it into $-\infty$. With $-\infty$ itself, the masked weights are
# exactly zero in float16 too.
#
# </details>


# %% tags=["deeper"]
def future_weight(weights):  # largest total weight a query gives to later keys
    return weights.masked_fill(allowed, 0.0).sum(dim=-1).max().item()


for fill in (-1.0, -10.0, -1e4, -math.inf):
    leak = future_weight(torch.softmax(scores.masked_fill(~allowed, fill), -1))
    print(f"fill {fill:g}: weight on future keys {leak:.3g}")
bert = torch.zeros(T, T).masked_fill(
    ~allowed, -1e4
)  # (T, T): 0 where allowed, -10 000 elsewhere
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
# Each output row mixes the *values* of the positions it may see, weighted by its row
# of weights: $o_i = \sum_{j \le i} a_{ij} v_j$. The batched product is a $(T, T)$ block
# times a $(T, d_k)$ block for every sequence. Query 0 sees only itself, so its
# output is its own value.
#
# `torch.nn.functional.scaled_dot_product_attention` with `is_causal=True` computes the
# same thing in one call. The site's reference function
# `attn_ref.scaled_dot_product_attention` does too, and also returns the weights. Both
# agree with the step-by-step result to within float32 rounding.

# %%
out = wei @ v  # (B, T, T) @ (B, T, d_k) -> (B, T, d_k)
print(
    "wei:", tuple(wei.shape), " v:", tuple(v.shape), " out:", tuple(out.shape)
)
print(
    "output at position 0 equals v at position 0:",
    torch.equal(out[:, 0], v[:, 0]),
)
reference = torch.nn.functional.scaled_dot_product_attention(
    q, k, v, is_causal=True
)
out_ref, wei_ref = scaled_dot_product_attention(
    q, k, v, is_causal=True
)  # (B, T, d_k), (B, T, T)
print(f"largest |out - PyTorch|: {(out - reference).abs().max():.1e}")
print(f"largest |out - attn_ref|: {(out - out_ref).abs().max():.1e}")

# %% [markdown]
# ## Reading one row: the library analogy
#
# A common way to explain Q, K and V is a library. The **query** is the
# question you bring to the librarian. The **keys** are the labels on the books. The
# **values** are what is inside the books. The scores measure how well your question
# matches each label, the softmax turns them into shares that sum to one, and the
# answer is that mix of the books' contents.
#
# Here the reader is position 7 of sequence 0, the last one, so it may see all eight
# books, itself included. The cell prints the score $q_7 \cdot k_j / \sqrt{d_k}$ and
# the weight of each book $j$. Its last line draws other random projections $W_Q$ and
# $W_K$ (with other random seeds) and shows which book query 7 then prefers.

# %%
b, i = 0, T - 1  # sequence 0, query at position 7, the last
print("query 7, scores: ", scores[b, i].numpy())
print("query 7, weights:", wei[b, i].numpy())
favourites = []
for init_seed in range(
    5
):  # other random projections W_K, W_Q; the same tokens
    torch.manual_seed(init_seed)
    W_K, W_Q = torch.randn(2, C, head_size)
    favourites.append(
        (x[b] @ W_K @ (x[b, i] @ W_Q)).argmax().item()
    )  # (T,): query 7's scores
print("favourite book, random seeds 0 to 4:", favourites)

# %% [markdown]
# What do these weights mean? Here, only geometry. The tokens are random, and so are
# $W_Q$ and $W_K$: nothing was learned, and no token is about anything. Book $j$ gets
# more weight when $k_j$ has a larger dot product with $q_7$, and other random
# projections prefer other books, although the tokens stay the same.
#
# The analogy describes what training is *for*. A loss, such as next-token prediction,
# shapes $W_Q$, $W_K$ and $W_V$ until the questions and labels line up with what is
# useful. Only in a trained model can a high weight mean "this earlier token helps
# here". In this notebook it means only that two random projections happen to align.
#
# ## The causal property
#
# Because of the mask, the output at position $i$ depends only on tokens $0, \dots, i$.
# To test this, we collect the steps above into one function, replace token 5 of
# sequence 0 with new random numbers, and measure how far each output moves.


# %%
def causal_self_attention(
    x,
):  # (B, T, C) -> (B, T, d_k), with the layers above
    q, k, v = query(x), key(x), value(x)  # each (B, T, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_size)  # (B, T, T)
    weights = torch.softmax(
        scores.masked_fill(~causal_mask(x.shape[1]), float("-inf")), dim=-1
    )
    return weights @ v  # (B, T, T) @ (B, T, d_k) -> (B, T, d_k)


print(
    "same as the step-by-step output:",
    torch.equal(causal_self_attention(x), out),
)
changed = 5
x_changed = x.clone()
x_changed[0, changed] = torch.randn(
    C, generator=torch.Generator().manual_seed(0)
)  # a new token 5
moved = (causal_self_attention(x_changed) - out).abs().amax(dim=-1)  # (B, T)
print("sequence 0, change at positions 0 to 7:")
print(moved[0].numpy())
print(
    "positions 0 to 4 exactly unchanged:",
    (moved[0, :changed] == 0).all().item(),
)
print("other sequences exactly unchanged:", (moved[1:] == 0).all().item())

# %% [markdown]
# Every position before the changed token stays exactly where it was, not even moved
# by a rounding error. The new token enters their rows only through a key whose weight
# is exactly $0$, and $0 \cdot v_5$ adds nothing. The changed position and the ones
# after it can see the new token, so their outputs move. The other sequences do not
# move at all: they are separate graphs.
#
# ## Padding: sequences of different lengths
#
# Real batches hold sequences of different lengths, padded to a common $T$.
# `attn_ref.masks.padding_mask(lengths, T)` marks the real keys of each sequence. Its shape
# is $(B, 1, T)$: the middle dimension broadcasts over the queries, so `&` with the
# $(T, T)$ causal mask gives one $(B, T, T)$ mask. Below, the four sequences get
# different lengths, padded on the right.

# %%
lengths = [8, 5, 3, 6]  # real tokens per sequence; the rest is padding
mask = allowed & padding_mask(lengths, T)  # (T, T) & (B, 1, T) -> (B, T, T)
print("mask:", tuple(mask.shape), f" sequence 2, {lengths[2]} real tokens:")
print(mask[2].int().numpy())
out_pad, wei_pad = scaled_dot_product_attention(
    q, k, v, attn_mask=mask
)  # (B, T, d_k), (B, T, T)
moved_real = max(
    (out_pad[s, :n] - out_ref[s, :n]).abs().max().item()
    for s, n in enumerate(lengths)
)
print(
    "largest change of a real token's output from the padding mask:",
    moved_real,
)

# %% [markdown]
# With padding on the right, the real tokens come first. The causal mask already hides
# every later position from them, padding included, so the padding mask changes
# nothing for them. It only changes the rows of the padded positions, whose outputs
# are thrown away.
#
# ## A query with no key to look at
#
# Padding on the *left* is common when a model generates text for a batch, because
# then every sequence ends at the same position. Flipping the padding mask marks the
# last $n$ positions as real. Now the first queries of a short sequence are padding,
# and so is every key they may see: their row of the mask is entirely `False`. A
# softmax over nothing is undefined: every score is $-\infty$, so it computes $0/0$.
# The cell below compares, on the first query of sequence 2:
#
# - `attn_ref`, which returns zero weights and a zero output;
# - PyTorch's `scaled_dot_product_attention`, in the version printed below;
# - a plain softmax over the $-\infty$ scores;
# - a finite fill of $-10^{9}$, which hides the problem: every key gets the same
#   score, so the query spreads its weight evenly over keys it must not see.
#
# And a `nan` does not stay where it starts. The last lines feed the plain-softmax
# output into one more attention layer that masks the padding correctly. The padded
# keys get weight exactly $0$, but $0 \cdot \text{nan}$ is `nan`, so the real tokens
# are poisoned too.

# %%
mask_left = allowed & padding_mask(lengths, T).flip(
    -1
)  # (B, T, T): real tokens are the last n
no_key = ~mask_left.any(
    dim=-1
)  # (B, T): True for a query whose keys are all masked
print(
    "queries with no key, per sequence:",
    [torch.nonzero(row).flatten().tolist() for row in no_key],
)
out_left, wei_left = scaled_dot_product_attention(q, k, v, attn_mask=mask_left)
reference_left = torch.nn.functional.scaled_dot_product_attention(
    q, k, v, attn_mask=mask_left
)
plain = torch.softmax(
    scores.masked_fill(~mask_left, float("-inf")), dim=-1
)  # (B, T, T)
finite = torch.softmax(
    scores.masked_fill(~mask_left, -1e9), dim=-1
)  # (B, T, T)
print(f"sequence 2, query 0, torch {torch.__version__}, first four entries:")
compared = {
    "attn_ref weights": wei_left,
    "attn_ref output": out_left,
    "PyTorch SDPA output": reference_left,
}
compared |= {
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
real = slice(T - lengths[2], T)  # the real tokens of sequence 2, at the end
print("one layer later, nan in the real tokens of sequence 2:")
print(
    "  after the plain softmax:",
    next_layer[2, real].isnan().any(dim=-1).numpy(),
)
print(
    "  after attn_ref's zeros: ",
    next_layer_zeros[2, real].isnan().any(dim=-1).numpy(),
)

# %% [markdown]
# Zeros are the safer convention. Even so, the outputs of padded queries mean nothing,
# and they must be left out of the loss. Older PyTorch versions returned `nan` here
# too. The bugs page has [a table of what each version returns](../practice/bugs.md#a-query-with-no-key-to-see),
# measured, and the pull request that made `scaled_dot_product_attention` return zeros.
#
# <details class="note">
# <summary>Going deeper: left padding needs its padding mask</summary>
#
# With the padding first, the causal mask alone lets every real token attend to the
# padding before it. The cell below runs each sequence on its own, without padding,
# and compares its real tokens with the batch: equal, to float rounding, with the
# padding mask; different with the causal mask alone, wherever there is padding.
#
# </details>

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

# %% [markdown]
# <details class="note">
# <summary>Going deeper: nn.MultiheadAttention and need_weights</summary>
#
# `nn.MultiheadAttention` reads a boolean mask the other way round: `True` means
# *may not* attend. Called as usual, with `need_weights=True`, it computes the weights
# with a plain softmax, so a query with no key gets `nan`. With `need_weights=False`
# it calls `scaled_dot_product_attention` instead (see its source,
# `torch/nn/functional.py`), and its output stays finite, as long as the layer does not
# take its fast path. That path runs a fused kernel, which still returns `nan`. The layer
# takes it in eval mode with gradients off, for self-attention (query, key and value the
# same tensor) with an even number of heads, among other conditions (see
# `MultiheadAttention.forward` in `torch/nn/modules/activation.py`). The first layer
# below, in training mode with one head and called on `q`, `k` and `v`, does not take it.
# The second, in eval mode with two heads and called on `q` three times, does. The bugs
# page has
# [a table of what each version returns](../practice/bugs.md#a-query-with-no-key-to-see)
# on each path. The layers project their inputs again with their own random weights, so
# only `nan` is compared here, not values.
#
# </details>

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
# ## Common mistakes
#
# This tutorial began as a rewrite of a notebook, called *the original notebook* below.
# It uses the same random batch, seed and layers, created in the same order, so every
# number that notebook printed can be matched. Its code runs, but it does not do what its
# text says, and its explanation describes a trained model it does not have. Each mistake
# is quoted below; the cell recomputes what each one needs.

# %%
wei_original = torch.softmax(
    raw_scores.masked_fill(~allowed, float("-inf")), dim=-1
)  # unscaled
print("row 7 unscaled, in %:", (100 * wei_original[0, 7]).numpy().round(2))
print("row maxima, unscaled:", wei_original[0].amax(dim=-1).numpy())
print("row maxima, scaled:  ", wei[0].amax(dim=-1).numpy())
left_out = wei_original[0, 7, [1, 2, 4, 5]]  # the books its list leaves out
print(
    f"books 1, 2, 4 and 5, unscaled: largest {left_out.max():.2%}, "
    f"mean {left_out.mean():.2%}"
)
out_original = wei_original @ x  # (B, T, T) @ (B, T, C) -> (B, T, C)
print(
    "its wei:",
    tuple(wei_original.shape),
    " its out:",
    tuple(out_original.shape),
)
asymmetry = (scores - scores.transpose(-2, -1)).abs().max()
print(f"largest |score(i, j) - score(j, i)|: {asymmetry:.2f}")

# %% [markdown]
# <a id="no-division"></a>**"Divide by sqrt of key size".** Its text says the
# scores are divided by $\sqrt{d_k}$, "to stabilize training", but its code (`wei = q @
# k.transpose(-2, -1)`) never divides, where [scaled
# scores](#scores-scaled-by-the-square-root-of-the-head-size) do. So every weight it prints
# comes from unscaled scores, spread $\sqrt{d_k}$ times as wide. Row 7 above matches the
# percentages it prints. Its weights are sharper than scaled attention gives: after the
# first row, the largest weight of each row (its maximum) is higher.
#
# **"Book 3 (about animals): Medium match"; "Others: ~9%".** Its percentages are the
# unscaled weights. Its library example quotes row 7 in percent: book 0 at the bottom,
# books 6, 7 and 3 at the top. These are the unscaled
# weights, not those of scaled attention, whose row (in
# [the library section](#reading-one-row-the-library-analogy)) is much closer to
# uniform. It calls book 3 a "medium match", yet book 3 is almost level with the top
# two. And its "Others: ~9%" is more than any of the four books it leaves out.
#
# <a id="mixes-tokens"></a>**`out = wei @ x`.** It mixes the tokens, not values: the
# tokens $x_j$ themselves. There is no value projection,
# and the output keeps the token width $C$ instead of the head size $d_k$. Its shape
# comment, `(T,T) @ (B,T,C) --> (B,T,C)`, is right for the average of the past, where
# `wei` is one $(T, T)$ matrix. After the learned scores, `wei` holds one matrix per
# sequence. [The output](#the-output-checked-against-pytorch) mixes values instead.
#
# **"The model learned they're related".** The library's books are made up. It labels
# books 0, 3, 6 and 7 as being "about
# dogs", "about animals", "about cats" and "about pets", and says the high weights mean
# the tokens "are similar in meaning" and that "the model learned they're related".
# None of this holds: the tokens are random noise and the projections random,
# untrained matrices, as [the library section](#reading-one-row-the-library-analogy)
# shows. Nor is a weight a similarity. A similarity is symmetric, but the score of
# query $i$ against key $j$ uses two different matrices, $(x_i W_Q) \cdot (x_j W_K)$,
# so it differs from the score of query $j$ against key $i$, as the last line shows.
#
# <a id="attention-date"></a>**"This core idea from the 2017 'Attention is All You Need'
# paper".** It dates attention to the transformer. It says attention
# "replaces older sequential processing in models like RNNs", and calls it a "core idea
# from the 2017 'Attention is All You Need' paper". Attention is older. Bahdanau et al. (2014)
# added it to a recurrent encoder-decoder for translation, and the 2017 paper's abstract
# says that the best models of its day "also connect the encoder and decoder through an
# attention mechanism". What the transformer brought is a model "based solely on attention
# mechanisms, dispensing with recurrence and convolutions entirely"
# ([why attention](#why-attention)).
#
# ## Exercises
#
# **1. Break the mask, catch the leak.** A mask built with
# `torch.tril(torch.ones(T, T), diagonal=1)` looks almost right. Predict which outputs
# of sequence 0 move when token 5 changes, if the head uses it; then with no mask at
# all, as in an encoder. Run the causal check of this page with each, and with the
# right mask. Does any other sequence move?


# %% tags=["solution"]
def head_with_mask(
    x, allowed
):  # the head above, with the mask (True = may attend) as an argument
    scores = (
        query(x) @ key(x).transpose(-2, -1) / math.sqrt(head_size)
    )  # (B, T, T)
    return torch.softmax(
        scores.masked_fill(~allowed, float("-inf")), dim=-1
    ) @ value(x)


leaky = torch.tril(
    torch.ones(T, T), diagonal=1
).bool()  # key j <= i + 1: one step too far
encoder = torch.ones(
    T, T, dtype=torch.bool
)  # no mask: every query sees every key
for name, m in (
    ("diagonal=1", leaky),
    ("no mask", encoder),
    ("causal_mask", causal_mask(T)),
):
    moved_m = (
        (head_with_mask(x_changed, m) - head_with_mask(x, m))
        .abs()
        .amax(dim=-1)
    )  # (B, T)
    moved_positions = (
        torch.nonzero(moved_m[0]).flatten().tolist()
    )  # in sequence 0
    print(
        f"{name}: moved {moved_positions}; other sequences",
        moved_m[1:].max().item(),
    )
# With diagonal=1, query 4 sees key 5 and moves: the check catches the leak.
# Without a mask, every position moves. The other sequences never move: each is
# a graph of its own.

# %% [markdown]
# **2. From an average to attention.** Multiply every score of query 7 by a factor
# $\lambda$, as a query layer $\lambda$ times larger would. Predict its weights for
# $\lambda = 0$ and for a large $\lambda$, then compute them for $\lambda$ = 0, 1, 10, 1000.

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
# **3. The missing division is a temperature.** Show that the unscaled weights of the
# first common mistake are the scaled weights of a head whose $W_Q$ is $\sqrt{d_k}$ times
# larger. Check it numerically. What does the missing division change, then?

# %% tags=["solution"]
q_big = x @ (
    query.weight.T * math.sqrt(head_size)
)  # X (sqrt(d_k) W_Q): (B, T, d_k)
scores_big = q_big @ k.transpose(-2, -1) / math.sqrt(head_size)  # (B, T, T)
wei_big = torch.softmax(scores_big.masked_fill(~allowed, -math.inf), dim=-1)
print(
    "largest |difference| from the unscaled weights:",
    (wei_big - wei_original).abs().max().item(),
)
# (x W_Q sqrt(d_k)) . k / sqrt(d_k) = q . k. A model trained without the
# division can learn the same functions. What changes is the start (sharper
# weights at initialisation) and so the path training takes from there.

# %% [markdown]
# ## References
#
# - Ashish Vaswani, Noam Shazeer, Niki Parmar, Jakob Uszkoreit, Llion Jones, Aidan N.
#   Gomez, Łukasz Kaiser, Illia Polosukhin.
#   [Attention Is All You Need](https://arxiv.org/abs/1706.03762). NeurIPS 2017. Scaled
#   dot-product attention, the masked decoder, and (Section 4, Table 1) the comparison
#   with recurrent layers quoted above.
# - Dzmitry Bahdanau, Kyunghyun Cho, Yoshua Bengio.
#   [Neural Machine Translation by Jointly Learning to Align and
#   Translate](https://arxiv.org/abs/1409.0473), 2014 (ICLR 2015). Attention added to a
#   recurrent encoder-decoder: the decoder weighs every word of the source sentence.
# - Andrej Karpathy. [Let's build GPT: from scratch, in code, spelled
#   out](https://www.youtube.com/watch?v=kCc8FmEb1nY), 2023, with its code,
#   [karpathy/ng-video-lecture](https://github.com/karpathy/ng-video-lecture). The
#   average of the past as a matrix product, and attention as communication between the
#   nodes of a directed graph.
# - Jacob Devlin, Ming-Wei Chang, Kenton Lee, Kristina Toutanova.
#   [BERT](https://arxiv.org/abs/1810.04805), 2019, and its code: the $-10\,000$ added to
#   masked scores in
#   [`modeling.py`](https://github.com/google-research/bert/blob/master/modeling.py).
# - PyTorch:
#   [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html)
#   and [`nn.MultiheadAttention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html).

# %% [markdown]
# # Self-attention from scratch, with a causal mask
#
# This tutorial builds one head of causal self-attention for a batch of sequences,
# one tensor at a time, and prints the shape of each. It starts from a colleague's
# notebook (the *seed*): the same random batch, the same seed and the same layers,
# created in the same order, so every number the seed printed can be matched here.
# The seed has mistakes in its code, its numbers and its explanation. Each one is
# pointed out in a warning box, and the cell after the box computes what is actually true.
#
# For queries $Q$, keys $K$ and values $V$ of one sequence, causal self-attention is
#
# $$
# \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V,
# \qquad
# M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}
# $$
#
# where $d_k$ is the head size and the mask $M$ stops position $i$ from looking at
# any later position $j > i$.

# %%
import math

import numpy as np
import torch
import torch.nn as nn
from IPython.display import HTML, display

from attn_ref import causal_mask, padding_mask, scaled_dot_product_attention
from attn_ref.examples import BATCH_SEED, BATCH_SHAPE, HEAD_SIZE
from attn_ref.plotting import attention_heatmap, figure_to_svg

torch.set_grad_enabled(False)  # nothing is trained here: skip the gradient bookkeeping
torch.set_printoptions(precision=4, sci_mode=False)
np.set_printoptions(precision=4, suppress=True)  # matrices print narrower as NumPy arrays
print("torch", torch.__version__)

# %% [markdown]
# ## The batch
#
# There are $B$ sequences. Each has $T$ tokens, and each token is a vector of
# $C$ features (channels). The tokens are plain Gaussian noise drawn with the
# seed's random seed. They stand for no words, so they carry no meaning. This
# matters later, when we come to the library analogy.

# %%
B, T, C = BATCH_SHAPE  # batch, time (tokens per sequence), channels (features per token)
head_size = HEAD_SIZE  # d_k: the size of each query, key and value vector

torch.manual_seed(BATCH_SEED)
x = torch.randn(B, T, C)  # (B, T, C)
print("x:", tuple(x.shape))
print("first six features of token 0 of sequence 0:")
print(x[0, 0, :6].numpy())

# %% [markdown]
# ## Queries, keys and values
#
# Three linear maps without bias turn each token $x_t \in \mathbb{R}^{C}$ into a query
# $q_t = W_Q x_t$, a key $k_t = W_K x_t$ and a value $v_t = W_V x_t$, each of size $d_k$.
# The seed creates `key` before `query`. We keep that order, because each layer
# draws its random initial weights from the same generator, and then add
# `value` last so that it does not change the other two.

# %%
key = nn.Linear(C, head_size, bias=False)  # created first, as in the seed
query = nn.Linear(C, head_size, bias=False)  # second, as in the seed
value = nn.Linear(C, head_size, bias=False)  # third: the seed has no value projection
k = key(x)  # (B, T, C) -> (B, T, head_size)
q = query(x)  # (B, T, C) -> (B, T, head_size)
v = value(x)  # (B, T, C) -> (B, T, head_size)
print("W_K:", tuple(key.weight.shape), " k:", tuple(k.shape))
print("W_Q:", tuple(query.weight.shape), " q:", tuple(q.shape))
print("W_V:", tuple(value.weight.shape), " v:", tuple(v.shape))

# %% [markdown]
# ## Scores, scaled by 1/√d_k
#
# Every query is compared with every key of the same sequence by a dot product.
# For the whole batch, that is one batched matrix product. Transposing the last two
# dimensions of `k` turns each $(T, d_k)$ block into $(d_k, T)$, so the product has
# one $(T, T)$ score matrix per sequence: row $i$ is query $i$, column $j$ is key $j$.

# %%
raw_scores = q @ k.transpose(-2, -1)  # (B, T, head_size) @ (B, head_size, T) -> (B, T, T)
scores = raw_scores / math.sqrt(head_size)  # (B, T, T)
print("scores:", tuple(scores.shape))
print("scaled scores of sequence 0:")
print(scores[0].numpy())

# %% [markdown]
# <div class="admonition warning">
# <p class="admonition-title">The seed never divides by the square root of the head size</p>
#
# The seed's text says the scores are divided by $\sqrt{d_k}$. Its code
# (`wei = q @ k.transpose(-2, -1)`) never does this, so every weight it prints comes
# from unscaled scores. Here is why the factor is there. If the entries of $q$ and $k$
# are independent with variance one, then $q \cdot k$ is a sum of $d_k$ such products,
# so its variance is $d_k$. Wider heads would then give ever larger scores, and the
# softmax would pile nearly all the weight onto one key. Dividing by $\sqrt{d_k}$
# brings the variance back to one for any head size. This factor is also the
# default of `torch.nn.functional.scaled_dot_product_attention`.
#
# </div>
#
# The cell below measures this on random vectors. It then measures the scores of this
# notebook. PyTorch initialises `nn.Linear` with small weights, so here the scores are
# already small before scaling, and scaling makes them smaller still.

# %%
generator = torch.Generator().manual_seed(0)
for d_k in (16, 64, 256, 1024):
    q_rand = torch.randn(10_000, d_k, generator=generator)  # entries of variance one
    k_rand = torch.randn(10_000, d_k, generator=generator)
    dots = (q_rand * k_rand).sum(dim=-1)  # (10 000,) dot products
    scaled = dots / math.sqrt(d_k)
    print(f"d_k = {d_k:4d}: std of q·k {dots.std():6.2f}, of q·k / sqrt(d_k) {scaled.std():.2f}")
print(f"this notebook, d_k = {head_size}:")
print(f"  std of the raw scores {raw_scores.std():.2f}, of the scaled scores {scores.std():.2f}")

# %% [markdown]
# ## The causal mask
#
# A causal model predicts each token from the ones before it, so position $i$ may
# only look at keys $0, \dots, i$. The allowed pairs lie on and below the diagonal
# of a lower-triangular matrix. `attn_ref.causal_mask(T)` builds the same boolean
# matrix as the seed's `torch.tril(torch.ones(T, T))` test. Every score above the
# diagonal is replaced by $-\infty$, and then each row goes through a softmax:
#
# $$
# w_{ij} = \frac{e^{s_{ij}}}{\sum_{j'} e^{s_{ij'}}}, \qquad e^{-\infty} = 0 .
# $$

# %%
allowed = causal_mask(T)  # (T, T), True where query i may see key j, i.e. j <= i
print("same as the seed's tril test:", torch.equal(allowed, torch.tril(torch.ones(T, T)) != 0))
print(allowed.int().numpy())

masked = scores.masked_fill(~allowed, float("-inf"))  # (B, T, T): the (T, T) mask broadcasts over B
wei = torch.softmax(masked, dim=-1)  # (B, T, T), each row sums to one
print("masked scores of sequence 0:")
print(masked[0].numpy())
print("weights of sequence 0:")
print(wei[0].numpy())

# %% [markdown]
# Three things to check in the weights above:
#
# - **Everything above the diagonal is exactly zero.** It is not just tiny: the
#   exponential of $-\infty$ is zero.
# - **Every row sums to one.** The softmax divides by the sum over the keys the
#   query is allowed to see.
# - **The first row is $[1, 0, \dots, 0]$ in every sequence, whatever the scores.**
#   Query 0 may see only key 0. A softmax over a single number $s$ gives
#   $e^{s}/e^{s} = 1$. So the output at position 0 is the value $v_0$, unchanged.

# %%
print("first row of the weights, one line per sequence:")
print(wei[:, 0].numpy())
print("largest weight above the diagonal:", wei[:, ~allowed].max().item())
print("every row sums to one:", torch.allclose(wei.sum(dim=-1), torch.ones(B, T)))

# %% [markdown]
# <div class="admonition warning">
# <p class="admonition-title">The seed's weights are sharper than scaled attention gives</p>
#
# Without the $1/\sqrt{d_k}$ factor, the scores are spread $\sqrt{d_k}$ times as wide.
# As a result, the seed's softmax puts much more weight on a few keys. The cell below
# recomputes the seed's weights (they match its printout) and compares the largest
# weight in each row with and without scaling. The last column is the weight each key
# would get if the row were uniform.
#
# </div>

# %%
wei_seed = torch.softmax(raw_scores.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, T, T), unscaled
print("the seed's weights of sequence 0 (no scaling):")
print(wei_seed[0].numpy())
print("largest weight in each row of sequence 0:")
print(f"{'query i':>7} {'seed (unscaled)':>16} {'scaled':>7} {'uniform 1/(i+1)':>16}")
for row in range(T):
    print(f"{row:>7} {wei_seed[0, row].max():16.4f} {wei[0, row].max():7.4f} {1 / (row + 1):16.4f}")
last_seed, last = wei_seed[0, -1], wei[0, -1]  # the last position sees every key
ratio_seed, ratio = last_seed.max() / last_seed.min(), last.max() / last.min()
print(f"position {T - 1}: largest / smallest weight {ratio_seed:.1f} unscaled, {ratio:.1f} scaled")

# %% [markdown]
# ## Why −∞, and not a large negative number
#
# Code often masks with a large finite number such as $-10^{9}$ or $-10^{4}$ instead
# of $-\infty$. A finite constant $c$ gives a masked key the weight $e^{c - m}$ divided
# by the row's normalising sum, where $m$ is the largest allowed score. That weight
# becomes zero only when the exponential underflows. So it depends on the
# floating-point format and on how large the scores are. With $-\infty$, the weight
# is $e^{-\infty} = 0$ in every format and at every scale.

# %%
for dtype in (torch.float16, torch.float32, torch.float64):
    print(f"{dtype}: exp(-inf) = {torch.tensor(float('-inf'), dtype=dtype).exp().item()}")


def future_weight(weights):
    """Largest total weight that any query gives to keys after it (should be 0)."""
    return weights.masked_fill(allowed, 0.0).sum(dim=-1).max().item()  # (B, T, T) -> (B, T) -> max


print("\nfilling the masked scores with a constant, float32:")
for fill in (-1.0, -10.0, -30.0, -100.0, -1e4, -1e9, float("-inf")):
    leaked = future_weight(torch.softmax(scores.masked_fill(~allowed, fill), dim=-1))
    print(f"  fill {fill:>8g}: largest weight on future keys {leaked:.3g}")

# %% [markdown]
# At this notebook's scale, the large constants in the table already give exactly
# zero in float32, because the exponential underflows. The small ones leak weight
# to the future. The catch is that a finite constant is only safe while
# the scores stay far smaller than it. Below, the mask is *added* to the scores, as
# the original BERT code did with $-10\,000$. The scores are then multiplied by a
# growing factor, which stands in for a model whose scores have grown large. Once the
# scores are about as large as the constant, the future keys get weight. $-\infty$
# never leaks.

# %%
additive = torch.zeros(T, T).masked_fill(~allowed, -1e4)  # (T, T): 0 where allowed, -10 000 elsewhere
for logit_scale in (1, 100, 1_000, 10_000):
    big = scores * logit_scale  # (B, T, T)
    finite = future_weight(torch.softmax(big + additive, dim=-1))
    infinite = future_weight(torch.softmax(big.masked_fill(~allowed, float("-inf")), dim=-1))
    print(f"scores x {logit_scale:>6}: future weight {finite:.3g} with -1e4, {infinite:.3g} with -inf")

# %% [markdown]
# Half precision breaks the usual constant altogether. Float16 cannot store
# $-10^{9}$: the largest finite float16 number is printed below. PyTorch refuses to
# write $-10^{9}$ into a float16 tensor, and a conversion turns it into $-\infty$
# anyway. With $-\infty$, the masked weights are exactly zero in float16 too (the
# others are rounded to float16, as any float16 number is).

# %%
print("largest finite float16:", torch.finfo(torch.float16).max)
try:
    scores.half().masked_fill(~allowed, -1e9)
except RuntimeError as error:
    print("masked_fill(..., -1e9) on float16 scores raises:")
    print(" ", error)
print("-1e9 converted to float16:", torch.tensor(-1e9).half().item())
wei_half = torch.softmax(scores.half().masked_fill(~allowed, float("-inf")), dim=-1)  # (B, T, T)
print("float16 with -inf, weight on future keys:", future_weight(wei_half))

# %% [markdown]
# ## The output: weights times values
#
# Each output row mixes the *values* of the positions it may see, weighted by its row
# of weights: $\text{out}_i = \sum_{j \le i} w_{ij} v_j$. The batched product is a
# $(T, T)$ block times a $(T, d_k)$ block for every sequence.

# %%
out = wei @ v  # (B, T, T) @ (B, T, head_size) -> (B, T, head_size)
print("wei:", tuple(wei.shape), " v:", tuple(v.shape), " out:", tuple(out.shape))
print("output at position 0 equals v at position 0:", torch.equal(out[:, 0], v[:, 0]))

# %% [markdown]
# <div class="admonition warning">
# <p class="admonition-title">The seed mixes the raw inputs, and its shape comment is wrong</p>
#
# The seed computes `out = wei @ x`. This mixes the raw token vectors $x_j$ and has no
# value projection, so its output keeps the input width $C$, not the head size
# $d_k$. Its comment `(T,T) @ (B,T,C) --> (B,T,C)` also gives the wrong shape for
# `wei`, which holds one matrix per sequence. The cell below prints the real shapes.
#
# </div>

# %%
out_seed = wei_seed @ x  # (B, T, T) @ (B, T, C) -> (B, T, C): raw inputs, unscaled weights
print("wei is", tuple(wei_seed.shape), "not", (T, T))
print("the seed's out:", tuple(out_seed.shape), " a head's output:", tuple(out.shape))

# %% [markdown]
# ## The weights of one sequence
#
# Each row of the heatmap is a query and each column is a key. Everything above the
# diagonal is zero. The first map uses the scaled weights computed above. The second
# uses the seed's unscaled weights for the same sequence, which are visibly more
# concentrated.

# %%
ax = attention_heatmap(wei[0], title="Causal attention weights, sequence 0 (scaled)")
alt = (
    f"Heatmap of the {T} by {T} causal attention weights of sequence 0, scaled: zero above "
    "the diagonal, each row's weight spread over the keys it may see"
)
display(HTML(figure_to_svg(ax.figure, alt=alt)))

# %%
ax_seed = attention_heatmap(wei_seed[0], title="The seed's weights, sequence 0 (no scaling)")
alt_seed = (
    f"Heatmap of the seed's unscaled {T} by {T} causal attention weights of sequence 0: zero above "
    "the diagonal, most of each row's weight on one or two keys"
)
display(HTML(figure_to_svg(ax_seed.figure, alt=alt_seed)))

# %% [markdown]
# ## Checking against PyTorch
#
# `torch.nn.functional.scaled_dot_product_attention` with `is_causal=True` computes
# the same thing in one call. The site's reference function
# `attn_ref.scaled_dot_product_attention` also does, and it returns the weights too.
# Both agree with the step-by-step result to within float32 rounding.

# %%
reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, T, head_size)
out_ref, wei_ref = scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, T, head_size), (B, T, T)
print("largest |out - PyTorch output|:  ", (out - reference).abs().max().item())
print("largest |out - attn_ref output|: ", (out - out_ref).abs().max().item())
print("largest |wei - attn_ref weights|:", (wei - wei_ref).abs().max().item())
print("allclose to PyTorch:", torch.allclose(out, reference, atol=1e-6))

# %% [markdown]
# ## Reading one row: the library analogy
#
# The seed explains Q, K and V with a library. The **query** is the question you
# bring to the librarian. The **keys** are the labels on the books. The **values**
# are what is inside the books. The scores measure how well your question matches
# each label. The softmax turns them into shares that sum to one, and the answer
# is that mix of the books' contents.
#
# In this notebook, the reader is position 7 of sequence 0. It is the last position,
# so it may see all eight books, including itself. Its question is $q_7$, the label
# of book $j$ is $k_j$, and its contents are $v_j$. The table gives the actual numbers:
# score $q_7 \cdot k_j / \sqrt{d_k}$, the weight used here, and the seed's unscaled
# weight.

# %%
b, i = 0, T - 1  # sequence 0, query at position 7: the seed's "row 7"
print(f"{'book j':>6} {'score':>7} {'weight':>8} {'seed (unscaled)':>16}")
for j in range(T):
    print(f"{j:>6} {scores[b, i, j].item():7.3f} {wei[b, i, j].item():8.2%} {wei_seed[b, i, j].item():16.2%}")
print("books by weight, scaled:  ", wei[b, i].argsort(descending=True).tolist())
print("books by weight, unscaled:", wei_seed[b, i].argsort(descending=True).tolist())
print(f"uniform share: {1 / T:.2%}")
print("scaling keeps the order:", torch.equal(wei[b, i].argsort(), wei_seed[b, i].argsort()))

# %% [markdown]
# <div class="admonition warning">
# <p class="admonition-title">The seed's books have invented labels, and its percentages are unscaled</p>
#
# The seed labels books 0, 3, 6 and 7 as being "about dogs", "about animals", "about
# cats" and "about pets". It says the high weights mean "similar in meaning" and that
# "the model learned they're related". None of this holds here. The tokens are random
# noise and $W_Q$, $W_K$ are random, untrained matrices. Nothing was learned, and no
# token is about anything. The seed's percentages are the *unscaled* column above.
# Even in that column, its "others" line does not match the four remaining books.
# Scaled, the row is much closer to uniform. The seed calls book 3 a "medium match",
# yet its weight is close to the top two in both columns.
#
# </div>
#
# So what *can* these weights mean? Only geometry. Book $j$ gets more weight when
# $W_K x_j$ points the same way as $W_Q x_7$. Draw other random projections and the
# favourite book changes, although the tokens stay the same:

# %%
for init_seed in range(5):
    torch.manual_seed(init_seed)
    key_other = nn.Linear(C, head_size, bias=False)
    query_other = nn.Linear(C, head_size, bias=False)
    s = key_other(x[b]) @ query_other(x[b, i]) / math.sqrt(head_size)  # (T, d_k) @ (d_k,) -> (T,)
    w = torch.softmax(s, dim=-1)  # the last position sees every key, so no mask is needed
    print(f"projections drawn with seed {init_seed}: favourite book {w.argmax().item()}")
    print(" ", w.numpy())

# %% [markdown]
# The weights are not a similarity between tokens either. A similarity would be
# symmetric, but the score of query $i$ against key $j$ uses two different matrices,
# $(W_Q x_i) \cdot (W_K x_j)$, so it differs from the score of query $j$ against key $i$:

# %%
asymmetry = (scores - scores.transpose(-2, -1)).abs()  # (B, T, T): |s_ij - s_ji|
print("largest |score(i, j) - score(j, i)|:", asymmetry.max().item())

# %% [markdown]
# The analogy describes what training is *for*. A loss, such as next-token prediction,
# shapes $W_Q$, $W_K$ and $W_V$ until the questions and labels line up with what is
# useful. Only in a trained model can a high weight mean "this earlier token helps
# here". In this notebook, a high weight means only that two random projections happen
# to align.
#
# ## The causal property
#
# Because of the mask, the output at position $i$ depends only on tokens
# $0, \dots, i$. To test this, we collect the steps above into one function, replace
# token 5 of every sequence with new random numbers, and measure how far each
# position's output moves.


# %%
def causal_self_attention(x):
    """One causal attention head with the projections above: (B, T, C) -> (B, T, head_size)."""
    q, k, v = query(x), key(x), value(x)  # each (B, T, C) -> (B, T, head_size)
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_size)  # (B, T, T)
    allowed = causal_mask(x.shape[1])  # (T, T)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, T, T)
    return weights @ v  # (B, T, T) @ (B, T, head_size) -> (B, T, head_size)


print("same as the step-by-step output:", torch.equal(causal_self_attention(x), out))

changed = 5
x_changed = x.clone()
x_changed[:, changed] = torch.randn(B, C, generator=torch.Generator().manual_seed(0))  # a new token 5
moved = (causal_self_attention(x_changed) - out).abs().amax(dim=(0, 2))  # (B, T, head_size) -> (T,)
for t in range(T):
    print(f"position {t}: largest change of the output {moved[t].item()}")

# %% [markdown]
# Every position before the changed token stays exactly where it was, not even
# moved by a rounding error. The new token enters their rows only through a key whose
# weight is exactly $0$, and $0 \cdot v_5$ adds nothing. The changed position and
# every position after it can see the new token, so their outputs move.
#
# ## Padding: sequences of different lengths
#
# Real batches hold sequences of different lengths, padded to a common $T$.
# `attn_ref.padding_mask(lengths, T)` marks the real keys of each sequence. Its shape
# is $(B, 1, T)$, and the middle dimension broadcasts over the queries, so `&` with
# the $(T, T)$ causal mask gives one $(B, T, T)$ mask. Below, the four sequences get
# different lengths, and their tokens are padded on the right.

# %%
lengths = [8, 5, 3, 6]  # real tokens per sequence; the rest of the T positions is padding
real_keys = padding_mask(lengths, T)  # (B, 1, T): True on real tokens
mask = allowed & real_keys  # (T, T) & (B, 1, T) -> (B, T, T)
print("mask:", tuple(mask.shape))
print(f"sequence 2, {lengths[2]} real tokens:")
print(mask[2].int().numpy())

out_pad, wei_pad = scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, T, d_k), (B, T, T)
reference_pad = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
print("largest |attn_ref - PyTorch|:", (out_pad - reference_pad).abs().max().item())
print("real tokens, largest change from adding the padding mask:")
for seq, n in enumerate(lengths):
    moved_real = (out_pad[seq, :n] - out_ref[seq, :n]).abs().max().item()
    print(f"  sequence {seq}, positions 0..{n - 1}: {moved_real:.2g}")

# %% [markdown]
# With padding on the right, the real tokens come first. The causal mask already
# hides every later position from them, including the padding, so the padding mask
# changes nothing for real tokens. It only changes the rows of the padded positions,
# whose outputs are thrown away anyway.
#
# Padding on the *left* is common when generating text from a batch, because then all
# sequences end at the same position. In that case the padding comes first, and the
# causal mask alone would let real tokens attend to it. Flipping the padding mask
# puts the real tokens at the end:

# %%
real_keys_left = padding_mask(lengths, T).flip(-1)  # (B, 1, T): True on the last n positions
mask_left = allowed & real_keys_left  # (T, T) & (B, 1, T) -> (B, T, T)
print("sequence 2, padded on the left:")
print(mask_left[2].int().numpy())

out_left, wei_left = scaled_dot_product_attention(q, k, v, attn_mask=mask_left)  # (B, T, d_k)
out_causal_only, _ = scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, T, d_k)
print("real tokens, largest difference from the sequence run on its own:")
for seq, n in enumerate(lengths):
    real = slice(T - n, T)  # the last n positions
    alone, _ = scaled_dot_product_attention(q[seq, real], k[seq, real], v[seq, real], is_causal=True)
    with_pad = (out_left[seq, real] - alone).abs().max().item()
    without_pad = (out_causal_only[seq, real] - alone).abs().max().item()
    print(f"  sequence {seq}: {with_pad:.2g} with the padding mask, {without_pad:.2g} causal mask only")

# %% [markdown]
# ## A query with no key to look at
#
# The rows of the mask printed above for the padded positions at the start of
# sequence 2 are entirely zero. Those queries are allowed to see no key at all. A
# softmax over nothing is undefined: every score is $-\infty$, so the softmax computes
# $0/0$. Different implementations handle this case differently. The cell below
# compares them on the first query of sequence 2:
#
# - `attn_ref` returns zero weights and a zero output, and PyTorch's
#   `scaled_dot_product_attention` (which returns no weights) a zero output, in the
#   PyTorch version printed below; older versions gave `nan` there;
# - a plain softmax over the $-\infty$ scores returns `nan`;
# - a finite fill such as $-10^{9}$ hides the problem: every key gets the same
#   finite score, so the query spreads its weight evenly over keys it must not see,
#   padding and future alike;
# - `nn.MultiheadAttention`, whose boolean mask means the opposite (`True` = may *not*
#   attend), returns `nan` when called as usual, because it then computes the weights
#   with a plain softmax. With `need_weights=False` it calls
#   `scaled_dot_product_attention` instead, and its output stays finite.

# %%
no_key = ~mask_left.any(dim=-1)  # (B, T): True for a query with every key masked
for seq in range(B):
    print(f"sequence {seq}: queries with no key {torch.nonzero(no_key[seq]).flatten().tolist()}")

seq, t = 2, 0  # the first query of sequence 2
plain = torch.softmax(scores.masked_fill(~mask_left, float("-inf")), dim=-1)  # (B, T, T)
finite = torch.softmax(scores.masked_fill(~mask_left, -1e9), dim=-1)  # (B, T, T)
reference_left = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask_left)

# nn.MultiheadAttention projects its inputs again with its own (random) weights: its
# outputs are compared here only for nan, not for value.
torch.manual_seed(0)
mha = nn.MultiheadAttention(head_size, num_heads=1, batch_first=True)
blocked = ~mask_left  # (B, T, T): nn.MultiheadAttention's convention, True = may not attend
mha_out, _ = mha(q, k, v, attn_mask=blocked)  # need_weights=True, the default
mha_out_fused, _ = mha(q, k, v, attn_mask=blocked, need_weights=False)

print(f"\nsequence {seq}, query {t}, torch {torch.__version__}:")
rows = {
    "attn_ref, weights": wei_left[seq, t],
    "attn_ref, output": out_left[seq, t],
    "PyTorch scaled_dot_product_attention, output": reference_left[seq, t],
    "plain softmax over -inf, weights": plain[seq, t],
    "softmax with a -1e9 fill, weights": finite[seq, t],
    "nn.MultiheadAttention, output": mha_out[seq, t],
    "nn.MultiheadAttention with need_weights=False, output": mha_out_fused[seq, t],
}
for label, row in rows.items():
    print(f"  {label}:")
    print(f"    {row[:T].numpy()}{' ...' if len(row) > T else ''}")

# %% [markdown]
# A `nan` does not stay where it starts. Feed the plain-softmax output into one more
# attention layer that masks the padding correctly. The padded keys get weight exactly
# $0$, but $0 \cdot \text{nan}$ is `nan`, so the real tokens are poisoned too:

# %%
out_plain = plain @ v  # (B, T, T) @ (B, T, head_size) -> (B, T, head_size), nan where no key
next_layer, _ = scaled_dot_product_attention(out_plain, out_plain, out_plain, attn_mask=mask_left)
real = slice(T - lengths[seq], T)  # the real tokens of sequence 2, at the end
print("real tokens of sequence 2 with a nan output after one more layer:")
print("  from the plain softmax:", next_layer[seq, real].isnan().any(dim=-1).numpy())
next_layer_zeros, _ = scaled_dot_product_attention(out_left, out_left, out_left, attn_mask=mask_left)
print("  from attn_ref's zeros: ", next_layer_zeros[seq, real].isnan().any(dim=-1).numpy())

# %% [markdown]
# Zeros are the safer convention. Even so, the outputs of padded queries mean nothing,
# and they must be left out of the loss.
#
# ## Summary
#
# - One head: project to $q, k, v$ of size $d_k$; score $QK^\top/\sqrt{d_k}$ of shape
#   $(B, T, T)$; mask the future with $-\infty$; softmax over keys; multiply by $V$ to
#   get $(B, T, d_k)$.
# - $-\infty$ gives masked keys exactly zero weight in every dtype and at every scale.
#   A finite constant works only while it underflows, and float16 cannot hold $-10^{9}$.
# - The first query sees only itself, so its weights are $[1, 0, \dots, 0]$ and its
#   output is $v_0$.
# - Changing a token leaves every earlier output bit-for-bit unchanged.
# - Combine masks with `&`. A query whose keys are all masked gets `nan` from a plain
#   softmax, and zeros from `attn_ref` and PyTorch's `scaled_dot_product_attention`.
# - With random, untrained projections, the weights describe random geometry, not meaning.

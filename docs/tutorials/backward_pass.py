# ---
# jupyter:
#   search:
#     boost: 0.8  # FlashAttention's backward comes after its forward: searches land there first
# ---

# %% [markdown]
# # Training attention: the backward pass, and FlashAttention's
#
# Every page so far runs attention forward. Training also runs it backward: it needs the
# gradient of the loss with respect to the queries, keys and values. That is where
# attention's memory goes. To differentiate, autograd keeps what the forward pass
# computed, and for attention that includes `(T, T)` matrices of every head.
#
# This page derives the gradients of attention by hand and checks them against
# autograd and against PyTorch. It then counts and measures what autograd keeps. Last,
# it builds FlashAttention's answer: keep only the output and one number per query, and
# compute each tile of the weights again in the backward pass. It measures the memory
# that saves, counts the work it adds, and checks the gradients on many random inputs.
#
# It assumes tiled attention and the log-sum-exp
# ([Attention without the T×T matrix](efficient_attention.md)) and masks
# ([Self-attention with a causal mask](causal_self_attention.md)). Shapes follow the
# site's [notation](../notation.md): $L$ queries, $S$ keys, `(B, H, T, d_k)` for heads.
# A gradient is written with a $d$ in front: $dO$ is the gradient of the loss with
# respect to the output $O$, and it has the shape of $O$.
#
# Here is one head, 4 queries and 6 keys, forward and backward (the numbers of the
# section "The gradients of attention"; red above zero, blue below, weights in viridis).

# %% tags=["plot"]
import math

import torch

from attn_ref.backward import attention_backward
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.plotting import figure_to_svg

g = torch.Generator().manual_seed(0)
q_few, k_few, v_few = (
    torch.randn(n, d, generator=g, dtype=torch.float64)
    for n, d in ((4, 3), (6, 3), (6, 2))
)  # L = 4 queries, S = 6 keys, d_k = 3, d_v = 2
d_out_few = torch.randn(4, 2, generator=g, dtype=torch.float64)
out_few, weights_few = scaled_dot_product_attention(q_few, k_few, v_few)
flow = {  # every matrix of the picture, as the formulas beside them say
    "S": q_few @ k_few.T / math.sqrt(3),
    "dP": d_out_few @ v_few.T,
    "D": (d_out_few * out_few).sum(dim=-1, keepdim=True),  # (L, 1)
}
flow["dS"] = weights_few * (flow["dP"] - flow["D"])
flow["dQ"], flow["dK"], flow["dV"] = attention_backward(
    q_few, k_few, v_few, weights_few, d_out_few
)
fig, ax = canvas(10, 12)
c = 0.5  # the side of one number's cell
note(ax, 0.2, 0.35, "forward", ha="left", fontweight="bold")
box_s = grid(ax, flow["S"], 0.2, 1.4, cell=c, label="S = QKᵀ/√dₖ")
box_p = grid(ax, weights_few, 4.2, 1.4, cell=c, cmap="viridis")
box_o = grid(ax, out_few, 8.7, 1.4, cell=c, label="O = PV")
note(ax, box_p.center[0], 1.1, "P = softmax(S)", fontsize=12)
arrow(ax, box_s.right, box_p.left)
arrow(ax, box_p.right, box_o.left)
note(ax, 0.2, 4.15, "backward", ha="left", fontweight="bold")
box_do = grid(ax, d_out_few, 8.7, 5.2, cell=c, label="dO")
box_d = grid(ax, flow["D"], 7.4, 5.2, cell=c, label="D")
box_dp = grid(ax, flow["dP"], 3.9, 5.2, cell=c, label="dP = dO Vᵀ")
box_ds = grid(ax, flow["dS"], 0.2, 5.2, cell=c, label="dS = P∘(dP − D)")
note(ax, box_d.center[0], 7.55, "rowsum(dO∘O)", fontsize=10)
arrow(ax, box_do.left, box_d.right)
arrow(ax, box_dp.left, box_ds.right)
for name, x, text, align in (
    ("dQ", 0.2, "dQ = dS K/√dₖ", "left"),
    ("dK", 3.9, "dK = dSᵀQ/√dₖ", "left"),
    ("dV", 8.7, "dV = PᵀdO", "right"),
):
    box = grid(ax, flow[name], x, 8.7, cell=c)
    note(ax, x if align == "left" else 9.7, 8.35, text, ha=align, fontsize=10)
arrow(ax, (0.95, 7.2), (0.95, 8.0))
arrow(ax, (2.7, 7.2), (4.3, 8.0))
arrow(ax, box_do.bottom, (box_do.center[0], 8.0))
figure_to_svg(
    fig,
    alt="One attention head as matrices. Forward: the 4 by 6 scores S, their "
    "softmax P, and the 4 by 2 output O = PV. Backward: the output's gradient "
    "dO gives D, one number per query, and dP = dO Vᵀ; dS = P∘(dP − D); then "
    "dQ = dS K/√dₖ (4 by 3), dK = dSᵀQ/√dₖ (6 by 3) and dV = PᵀdO (6 by 2).",
)

# %% [markdown]
# Read it from the top. Forward, the scores become weights, and the weights mix the
# values. Backward, the gradient $dO$ arrives from the layers above and flows the other
# way: through the values ($dV$, $dP$), through the softmax ($dS$), and into the
# queries and keys ($dQ$, $dK$). The softmax step needs one extra number per query,
# $D$, which comes from $dO$ and $O$ alone. The sections below derive each arrow.
# %%
import numpy as np
import torch.nn.functional as F

from attn_ref.backward import (
    flash_attention,
    flash_attention_backward,
    softmax_backward,
    softmax_jacobian,
    standard_attention,
)
from attn_ref.diagrams import Box, outline, tile_order
from attn_ref.measure import peak_memory
from attn_ref.multihead import repeat_kv_heads
from attn_ref.tiled import dropout_mask, tiled_attention

torch.set_num_threads(1)  # one thread: results that do not depend on the cores
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## The softmax's Jacobian
#
# Attention has one step that is not a matrix product: the softmax. Take one row of
# scores $s$ and its weights $p_j = e^{s_j} / \sum_k e^{s_k}$. Raising the score $s_k$
# changes every weight of the row, because they share the denominator:
#
# $$
# \begin{aligned}
# \frac{\partial p_j}{\partial s_k} &= p_j (\delta_{jk} - p_k), \\
# J &= \operatorname{diag}(p) - p \, p^\top
# \end{aligned}
# $$
#
# where $\delta_{jk}$ is 1 if $j = k$ and 0 otherwise. The diagonal is positive: a
# score raises its own weight. Everything else is negative: it lowers the others. Every
# row of $J$ sums to zero, because the weights always sum to one.
# `attn_ref.backward.softmax_jacobian` builds $J$; autograd finds the same matrix.

# %%
s = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
p = torch.softmax(s, dim=-1)
J = softmax_jacobian(p)
J_autograd = torch.autograd.functional.jacobian(
    lambda x: torch.softmax(x, dim=-1), s
)
print("p =", p)
print(f"diag(p) - p pᵀ:\n{J}")
print(f"largest |J - autograd's Jacobian|: {(J - J_autograd).abs().max():.1e}")
print(f"largest |row sum|: {J.sum(dim=-1).abs().max():.1e}")

# %% [markdown]
# The backward pass never needs $J$ itself, only its product with the gradient $dp$
# that arrives from above. $J$ is symmetric, so $ds = J^\top dp = J \, dp$, and
#
# $$
# \begin{aligned}
# ds &= \operatorname{diag}(p) \, dp - p \, (p^\top dp) \\
#    &= p \circ (dp - p^\top dp)
# \end{aligned}
# $$
#
# where $\circ$ multiplies entry by entry. The product costs a dot product and a
# subtraction per row, not an $S \times S$ matrix. `softmax_backward` computes it for
# every row at once.

# %%
dp = torch.tensor(
    [0.3, -1.0, 2.0], dtype=torch.float64
)  # dL/dp, from the layers above
print("J dp             :", J @ dp)
print("p ∘ (dp - pᵀ dp) :", softmax_backward(p, dp))
print(f"where pᵀ dp = {p @ dp:.4f}")

# %% [markdown]
# ## The gradients of attention
#
# For one head, with $\text{scale} = 1 / \sqrt{d_k}$ by default, the forward pass is
#
# $$
# \begin{aligned}
# S &= \text{scale} \cdot Q K^\top \;(+\, M), \\
# P &= \operatorname{softmax}(S), \\
# O &= P V.
# \end{aligned}
# $$
#
# (Here $S$ is the matrix of scores, as in the FlashAttention papers, not the number of
# keys.) Going backward, each step turns the gradient of its output into gradients of
# its inputs. $O = PV$ is a matrix product, and the gradient of a product $AB$ is
# $dA = dC \, B^\top$ and $dB = A^\top dC$. The softmax goes row by row, as above. The
# scale and the mask are constants.
#
# $$
# \begin{aligned}
# dV &= P^\top dO, \\
# dP &= dO \, V^\top, \\
# D &= \operatorname{rowsum}(P \circ dP), \\
# dS &= P \circ (dP - D), \\
# dQ &= \text{scale} \cdot dS \, K, \\
# dK &= \text{scale} \cdot dS^\top Q.
# \end{aligned}
# $$
#
# $D$ holds one number per query. It can be computed without $P$. Row $i$ of $dP$ is
# $dP_{ij} = do_i \cdot v_j$, so
#
# $$
# \begin{aligned}
# D_i &= \sum_j P_{ij} \, (do_i \cdot v_j) \\
#     &= do_i \cdot \sum_j P_{ij} v_j = do_i \cdot o_i,
# \end{aligned}
# $$
#
# that is, $D = \operatorname{rowsum}(dO \circ O)$. FlashAttention's appendix B.2 (Dao et al.,
# 2022) derives it the same way.
#
# A masked entry has $P_{ij} = 0$, so its $dS_{ij}$ is zero too, and the mask needs no
# gradient formula of its own. FlashAttention-2's section 2.2 lists these equations
# without the scale and writes $dK = Q \, dS^\top$; the shapes only fit as
# $dS^\top Q$, which is how its Algorithm 2 computes it (line 16).
#
# `attn_ref.backward.attention_backward` writes these lines out, from the weights the
# forward pass returns. Below, the random loss gradient $dO$ of the picture at the top
# flows back through its 4 queries and 6 keys, by hand and by autograd, which
# differentiates `attn_ref.scaled_dot_product_attention` step by step.

# %%
g = torch.Generator().manual_seed(0)
q_few, k_few, v_few = (
    torch.randn(n, d, generator=g, dtype=torch.float64, requires_grad=True)
    for n, d in ((4, 3), (6, 3), (6, 2))
)  # L = 4 queries, S = 6 keys, d_k = 3, d_v = 2
d_out_few = torch.randn(4, 2, generator=g, dtype=torch.float64)
out_few, weights_few = scaled_dot_product_attention(q_few, k_few, v_few)
by_autograd = torch.autograd.grad(out_few, (q_few, k_few, v_few), d_out_few)
by_hand = attention_backward(q_few, k_few, v_few, weights_few, d_out_few)
for name, ours, theirs in zip(
    ("dQ", "dK", "dV"), by_hand, by_autograd, strict=True
):
    gap = (ours - theirs).abs().max()
    print(
        f"{name} {tuple(ours.shape)}: largest |by hand - autograd| = {gap:.1e}"
    )
D_from_weights = (weights_few * (d_out_few @ v_few.T)).sum(dim=-1).detach()
D_from_output = (d_out_few * out_few).sum(dim=-1).detach()
print("D = rowsum(P ∘ dP):", D_from_weights.numpy().round(4))
print("D = rowsum(dO ∘ O):", D_from_output.numpy().round(4))

# %% [markdown]
# The two agree to float64 rounding, and so do the two forms of $D$.
#
# ## Checked twice: by finite differences, and against PyTorch
#
# `attn_ref.backward.standard_attention` puts the hand-written backward pass into a
# `torch.autograd.Function`: its forward pass keeps $P$, and its backward pass is
# `attention_backward`, so autograd never differentiates it step by step.
# `torch.autograd.gradcheck` checks it independently. It nudges every input entry by a
# small step, measures how the output moves, and compares these finite differences with
# the gradients our backward pass returns. It needs float64, where the differences are
# accurate. The second check compares our gradients with those of PyTorch's
# `F.scaled_dot_product_attention`.
#
# The cases cover a boolean mask in which query 2 may see no key, an additive mask that
# hides key 3 from every query, and causal attention with fewer queries than keys.

# %% tags=["plot"]
g = torch.Generator().manual_seed(1)
L, S = 5, 7
boolean = torch.rand(L, S, generator=g) > 0.4
boolean[2] = False  # query 2 may see no key at all
additive = torch.randn(L, S, generator=g, dtype=torch.float64)
additive[:, 3] = -math.inf  # key 3 is hidden from every query
cases = {
    "no mask": {},
    "boolean, a query with no key": {"attn_mask": boolean},
    "additive, -inf on key 3": {"attn_mask": additive},
    "causal, L < S": {"is_causal": True},
}
q_two = torch.randn(
    2, L, 2, generator=g, dtype=torch.float64
)  # (B, L, d), B = 2
k_two, v_two = torch.randn(
    2, 2, S, 2, generator=g, dtype=torch.float64
)  # (B, S, d)
leaves = tuple(t.requires_grad_() for t in (q_two, k_two, v_two))
d_out_two = torch.randn(2, L, 2, generator=g, dtype=torch.float64)
checked = {}
for name, kwargs in cases.items():
    passed = torch.autograd.gradcheck(
        lambda q, k, v, kwargs=kwargs: standard_attention(q, k, v, **kwargs),
        leaves,
    )
    ours = torch.autograd.grad(
        standard_attention(*leaves, **kwargs), leaves, d_out_two
    )
    out_torch = F.scaled_dot_product_attention(*leaves, **kwargs)
    theirs = torch.autograd.grad(out_torch, leaves, d_out_two)
    gap = max(
        (a - b).abs().max().item() for a, b in zip(ours, theirs, strict=True)
    )
    checked[name] = (passed, gap)
    print(
        f"{name:<29} gradcheck {passed}, largest |ours - PyTorch's| {gap:.0e}"
    )

# %% [markdown]
# What should a query that sees no key get? A plain softmax of a row of $-\infty$ is
# $0/0$, `nan`. PyTorch (since version 2.5) returns an output of zero there instead, and
# the gradient follows: its weights are zero, so nothing flows back through them. Here is
# query 2 of the first sequence, with PyTorch's numbers beside ours.

# %% tags=["plot"]
out_ours = standard_attention(*leaves, attn_mask=boolean)
out_torch = F.scaled_dot_product_attention(*leaves, attn_mask=boolean)
grads_ours = torch.autograd.grad(
    out_ours, leaves, d_out_two, retain_graph=True
)
grads_torch = torch.autograd.grad(out_torch, leaves, d_out_two)
print("output of query 2:  ours", out_ours[0, 2].detach())
print("               PyTorch's", out_torch[0, 2].detach())
print("its dQ:             ours", grads_ours[0][0, 2])
print("               PyTorch's", grads_torch[0][0, 2])
d_out_moved = d_out_two.clone()
d_out_moved[:, 2] += 100.0  # a different loss gradient for query 2 only
moved = torch.autograd.grad(out_ours, leaves, d_out_moved)
pairs = zip(moved[1:], grads_ours[1:], strict=True)
unchanged = all(torch.equal(a, b) for a, b in pairs)
print("dK and dV unchanged when query 2's dO changes:", unchanged)

# %% [markdown]
# Both give zeros, and query 2's gradient never reaches the keys or values. So the
# backward pass is right. The rest of the page is about what it costs.
#
# ## What autograd keeps
#
# To run the backward pass, autograd keeps tensors from the forward pass: the lines
# above need $P$, $Q$, $K$ and $V$. PyTorch lets us watch it.
# `torch.autograd.graph.saved_tensors_hooks` calls a function on every tensor an
# operation saves for the backward pass. The function below lists them, one per block
# of memory (two views of one tensor count once), for one head with $T = 64$ and
# $d_k = 8$. Four ways of computing the same attention:
#
# - **autograd**: `attn_ref.scaled_dot_product_attention`, differentiated step by step;
# - **standard**: `standard_attention`, the hand-written backward pass, which keeps $P$;
# - **flash**: `attn_ref.backward.flash_attention`, built below;
# - **PyTorch**: `F.scaled_dot_product_attention`.


# %% tags=["plot"]
def saved_by(attention, T=64, d=8):
    """The shapes of the tensors autograd keeps for one call's backward."""
    q, k, v = (torch.randn(1, 1, T, d, requires_grad=True) for _ in range(3))
    kept = {}  # one entry per block of memory: views of one tensor count once

    def pack(tensor):
        kept[tensor.untyped_storage().data_ptr()] = tuple(tensor.shape)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = attention(q, k, v)
    del output
    return list(kept.values())


ways = {
    "autograd": lambda *qkv: scaled_dot_product_attention(
        *qkv, is_causal=True
    )[0],
    "standard": lambda *qkv: standard_attention(*qkv, is_causal=True),
    "flash": lambda *qkv: flash_attention(*qkv, is_causal=True, block_size=16),
    "PyTorch": lambda *qkv: F.scaled_dot_product_attention(
        *qkv, is_causal=True
    ),
}
saved = {name: saved_by(attention) for name, attention in ways.items()}
for name, shapes in saved.items():
    square = sum(shape[-2:] == (64, 64) for shape in shapes)
    print(f"{name:<9} keeps {len(shapes)} tensors, {square} of them (T, T):")
    print("         ", sorted(set(shapes)))

# %% [markdown]
# Differentiated step by step, `attn_ref`'s attention leaves several `(T, T)` tensors
# behind: the scores, their exponentials and the weights, each saved by an operation
# that needs it to differentiate. The hand-written backward pass needs only $P$. The
# flash version keeps no `(T, T)` tensor at all: the inputs, the output, and one number
# per query (shape `(1, 1, 64)`). PyTorch's CPU kernel keeps the same five tensors.
#
# How much memory is that in all? The cell below measures the peak of one forward and
# one backward pass of one causal head of width 32 (`attn_ref.measure.peak_memory`, as
# in [Attention without the T×T matrix](efficient_attention.md#memory-measured)). The
# peak includes the inputs and the gradients, $Q, K, V, O, dQ, dK, dV$: seven tensors of
# shape `(T, 32)`. What lies beyond them is what grows like $T^2$.

# %% tags=["plot", "measured"]
d_head = 32


def forward_backward(attention, T):
    """One causal head of width d_head, forward and backward, on new inputs."""
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 1, 1, T, d_head, generator=g)  # 3 x (B, H, T, d)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    attention(q, k, v).sum().backward()


def naive_causal(q, k, v):
    return scaled_dot_product_attention(q, k, v, is_causal=True)[0]


naive_lengths = [512, 1024, 2048]
naive_mib = [
    peak_memory(forward_backward, naive_causal, T) for T in naive_lengths
]
naive_mib = np.array(naive_mib) / 2**20
linear_mib = (
    7 * 4 * np.array(naive_lengths) * d_head / 2**20
)  # Q, K, V, O, dQ, dK, dV
matrix_mib = (
    4 * np.array(naive_lengths) ** 2 / 2**20
)  # one (T, T) float32 matrix
naive_slope = np.polyfit(np.log(naive_lengths), np.log(naive_mib), 1)[0]
naive_matrices = (naive_mib - linear_mib) / matrix_mib
print(
    f"    T   peak MiB   (T, {d_head}) tensors",
    "  beyond them, in (T, T) matrices",
)
for row in zip(
    naive_lengths, naive_mib, linear_mib, naive_matrices, strict=True
):
    print("{:>5} {:>10.2f} {:>17.2f} {:>14.2f}".format(*row))
print(f"fitted slope of log(peak) against log(T): {naive_slope:.2f}")

# %% [markdown]
# The slope is near 2: doubling $T$ about quadruples the peak. Beyond the seven
# `(T, 32)` tensors, the peak holds several `(T, T)` float32 matrices of this one head
# at once (the last column): those autograd keeps, and those the backward pass makes
# ($dP$, $dS$ and the gradients of the intermediate steps). A model multiplies this by
# its heads, its batch and its layers.
#
# ## FlashAttention's backward pass
#
# [Attention without the T×T matrix](efficient_attention.md) computed the forward pass
# tile by tile, never holding more than one tile of scores. The backward pass above
# needs all of $P$. FlashAttention (Dao et al., 2022) removes that need. It keeps, for
# each query, the normaliser of its softmax, and the output $O$. FlashAttention-2 (Dao,
# 2023, section 3.1.1) keeps the normaliser as one number, the log-sum-exp
# $L_i = m_i + \log \ell_i$: `state.logsumexp` of `tiled_attention`. With it, any tile of
# weights comes back from its scores alone:
#
# $$
# P_{ij} = e^{S_{ij} - L_i}.
# $$
#
# The backward pass then goes tile by tile too (FlashAttention-2's Algorithm 2). It
# first computes $D = \operatorname{rowsum}(dO \circ O)$, from the output instead of a
# full row of $P$: FlashAttention's appendix B.4 chooses this form because a row of $P$
# may not fit on chip. Then the keys and values go in blocks $K_j, V_j$ in the outer
# loop, and the queries in blocks $Q_i$ in the inner one. Each tile recomputes $S_{ij}$
# and $P_{ij}$, then adds its share to the gradients:
#
# $$
# \begin{aligned}
# dV_j &\mathrel{+}= P_{ij}^\top dO_i, \\
# dP_{ij} &= dO_i V_j^\top, \\
# dS_{ij} &= P_{ij} \circ (dP_{ij} - D_i), \\
# dQ_i &\mathrel{+}= \text{scale} \cdot dS_{ij} K_j, \\
# dK_j &\mathrel{+}= \text{scale} \cdot dS_{ij}^\top Q_i.
# \end{aligned}
# $$
#
# The loops run the other way round from the forward pass's. With the keys outside,
# $dK_j$ and $dV_j$ build up on chip while the queries stream past, and are written once.
# $dQ_i$ is read and written again for every block of keys. On a GPU, different thread
# blocks take different blocks of keys and add to $dQ$ with atomic additions (section
# 3.2). `attn_ref.backward.flash_attention_backward` follows the algorithm. It adds
# what the paper's listing leaves out: the scale, the masks, and dropout (see below),
# as the first FlashAttention's backward pass has them (its Algorithm 4).
#
# Below, 16 tokens in blocks of 4, causal. The picture numbers each tile by the step at
# which each pass computes it (hatched: skipped), then opens one tile of the backward
# pass: the weights it recomputes from $L$, and the $dS$ it makes with $D$. The cell
# prints the gradients against those of the standard backward pass.

# %% tags=["plot"]
g = torch.Generator().manual_seed(2)
q16, k16, v16, d_out16 = torch.randn(4, 16, 8, generator=g).double()
opts = {"is_causal": True, "block_size": 4, "trace": True}
qkv16 = (q16, k16, v16)
out16, forward16 = tiled_attention(*qkv16, **opts)
lse_grid = forward16.logsumexp  # (T,): beside Q, K, V, O, dO, all it gets
*grads16, state16 = flash_attention_backward(
    *qkv16, out16, lse_grid, d_out16, **opts
)
for name, state in (("forward", forward16), ("backward", state16)):
    computed, skipped = state.tiles_computed, state.tiles_skipped
    print(f"{name:<8} computed {computed} tiles, skipped {skipped}")
weights16 = scaled_dot_product_attention(q16, k16, v16, is_causal=True)[1]
standard16 = attention_backward(q16, k16, v16, weights16, d_out16)
for name, flash, standard in zip(
    ("dQ", "dK", "dV"), grads16, standard16, strict=True
):
    gap = (flash - standard).abs().max()
    print(f"{name}: largest |flash - standard| = {gap:.1e}")

D16 = (d_out16 * out16).sum(dim=-1)  # (T,): D, before the loops
opened = next(
    s for s in state16.trace if (s.rows.start, s.cols.start) == (8, 4)
)
rows, cols = (slice(r.start, r.stop) for r in (opened.rows, opened.cols))
dp_opened = d_out16[rows] @ v16[cols].T  # (4, 4): dP of the opened tile
fig, ax = canvas(10, 14.6)
for x, state, order in (
    (0.5, forward16, "forward: by row"),
    (5.5, state16, "backward: by column"),
):
    tile_order(ax, state.trace, (16, 16), (4, 4), x, 1.0, label=order)
    outline(ax, Box(x + 1, 3.0, 1, 1))  # the opened tile
note(ax, 5, 5.6, "the framed tile: queries 8–11, keys 4–7")
kw = {"cell": 0.8, "decimals": 1}
grid(ax, lse_grid[rows, None], 0.3, 7.2, label="L", **kw)
grid(ax, opened.weights, 1.6, 7.2, cmap="viridis", cell=0.8, decimals=2)
note(ax, 3.2, 6.9, "P = exp(S − L)")
grid(ax, dp_opened, 5.4, 7.2, cell=0.8, label="dP = dO Vᵀ")
grid(ax, D16[rows, None], 8.9, 7.2, label="D", **kw)
grid(ax, opened.grad_scores, 1.6, 11.3, cell=0.8, label="dS = P∘(dP − D)")
for k, line in enumerate(
    ("then add to", "dV: PᵀdO", "dK: dSᵀQ/√dₖ", "dQ: dS K/√dₖ")
):
    note(ax, 5.6, 11.6 + 0.8 * k, line, ha="left")
figure_to_svg(
    fig,
    alt="The 4 by 4 tiles of 16 causal tokens in blocks of 4: the forward "
    f"pass computes {forward16.tiles_computed} row by row, the backward pass "
    f"the same {state16.tiles_computed} column by column, both skipping the "
    f"{state16.tiles_skipped} above the diagonal. The tile of queries 8 to 11 "
    "and keys 4 to 7, opened: its log-sum-exp L, the weights P = exp(S − L) "
    "it recomputes, dP, the column D, and dS = P∘(dP − D).",
)
# %% [markdown]
# The forward pass visits the tiles row by row, the backward pass column by column.
# Both skip the same tiles above the diagonal, where every key comes after every
# query: no weight there is nonzero, and neither is any gradient. In the opened tile,
# each row of $P$ is a part of one query's weights, recomputed from its $L$ alone, and
# each row of $dS$ subtracts that query's $D$ before multiplying by $P$. The gradients
# equal the standard pass's to float64 rounding.
#
# A query that sees no key has $m = -\infty$ and $\ell = 0$, so its log-sum-exp is
# $-\infty$, and $e^{S_{ij} - L_i}$ would be $e^{-\infty + \infty}$, `nan`.
# `flash_attention_backward` reads such an $L_i$ as $+\infty$, so that the weights come
# back as $e^{-\infty} = 0$, and the gradient of that query is zero, as PyTorch's. (The
# section "What FlashAttention's own code does differently" says which of its CUDA
# kernels store which.)
#
# `attn_ref.backward.flash_attention` puts both passes into a `torch.autograd.Function`:
# the forward pass is `tiled_attention` and keeps $Q, K, V, O$ and $L$ (the saved tensors
# listed above), the backward pass is `flash_attention_backward`. It is used like
# `F.scaled_dot_product_attention`, with a block size.
#
# ## Exact, on many inputs
#
# The cell below draws 20 random cases: batch and head counts, lengths $L \ne S$ up to
# 32, head widths, block sizes (some larger than the sequence), no mask, a boolean mask
# with a query that sees no key, an additive mask, or causal attention. Each case runs in
# four dtypes. For float64 and float32 the reference is PyTorch's gradient in the same
# dtype. `flash_attention` computes bfloat16 and float16 inputs in float32 and rounds
# the gradients at the end, so there the reference is PyTorch's float32 gradient. The
# cell prints the largest difference per dtype, beside the dtype's rounding step at 1
# (its machine epsilon) and the largest gradient seen.

# %% tags=["plot"]
dtypes = (torch.float64, torch.float32, torch.bfloat16, torch.float16)
g = torch.Generator().manual_seed(3)


def draw(low, high):
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (), generator=g))


# per case and dtype: (case, dtype, largest difference, largest gradient)
sweep = []
sweep_cases = []  # per case: its inputs, for the tests to check every gap
for case in range(20):
    B, H = draw(1, 3), draw(1, 3)
    L, S = draw(1, 32), draw(1, 32)
    d_k, d_v = draw(1, 16), draw(1, 16)
    blocks = (
        draw(1, 40),
        draw(1, 40),
    )  # (block_q, block_k): some larger than L or S
    masking = ("none", "boolean", "additive", "causal")[case % 4]
    mask = None
    if masking == "boolean":
        mask = (
            torch.rand(B, 1, L, S, generator=g) > 0.3
        )  # (B, 1, L, S): for all heads
        mask[..., 0, :] = False  # query 0 sees no key
    elif masking == "additive":
        mask = torch.randn(L, S, generator=g, dtype=torch.float64)
    shapes = ((L, d_k), (S, d_k), (S, d_v))
    inputs64 = [
        torch.randn(B, H, *shape, generator=g).double() for shape in shapes
    ]
    d_out64 = torch.randn(B, H, L, d_v, generator=g, dtype=torch.float64)
    sweep_cases.append((inputs64, d_out64, mask, masking, blocks))
    for dtype in dtypes:
        exact = dtype in (torch.float64, torch.float32)
        reference_dtype = (
            dtype if exact else torch.float32
        )  # half: computed in float32
        kwargs = {"is_causal": masking == "causal"}
        if (
            mask is not None and mask.is_floating_point()
        ):  # additive: in the dtype
            kwargs["attn_mask"] = mask.to(
                reference_dtype
            )  # of the reference, for both
        elif mask is not None:
            kwargs["attn_mask"] = mask
        flash_leaves = [t.to(dtype).requires_grad_() for t in inputs64]
        d_out = d_out64.to(dtype)
        out = flash_attention(*flash_leaves, block_size=blocks, **kwargs)
        flash = torch.autograd.grad(out, flash_leaves, d_out)
        references = [t.detach().to(reference_dtype) for t in flash_leaves]
        references = [t.requires_grad_() for t in references]
        out = F.scaled_dot_product_attention(*references, **kwargs)
        reference = torch.autograd.grad(
            out, references, d_out.to(reference_dtype)
        )
        pairs = zip(flash, reference, strict=True)
        gap = max(
            (a.double() - b.double()).abs().max().item() for a, b in pairs
        )
        largest = max(b.abs().max().item() for b in reference)
        sweep.append((case, str(dtype), gap, largest))
print(
    "dtype           largest |flash - PyTorch|",
    " machine epsilon  largest |gradient|",
)
for dtype in dtypes:
    rows = [row for row in sweep if row[1] == str(dtype)]
    gap, largest = max(row[2] for row in rows), max(row[3] for row in rows)
    eps = torch.finfo(dtype).eps
    print(f"{dtype!s:<15} {gap:>24.1e} {eps:>16.1e} {largest:>19.1f}")

# %% [markdown]
# In float64 and float32 the differences are rounding: compare each with the dtype's
# epsilon times the size of the gradients. In bfloat16 and float16 the difference is
# mostly the rounding of the gradients to those formats, at the end, since the work in
# between is float32. The test suite holds every difference of every case to a bound
# derived from the float arithmetic of both computations, and draws more cases with
# `hypothesis`.
#
# ## Memory, measured: forward plus backward
#
# Now the same measurement as for the naive version, with `flash_attention` in tiles of
# 256 by 256, up to $T = 8192$. The naive version stopped at 2048 only to keep this
# page's build short: its peak grows like $T^2$.

# %% tags=["plot", "measured"]
flash_lengths = [512, 1024, 2048, 4096, 8192]
flash_block = 256


def flash_causal(q, k, v):
    return flash_attention(q, k, v, is_causal=True, block_size=flash_block)


flash_mib = [
    peak_memory(forward_backward, flash_causal, T) for T in flash_lengths
]
flash_mib = np.array(flash_mib) / 2**20
flash_linear = (
    7 * 4 * np.array(flash_lengths) * d_head / 2**20
)  # the seven (T, d)
flash_slope = np.polyfit(
    np.log(flash_lengths[-3:]), np.log(flash_mib[-3:]), 1
)[0]
print(
    f"    T   naive MiB   flash MiB   flash beyond the (T, {d_head}) tensors"
)
naive_by_length = dict(zip(naive_lengths, naive_mib, strict=True))
for T, flash, linear in zip(
    flash_lengths, flash_mib, flash_linear, strict=True
):
    naive = (
        f"{naive_by_length[T]:>11.2f}"
        if T in naive_by_length
        else f"{'—':>11}"
    )
    print(f"{T:>5} {naive} {flash:>11.2f} {flash - linear:>18.2f}")
print(
    f"slope of log(peak) against log(T): naive {naive_slope:.2f}",
    "(T = 512 to 2048),",
)
print(f"flash {flash_slope:.2f} (T = 2048 to 8192)")

# %% [markdown]
# The flash version's peak stays just above its seven `(T, 32)` tensors, which grow
# like $T$. What lies beyond them is a few tiles and Python's bookkeeping, about the same
# at every length (the last column). That fixed part still weighs at these lengths,
# which pulls the fitted slope below one; it would approach one as $T$ grows. At the
# lengths both were measured, the flash version needs a fraction of the naive one's
# memory, and the fraction shrinks as $T$ doubles.

# %% [markdown]
# ## What it costs
#
# Recomputing is not free. The forward pass makes two matrix products per tile:
# $S_{ij} = Q_i K_j^\top$ and $P_{ij} V_j$. The backward pass makes five: $S_{ij}$ again,
# then $dV_j$, $dP_{ij}$, $dQ_i$ and $dK_j$. A backward pass that kept $P$ would make
# the last four only. FlashAttention-2's section 4.1 counts the backward pass's work as
# 2.5 times the forward's for this reason, "2 matmuls in the forward pass and 5 matmuls
# in the backward pass, due to recomputation".
#
# `tiled_attention` and `flash_attention_backward` count their tiles and multiply-adds
# as they go. Below, one head with $T = 1000$ and $d_k = d_v = 64$, in tiles of 128,
# without and with the causal mask. First the tiles each pass computes and skips; then
# the multiply-adds. The paper's formula, $4 \cdot T^2 \cdot d$ floating-point operations
# for the forward pass (two per multiply-add), halved with a causal mask, stands beside
# the count.

# %% tags=["plot"]
g = torch.Generator().manual_seed(4)
T_cost, d_cost = 1000, 64
q_c, k_c, v_c, d_out_c = torch.randn(4, 1, 1, T_cost, d_cost, generator=g)
costs = {}
for causal in (False, True):
    out_c, fwd = tiled_attention(
        q_c, k_c, v_c, is_causal=causal, block_size=128
    )
    *_, bwd = flash_attention_backward(
        q_c,
        k_c,
        v_c,
        out_c,
        fwd.logsumexp,
        d_out_c,
        is_causal=causal,
        block_size=128,
    )
    costs[causal] = (fwd, bwd)
print("causal  tiles computed, skipped:  forward  backward")
for causal, (fwd, bwd) in costs.items():
    forward_tiles = f"{fwd.tiles_computed}, {fwd.tiles_skipped}"
    backward_tiles = f"{bwd.tiles_computed}, {bwd.tiles_skipped}"
    print(f"{causal!s:<6} {forward_tiles:>33} {backward_tiles:>9}")
print(
    "causal   forward     backward  ratio  S again  exps again  paper / count"
)
for causal, (fwd, bwd) in costs.items():
    paper = (
        4 * T_cost**2 * d_cost / (2 if causal else 1) / 2
    )  # flops -> multiply-adds
    print(
        f"{causal!s:<6} {fwd.multiply_adds:>11,} {bwd.multiply_adds:>12,} "
        f"{bwd.multiply_adds / fwd.multiply_adds:>6.2f} "
        f"{bwd.recompute_multiply_adds / fwd.multiply_adds:>8.2f} "
        f"{bwd.exponentials:>11,} {paper / fwd.multiply_adds:>14.3f}"
    )

# %% [markdown]
# Both passes compute and skip the same tiles. In the second table: the multiply-adds of
# each pass; their ratio; the recomputation of $S$, as a fraction of the forward pass;
# the exponentials the backward pass computes again (one per weight of the computed
# tiles, as many as the forward pass computed); and the paper's estimate over the count.
# The ratio is exactly 5/2 with $d_k = d_v$: every tile costs $B_q B_k (d_k + d_v)$
# forward and $B_q B_k (3 d_k + 2 d_v)$ backward. Half a forward pass is the price of
# not storing $P$: a backward pass that kept it would cost twice the forward pass. With
# the causal mask the paper's "divide by 2" undercounts a little, because the tiles on
# the diagonal are computed whole.
#
# On a GPU the trade pays, the papers find: the recomputed backward pass moves far less
# data between the GPU's memory and its chip (FlashAttention's Theorem 5 bounds that
# traffic as its Theorem 2 bounds the forward pass's), and FlashAttention-2's section
# 2.3.2 reports it faster for that reason. On this CPU the page claims only the memory.
#
# <details class="note">
# <summary>Going deeper: dropout without storing its mask</summary>
#
# Training often applies dropout to the weights: each weight is zeroed with probability
# $p$ and the others divided by $1 - p$. The backward pass needs the same mask, and a
# stored mask is one more `(T, T)` matrix. FlashAttention stores only the state of its
# random number generator and generates the mask again in the backward pass (its
# appendix B.4). Its CUDA code draws the bits for each position from the Philox
# generator, given the seed, an offset and the position.
#
# `attn_ref.tiled.dropout_mask` does the same with a simpler function: a 32-bit integer
# hash (`lowbias32`, from Chris Wellons' hash prospector) of the seed, the batch entry,
# the query and the key. A weight is kept when the hash, as a fraction of $2^{32}$, is at
# least $p$. The mask depends on nothing else, not even the tile's shape. The cell below
# runs both passes with $p = 0.25$ and compares, tile by tile, the mask the backward
# pass regenerated with the one the forward pass used. Then it stores the whole mask, as
# plain autograd would, and checks the output and the gradients against it.
#
# </details>

# %% tags=["deeper"]
g = torch.Generator().manual_seed(5)
q_d, k_d, v_d, d_out_d = torch.randn(
    4, 2, 12, 4, generator=g, dtype=torch.float64
)
p_drop, seed = 0.25, 1234
out_d, fwd_d = tiled_attention(
    q_d,
    k_d,
    v_d,
    block_size=(4, 5),
    dropout_p=p_drop,
    dropout_seed=seed,
    trace=True,
)
*grads_d, bwd_d = flash_attention_backward(
    q_d, k_d, v_d, out_d, fwd_d.logsumexp, d_out_d,
    block_size=(4, 5), dropout_p=p_drop, dropout_seed=seed, trace=True,
)  # fmt: skip
used = {(step.rows, step.cols): step.keep for step in fwd_d.trace}
regenerated = {(step.rows, step.cols): step.keep for step in bwd_d.trace}
same_masks = used.keys() == regenerated.keys() and all(
    torch.equal(used[tile], regenerated[tile]) for tile in used
)
print(
    f"{len(used)} tiles; each regenerated mask equals the forward's:",
    same_masks,
)
stored = torch.zeros(
    2, 12, 12, dtype=torch.bool
)  # (B, L, S): the whole mask, kept
for (rows, cols), keep in used.items():
    stored[:, rows.start : rows.stop, cols.start : cols.stop] = keep
whole = dropout_mask(
    seed, (2,), range(12), range(12), p_drop
)  # one call, no tiles
print(
    "the whole mask in one call equals the tiles':", torch.equal(stored, whole)
)
print(f"weights kept: {stored.double().mean():.3f} of {stored.numel()}")
leaves_d = [t.clone().requires_grad_() for t in (q_d, k_d, v_d)]
weights_d = scaled_dot_product_attention(*leaves_d)[1]
out_stored = (weights_d * stored / (1 - p_drop)) @ leaves_d[
    2
]  # dropout, mask stored
grads_stored = torch.autograd.grad(out_stored, leaves_d, d_out_d)
print(f"largest |output difference|: {(out_d - out_stored).abs().max():.1e}")
pairs = zip(grads_d, grads_stored, strict=True)
gap_d = max((a - b).abs().max().item() for a, b in pairs)
print(f"largest |gradient difference|: {gap_d:.1e}")

# %% [markdown]
# ## What FlashAttention's own code does differently
#
# The reference implementation is
# [Dao-AILab/flash-attention](https://github.com/Dao-AILab/flash-attention). Its
# Triton version of the backward pass, `flash_attn/flash_attn_triton.py`, is the
# closest to this page's in form. It was read for this comparison, not copied.
#
# - **The same algorithm.** A first kernel, `_bwd_preprocess_do_o_dot`, computes
#   $D$ as `sum(o * do)` per query. The main kernel takes one block of keys ("k and v
#   stay in SRAM throughout") and loops over the blocks of queries, recomputing
#   `p = exp(qk * softmax_scale - lse)`, as Algorithm 2 does and as this page does.
# - **Where the scale goes.** It multiplies $dS$ by the scale once,
#   `ds = p * (dp - Di) * softmax_scale`, before both products. This page multiplies
#   the two products' results instead; the sum is the same.
# - **$dQ$.** One program either loops over all blocks of keys and reads, adds and
#   writes $dQ$ for each, or (its "sequence parallel" mode) each block of keys is its
#   own program and they add to $dQ$ with `tl.atomic_add`. Here a Python loop adds in
#   place, one tile after another.
# - **Causal tiles.** For a block of keys it starts the loop over queries at the first
#   block of queries that can see it (`begin_m`), which skips the same tiles as
#   `tiles_skipped` here. Its CUDA kernels align a causal mask to the bottom right when
#   $L \ne S$ (its README, since version 2.1); this page aligns it to the top left, as
#   PyTorch's `is_causal` does.
# - **Dtypes.** It accepts only float16 and bfloat16 ("Only support fp16 and bf16") and
#   accumulates in float32. This page takes any floating dtype and computes half
#   precision in float32.
# - **Masks.** It takes an additive bias whose last two dimensions are `(1, S)` or
#   `(L, S)`, and no boolean mask. This page takes both kinds, in any shape that
#   broadcasts, as PyTorch does.
# - **Dropout.** The Triton version "doesn't support dropout"; the CUDA version
#   regenerates its mask with Philox (`dropout.h`). This page uses the integer hash
#   above.
# - **A query that sees no key.** Its sum $\ell$ is zero, and the CUDA kernels
#   store its log-sum-exp as $+\infty$ or $-\infty$ depending on the path.
#   `normalize_softmax_lse` writes `Split ? -INFINITY : INFINITY` for such a row
#   ([`softmax.h`, line 180](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/softmax.h#L180)).
#   The ordinary forward kernel, `compute_attn_1rowblock`, calls it with `Split` false
#   ([`flash_fwd_kernel.h`, line 440](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/flash_fwd_kernel.h#L440)),
#   so it stores $+\infty$, as it does for a block of queries that sees no block of
#   keys at all ([line 132](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/flash_fwd_kernel.h#L132)).
#   The split-KV kernels divide one block of queries' keys among several thread blocks
#   (when too few blocks of queries would keep the GPU busy, as in decoding). With
#   `Split` true, each split stores its partial log-sum-exp, $-\infty$ for an empty
#   split ([line 1004](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/flash_fwd_kernel.h#L1004),
#   [line 580](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/flash_fwd_kernel.h#L580)), so that the
#   kernel that merges the splits gives it the weight $e^{-\infty} = 0$. That merge,
#   `combine_attn_seqk_parallel`, stores $+\infty$ again when every split was empty
#   ([line 1204](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/flash_fwd_kernel.h#L1204)). So
#   $-\infty$ appears only in the split-KV path's partial results; the log-sum-exp the
#   forward pass returns is $+\infty$. Here `tiled_attention` keeps $-\infty$, the true
#   value ($\log 0$), and the backward pass reads it as $+\infty$.
#
# And what this page does not do: run fast. Its loops are Python, on one CPU thread; the
# point is to follow the algorithm and check it, not to time it.
#
# ## Common pitfalls
#
# **Leaving out $D$.** The softmax's backward pass is easy to write as `dS = P * dP`,
# the chain rule through $e^{s}$ alone. It forgets that every weight of a row shares
# the denominator. Its symptom: the rows of $dS$ no longer sum to zero, although adding
# the same number to every score of a row changes nothing, and so must have a zero
# gradient. $dQ$ and $dK$ come out wrong; $dV$, which does not pass through the
# softmax, stays right. The fix is $dS = P \circ (dP - D)$.

# %%
q_p, k_p, v_p = (t.detach() for t in (q_few, k_few, v_few))
dp_few = d_out_few @ v_p.T  # (L, S)
d_few = (d_out_few * out_few.detach()).sum(dim=-1, keepdim=True)  # (L, 1)
p_few = weights_few.detach()
right = attention_backward(q_p, k_p, v_p, p_few, d_out_few)
d_term = {}  # dS as written: (largest |row sum|, error of dQ, error of dK)
for name, ds_try in (
    ("P * dP", p_few * dp_few),
    ("P * (dP - D)", p_few * (dp_few - d_few)),
):
    dq_error = (ds_try @ k_p / math.sqrt(3) - right[0]).abs().max()
    dk_error = (ds_try.T @ q_p / math.sqrt(3) - right[1]).abs().max()
    d_term[name] = (ds_try.sum(dim=-1).abs().max(), dq_error, dk_error)
    print(f"dS = {name:<13} |row sum| ≤ {d_term[name][0]:.1e};", end=" ")
    print(f"dQ off by {dq_error:.1e}, dK by {dk_error:.1e}")

# %% [markdown]
# **Multiplying by $dS$ on the wrong side.** $dK$ is $dS^\top Q$: key $j$ collects from
# every query $i$ the amount $dS_{ij}$. With $L \ne S$, `dS @ Q` fails on the shapes.
# With $L = S$, as in self-attention, it runs, returns a tensor of the right shape, and
# is wrong. Only a check against autograd or finite differences shows it.

# %%
g = torch.Generator().manual_seed(9)
q5, k5, v5, d_out5 = torch.randn(4, 5, 3, generator=g, dtype=torch.float64)
weights5 = scaled_dot_product_attention(q5, k5, v5)[1]  # L = S = 5
ds5 = weights5 * (
    d_out5 @ v5.T - (d_out5 * (weights5 @ v5)).sum(-1, keepdim=True)
)
dk_right = attention_backward(q5, k5, v5, weights5, d_out5)[1]
dk_wrong = ds5 @ q5 / math.sqrt(3)  # dS Q: the right shape, (5, 3)
print("dS Q:", tuple(dk_wrong.shape), " dSᵀ Q:", tuple(dk_right.shape))
print(
    f"largest |dS Q - dSᵀ Q| / √d_k: {(dk_wrong - dk_right).abs().max():.2f}"
)

# %% [markdown]
# **Recomputing the weights from a log-sum-exp of $-\infty$.** A query that sees no
# key has $L_i = -\infty$, and its masked scores are $-\infty$ too. Recomputed as
# $e^{S_{ij} - L_i}$, its weights are $e^{-\infty + \infty}$: `nan`. The `nan` does not
# stay in its row: $dK = dS^\top Q$ and $dV = P^\top dO$ sum over the queries, so every
# key's gradient becomes `nan`. The fix reads such an $L_i$ as $+\infty$.

# %%
g = torch.Generator().manual_seed(10)
q_n, k_n, v_n, d_out_n = torch.randn(4, 3, 2, generator=g, dtype=torch.float64)
sees = torch.tensor([[True, False, True], [False] * 3, [True] * 3])  # query 1
_, fwd_n = tiled_attention(q_n, k_n, v_n, attn_mask=sees, block_size=3)
s_n = (q_n @ k_n.T / math.sqrt(2)).masked_fill(~sees, -math.inf)
print("L:", fwd_n.logsumexp.numpy().round(4))
for name, lse_n in (
    ("as stored", fwd_n.logsumexp),
    (
        "-inf read as +inf",
        fwd_n.logsumexp.masked_fill(fwd_n.logsumexp == -math.inf, math.inf),
    ),
):
    p_n = (s_n - lse_n[:, None]).exp()  # (L, S): the weights, recomputed
    dv_n = p_n.T @ d_out_n
    print(f"{name:<17}: query 1's weights {p_n[1].tolist()},", end=" ")
    print(f"nan in dV: {int(dv_n.isnan().sum())}")

# %% [markdown]
# ## Summary
#
# - The softmax's Jacobian is $\operatorname{diag}(p) - p p^\top$. Its product with
#   $dp$ is $p \circ (dp - p^\top dp)$, one dot product per row.
# - Attention's gradients are $dV = P^\top dO$, $dP = dO \, V^\top$,
#   $dS = P \circ (dP - D)$, $dQ = \text{scale} \cdot dS \, K$,
#   $dK = \text{scale} \cdot dS^\top Q$, with $D = \operatorname{rowsum}(dO \circ O)$.
#   Written by hand, they pass `gradcheck` and equal PyTorch's, masks, causal attention,
#   $L \ne S$ and queries that see no key included.
# - Differentiated by autograd, attention keeps `(T, T)` matrices for the backward
#   pass, and its peak memory grows like $T^2$.
# - FlashAttention keeps the output and one log-sum-exp per query, recomputes each tile
#   of $P$ in the backward pass, and skips the causal tiles in both passes. Its memory
#   grows like $T$, and its gradients equal PyTorch's to rounding. The price is a fifth
#   matrix product per tile: the backward pass costs 2.5 forward passes instead of 2.

# %% [markdown]
# ## Exercises
#
# **1. $D$ from the Jacobian.** Start from $ds = (\operatorname{diag}(p) - p p^\top)\,dp$
# for one row, and show that the subtracted number $p^\top dp$ equals $do \cdot o$, the
# dot product of that query's output gradient and output. Check it on random data: for
# each query, compute both.

# %% tags=["solution"]
g = torch.Generator().manual_seed(6)
q1, d_out1 = torch.randn(
    2, 3, 5, generator=g, dtype=torch.float64
)  # 3 queries
k1, v1 = torch.randn(2, 7, 5, generator=g, dtype=torch.float64)  # 7 keys
out1, P1 = scaled_dot_product_attention(q1, k1, v1)
d_p1 = d_out1 @ v1.T  # dP_ij = do_i · v_j
print("pᵀ dp per query:", (P1 * d_p1).sum(dim=-1))
print("do · o per query:", (d_out1 * out1).sum(dim=-1))
# p_i^T dp_i = sum_j P_ij (do_i · v_j) = do_i · (sum_j P_ij v_j) = do_i · o_i:
# the weighted sum of the values is the output. Only d_v numbers per query are
# needed, not a row of S weights.

# %% [markdown]
# **2. Which tiles a causal backward can skip.** The backward pass loops over blocks of
# keys outside and blocks of queries inside. For $L = S = 1000$ in tiles of 64 queries
# by 128 keys, which tiles can it skip? Count them with a formula, then check against
# `tiles_skipped` of both passes.

# %% tags=["solution"]
L2, S2, bq, bk = 1000, 1000, 64, 128
# A tile is skipped when its first key comes after its last query. Block of
# keys j starts at j * bk; block of queries i ends at min(i * bq + bq, L2) - 1.
formula = sum(
    1
    for j in range(math.ceil(S2 / bk))
    for i in range(math.ceil(L2 / bq))
    if j * bk > min(i * bq + bq, L2) - 1
)
x2 = torch.zeros(1, L2, 1)  # (B, T, d): only the tiles matter
options2 = {"is_causal": True, "block_size": (bq, bk)}
out2, fwd2 = tiled_attention(x2, x2, x2, **options2)
*_, bwd2 = flash_attention_backward(
    x2, x2, x2, out2, fwd2.logsumexp, x2, **options2
)
print("formula:", formula)
print("skipped: forward", fwd2.tiles_skipped, " backward", bwd2.tiles_skipped)

# %% [markdown]
# **3. The log-sum-exp in float16.** FlashAttention keeps $L$ in float32 (its Triton
# code allocates `lse` as `torch.float32`, even for float16 inputs). What goes wrong in
# float16? Run `flash_attention_backward` with the log-sum-exp rounded to float16 and
# back, for scores multiplied by 1, 8 and 64, and compare the gradient $dV$ with the one
# from the exact $L$. Why does the error grow with the scores?

# %% tags=["solution"]
g = torch.Generator().manual_seed(7)
q3, k3, v3, d_out3 = (torch.randn(32, 16, generator=g) for _ in range(4))
errors3, lse_by_factor = {}, {}
for factor in (1, 8, 64):
    out3, fwd3 = tiled_attention(q3 * factor, k3, v3, block_size=8)
    lse32 = fwd3.logsumexp
    lse16 = lse32.half().float()
    lse_by_factor[factor] = (lse32, lse16)
    inputs3 = (q3 * factor, k3, v3, out3)
    exact = flash_attention_backward(*inputs3, lse32, d_out3, block_size=8)
    rounded = flash_attention_backward(*inputs3, lse16, d_out3, block_size=8)
    errors3[factor] = (rounded[2] - exact[2]).abs().max().item()
    worst = (lse32 - lse16).abs().max().item()
    largest = lse32.abs().max()
    print(
        f"x{factor:<3} largest |L| {largest:7.2f},",
        f"rounded by up to {worst:.4f}:",
    )
    off = math.expm1(worst)  # exp(error) - 1: how far a weight can move
    print(f"     weights off by up to {off:.2%}, dV by {errors3[factor]:.0e}")
# Each weight is recomputed as exp(S - L). An error e in L multiplies a whole
# row of weights by exp(-e), so they no longer sum to one. float16 keeps 11
# significant bits: its rounding error grows with |L|, and |L| grows with the
# scores. Beyond 65504, L would become inf and every weight 0.

# %% [markdown]
# **4. Grouped-query attention.** FlashAttention-2 (section 3.1.2) computes grouped-query
# attention without copying the key and value heads, and notes that the gradients $dK$
# and $dV$ must then be summed over the query heads that share a key/value head. Check
# it with 4 query heads and 2 key/value heads: run `flash_attention_backward` on the
# repeated heads (`repeat_kv_heads`), sum its per-head $dK$ and $dV$ over each group,
# and compare with the gradients of PyTorch's `scaled_dot_product_attention` with
# `enable_gqa=True`.

# %% tags=["solution"]
g = torch.Generator().manual_seed(8)
q4, d_out4 = torch.randn(
    2, 1, 4, 10, 8, generator=g, dtype=torch.float64
)  # H = 4
k4, v4 = torch.randn(
    2, 1, 2, 10, 8, generator=g, dtype=torch.float64
)  # H_kv = 2
k_rep, v_rep = repeat_kv_heads(k4, 4), repeat_kv_heads(v4, 4)  # (B, 4, T, d)
out4, fwd4 = tiled_attention(q4, k_rep, v_rep, is_causal=True, block_size=4)
_, dk_heads, dv_heads, _ = flash_attention_backward(
    q4,
    k_rep,
    v_rep,
    out4,
    fwd4.logsumexp,
    d_out4,
    is_causal=True,
    block_size=4,
)  # per query head: (B, 4, T, d)
# query heads 0 and 1 read key/value head 0; heads 2 and 3 read head 1
dk_summed = dk_heads.reshape(1, 2, 2, 10, 8).sum(
    dim=2
)  # (B, H_kv, 2, T, d) -> sum
dv_summed = dv_heads.reshape(1, 2, 2, 10, 8).sum(dim=2)
leaves4 = [t.clone().requires_grad_() for t in (q4, k4, v4)]
out_gqa = F.scaled_dot_product_attention(
    *leaves4, is_causal=True, enable_gqa=True
)
_, dk_torch, dv_torch = torch.autograd.grad((out_gqa * d_out4).sum(), leaves4)
for name, summed, torchs in (
    ("dK", dk_summed, dk_torch),
    ("dV", dv_summed, dv_torch),
):
    gap = (summed - torchs).abs().max()
    print(
        f"{name} {tuple(summed.shape)}: largest |summed - PyTorch's| {gap:.1e}"
    )

# %% [markdown]
# ## References
#
# - Tri Dao. [FlashAttention-2: Faster Attention with Better Parallelism and Work
#   Partitioning](https://arxiv.org/abs/2307.08691). 2023. The gradients of standard
#   attention (section 2.2), the log-sum-exp kept instead of $m$ and $\ell$ (section
#   3.1.1), the backward pass (section 3.1.2, Algorithm 2) and its summed gradients for
#   grouped-query attention, atomic additions to $dQ$ (section 3.2), and the count of
#   2 and 5 matrix products (section 4.1).
# - Tri Dao, Daniel Y. Fu, Stefano Ermon, Atri Rudra, Christopher Ré.
#   [FlashAttention: Fast and Memory-Efficient Exact Attention with
#   IO-Awareness](https://arxiv.org/abs/2205.14135). NeurIPS 2022. The derivation of
#   $D_i = do_i^\top o_i$ (appendix B.2), the standard backward pass (Algorithm 3), the
#   dropout mask regenerated from the generator's state and the backward pass with
#   scale, mask and dropout (appendix B.4, Algorithm 4), and its memory traffic
#   (Theorem 5).
# - [Dao-AILab/flash-attention](https://github.com/Dao-AILab/flash-attention), read at
#   commit `0251105`:
#   [`flash_attn/flash_attn_triton.py`](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/flash_attn/flash_attn_triton.py)
#   (the Triton backward pass compared above),
#   [`csrc/flash_attn/src/softmax.h`](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/softmax.h#L180)
#   (`normalize_softmax_lse`: `Split ? -INFINITY : INFINITY` for a row with no key) and
#   [`csrc/flash_attn/src/flash_fwd_kernel.h`](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/flash_fwd_kernel.h)
#   (which kernels pass `Split`, and the merge of the splits),
#   [`csrc/flash_attn/src/dropout.h`](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/dropout.h)
#   (the mask from Philox), and the
#   [README](https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/README.md)
#   (causal alignment since version 2.1).
# - Chris Wellons. [hash-prospector](https://github.com/skeeto/hash-prospector): the
#   `lowbias32` integer hash, and [Prospecting for Hash
#   Functions](https://nullprogram.com/blog/2018/07/31/).
# - PyTorch: [`torch.autograd.gradcheck`](https://docs.pytorch.org/docs/stable/generated/torch.autograd.gradcheck.gradcheck.html),
#   [`torch.autograd.Function`](https://docs.pytorch.org/docs/stable/autograd.html#function),
#   [hooks for saved tensors](https://docs.pytorch.org/tutorials/intermediate/autograd_saved_tensors_hooks_tutorial.html),
#   and [`scaled_dot_product_attention`](https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html)
#   (`dropout_p`, `is_causal`).
#
# Next: [Generating text with a KV cache](kv_cache.md) runs attention forward again,
# one token at a time, and keeps the keys and values it has computed.

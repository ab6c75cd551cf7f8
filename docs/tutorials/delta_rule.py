# %% [markdown]
# # A state that corrects itself: the delta rule and hybrids
#
# [Fewer bytes per token](cache_compression.md) ended on a trade. Linear attention keeps
# a state of fixed size, and a one-layer model that uses it recalls fewer key–value
# pairs as the pairs grow: every pair is *added* to the same matrix, so pairs blur into
# each other. This page builds the answer that today's hybrid models use.
#
# - **The delta rule** reads what the state already returns for a key, and writes only
#   the difference (Schlag et al., 2021; DeltaNet, Yang et al., 2024).
# - **Gated DeltaNet** also lets the state fade a little at every token (Yang, Kautz and
#   Hatamizadeh, 2025).
# - Both run **one token at a time**, to generate, or **a chunk at a time**, to train.
#   The page checks that the two forms agree and counts their work.
# - Then the recall task again, and a **hybrid** with one softmax layer in four, the
#   ratio of Qwen3-Next and Kimi Linear.
#
# It assumes the cache page (linear attention, its state, the recall task) and
# [Attention without the T×T matrix](efficient_attention.md). Tokens are row vectors, as
# in the [notation table](../notation.md), so the state is a $d_k \times d_v$ matrix $S$,
# read as $q S$; the papers write its transpose.
#
# The picture: four keys that do not overlap, each stored with a value of two numbers
# (row $i$ of $S$ is what key $i$ reads). Then key 0 comes again, with the value
# $(10, 20)$. Linear attention adds it to what row 0 held; the delta rule replaces it.

# %% tags=["plot"]
import torch

from attn_ref.compression import delta_rule_recurrent
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.plotting import figure_to_svg

keys = torch.eye(4, dtype=torch.float64)  # four orthogonal unit keys
values = torch.tensor([[1.0, 2], [3, 4], [5, 6], [7, 8]], dtype=torch.float64)
k0, v0 = keys[:1], torch.tensor([[10.0, 20.0]], dtype=torch.float64)
ones = torch.ones(4, dtype=torch.float64)
S = delta_rule_recurrent(keys, keys, values, ones)[1].state  # (d_k, d_v)
rows = {
    "linear attention adds": ("k₀ᵀv", k0.T @ v0),
    "the delta rule corrects": ("−k₀ᵀ(k₀S − v)", -k0.T @ (k0 @ S - v0)),
}
fig, ax = canvas(10.5, 13.2, scale=0.42)
for top, (title, (name, write)) in zip((1.4, 7.9), rows.items(), strict=True):
    note(ax, 0.2, top - 1.1, title, ha="left", fontsize=12)
    y = top + 0.6
    grid(ax, S, 0.6, y, decimals=0, vmax=22, label="S")
    new = grid(ax, write, 4.3, y, decimals=0, vmax=22, label=name)
    out = grid(ax, S + write, 8.0, y, decimals=0, vmax=22, label="new S")
    note(ax, 3.45, y + 2.0, "+", fontsize=14)
    arrow(ax, new.right, out.left)
figure_to_svg(
    fig,
    alt="Two rows of three 4 by 2 matrices, blue below zero and red above. "
    "Top, linear attention: the state S with rows (1, 2), (3, 4), (5, 6), "
    "(7, 8); the write of key 0 with the value (10, 20); their sum, whose "
    "row 0 is (11, 22). Bottom, the delta rule: the same state; a write of "
    "(9, 18) in row 0; a new state whose row 0 is (10, 20), the new value. "
    "Rows 1 to 3 keep their values in both.",
)

# %% [markdown]
# Both writes touch row 0 only, because key 0 shares no direction with the other keys.
# Linear attention's row 0 now returns the sum of both values; the delta rule's returns
# the new one, as a dictionary would.
#
# ## Read, correct, write
#
# Linear attention adds $k_t^\top v_t$ to its state. The delta rule first reads what the
# state returns for $k_t$, which is $k_t S_{t-1}$, and moves it toward $v_t$ by a step
# $\beta_t \in (0, 1)$:
#
# $$
# \begin{aligned}
# S_t &= S_{t-1} - \beta_t \, k_t^\top \bigl(k_t S_{t-1} - v_t\bigr) \\
# o_t &= q_t S_t
# \end{aligned}
# $$
#
# $k_t^\top(k_t S - v_t)$ is the gradient, with respect to $S$, of the error
# $\tfrac12 \lVert k_t S - v_t \rVert^2$. So each token takes one step of gradient
# descent on "return $v_t$ for $k_t$": the delta rule of Widrow and Hoff, which Schlag et
# al. (2021) brought into linear attention. DeltaNet's papers write the same rule with
# the state transposed, $S_t = S_{t-1} - \beta_t (S_{t-1} k_t - v_t) k_t^\top$.
#
# `delta_rule_recurrent` runs it one token at a time. Here it writes the picture's five
# pairs, with $\beta = 1$ and then $\beta = 0.5$.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np
from torch.utils.flop_counter import FlopCounterMode

from attn_ref.compression import (
    AssociativeRecall,
    DeltaRecall,
    DeltaRuleState,
    RecallStack,
    delta_rule_chunked,
    delta_rule_multiply_adds,
    recall_accuracy,
    recall_batch,
    train_recall,
)

torch.set_num_threads(1)  # one thread: results that do not depend on the cores

# %%
k5, v5 = torch.cat([keys, k0]), torch.cat([values, v0])  # (T, d_k), (T, d_v)
for b in (1.0, 0.5):
    beta = torch.full((5,), b, dtype=torch.float64)
    _, first = delta_rule_recurrent(k5[:4], k5[:4], v5[:4], beta[:4])
    _, state = delta_rule_recurrent(k5, k5, v5, beta)
    print(
        f"beta = {b}: row 0 after the first write {first.state[0].tolist()},"
    )
    print(f"            after the second {state.state[0].tolist()}")
print("linear attention's row 0 =", (k5.T @ v5)[0].tolist())

# %% [markdown]
# With $\beta = 1$ row 0 becomes the new value. With $\beta = 0.5$ every write goes
# halfway: the first write of key 0 left row 0 at half of its value, and the second moves
# it halfway from there toward the new value, which is why it does not end halfway
# between the picture's two values. The second write leaves rows 1 to 3 alone: the new
# key is orthogonal to theirs.
#
# ## Why the keys have unit length
#
# Rewritten, the update is $S_t = (I - \beta_t k_t^\top k_t) S_{t-1} + \beta_t k_t^\top v_t$.
# The matrix $I - \beta_t k_t^\top k_t$ leaves every direction orthogonal to $k_t$ alone
# and multiplies the direction of $k_t$ by $1 - \beta_t \lVert k_t \rVert^2$. With unit
# keys that factor lies in $[0, 1]$: the old content shrinks, never grows. With longer
# keys it can fall below $-1$, and the state then grows at every token that repeats a
# direction. DeltaNet therefore gives its keys (and queries) unit length. The cell
# writes 64 random tokens of width 16 both ways, with $\beta = 0.5$.

# %%
g = torch.Generator().manual_seed(4)
raw = torch.randn(1, 64, 16, generator=g, dtype=torch.float64)  # (B, T, d_k)
vals = torch.randn(1, 64, 16, generator=g, dtype=torch.float64)  # (B, T, d_v)
half = torch.full((1, 64), 0.5, dtype=torch.float64)
unit = raw / raw.norm(dim=-1, keepdim=True)
norms = {}
for name, k in (("unit keys", unit), ("raw keys", raw)):
    _, state = delta_rule_recurrent(k, k, vals, half)
    norms[name] = state.state.norm().item()
    print(f"{name:>9}: |S| after 64 tokens = {norms[name]:.3g}")
print(f"largest |k|^2 of the raw keys: {(raw**2).sum(-1).max():.1f}")

# %% [markdown]
# The raw keys' squared lengths are 16 on average, so $1 - 0.5 \lVert k \rVert^2$ is
# about $-7$: the state explodes. With unit keys it stays the size of the values.
#
# <details class="note">
# <summary>Going deeper: letting β reach 2</summary>
#
# With unit keys the factor $1 - \beta_t$ lies in $[-1, 1]$ for any $\beta_t \in [0, 2]$,
# so the state stays bounded. A $\beta_t > 1$ gives the transition a *negative*
# eigenvalue, which lets a layer flip the sign of what a key stores. Grazzi et al. (ICLR
# 2025) proved that linear recurrences in finite precision whose transitions have only
# positive eigenvalues cannot solve parity, the simplest task that tracks a state, and
# showed in experiments that DeltaNet and Mamba solve it once the range is widened to
# $[-1, 1]$. flash-linear-attention exposes this as `allow_neg_eigval`, which doubles the
# sigmoid's $\beta$. This page keeps $\beta \in (0, 1)$, the setting of both DeltaNet
# papers' main models.
#
# </details>
#
# ## A decay: Gated DeltaNet
#
# The delta rule corrects one key at a time; it never clears what no new key
# overwrites. Gated DeltaNet multiplies the state by a decay $\alpha_t \in (0, 1]$ first:
#
# $$
# S_t = \alpha_t \bigl(I - \beta_t k_t^\top k_t\bigr) S_{t-1} + \beta_t k_t^\top v_t
# $$
#
# A model can then forget everything quickly (a small $\alpha_t$, at a topic change, say)
# and still rewrite one key exactly (the delta rule). Both functions here take the gate as
# $\log \alpha_t \le 0$ (`log_alpha`), as the reference implementations do: a product of
# many decays becomes a sum of logarithms, which neither underflows nor needs a division.
# The decay comes *before* the error is read: $u_t = \beta_t (v_t - k_t\, \alpha_t S_{t-1})$.
# That is the order of the paper's formula; a common pitfall below measures the other one.
#
# ## The chunked form
#
# The recurrence takes $T$ dependent steps, each a product of vectors. Training on long
# texts wants matrix products instead. Take a chunk of $C$ tokens that starts from the
# state $S_0$. Write $\gamma_r = \alpha_1 \cdots \alpha_r$ for the decay since the chunk
# began, and $\Gamma_{ri} = \gamma_r / \gamma_i$ for $i \le r$ (0 above the diagonal).
# Unrolling the recurrence gives the state after token $r$ of the chunk as
# $S_r = \gamma_r S_0 + \sum_{i \le r} \Gamma_{ri} \, k_i^\top u_i$, with corrected values
#
# $$
# \begin{aligned}
# u_i = \beta_i v_i &- \beta_i \gamma_i \, k_i S_0 \\
# &- \beta_i \textstyle\sum_{j < i} \Gamma_{ij} \, (k_i \cdot k_j) \, u_j
# \end{aligned}
# $$
#
# Each $u_i$ depends on earlier ones only, so the whole chunk is one lower-triangular
# system, solved at once:
#
# $$
# \begin{aligned}
# (I + A)\, U &= \operatorname{diag}(\beta) V - \operatorname{diag}(\beta\gamma) K S_0 \\
# A &= \operatorname{tril}_{-1}\bigl(\operatorname{diag}(\beta)(K K^\top \odot \Gamma)\bigr)
# \end{aligned}
# $$
#
# Its solution is $U = \tilde U - \tilde W S_0$, with
# $\tilde U = (I + A)^{-1} \operatorname{diag}(\beta) V$ and
# $\tilde W = (I + A)^{-1} \operatorname{diag}(\beta\gamma) K$; computing them through
# $(I + A)^{-1}$ is what the Gated DeltaNet paper calls the *UT transform*. Then the
# outputs and the state at the chunk's end are matrix products:
#
# $$
# \begin{aligned}
# O &= \operatorname{diag}(\gamma) \, Q S_0 + (Q K^\top \odot \Gamma) \, U \\
# S_C &= \gamma_C S_0 + \bigl(\operatorname{diag}(\gamma_C / \gamma) K\bigr)^\top U
# \end{aligned}
# $$
#
# Why $\tilde W$? Without a decay the last line reads
# $S_C = (I - K^\top \tilde W) S_0 + K^\top \tilde U$. The chunk's transitions multiply
# into one matrix,
#
# $$
# \begin{aligned}
# &(I - \beta_C k_C^\top k_C) \cdots (I - \beta_1 k_1^\top k_1) \\
# &\qquad = I - K^\top \tilde W ,
# \end{aligned}
# $$
#
# the identity minus a term of rank at most $C$: the *WY representation* of a product of
# Householder-like matrices, which DeltaNet's paper takes from numerical linear algebra.
# With it a chunk applies all its transitions to $S_0$ through $C \times d_k$ blocks,
# and never builds a $d_k \times d_k$ matrix per token. The check below multiplies the
# five transitions of the chunk pictured next and compares.

# %% tags=["check"]
g = torch.Generator().manual_seed(1)
k_c = torch.randn(5, 4, generator=g, dtype=torch.float64)
k_c = k_c / k_c.norm(dim=-1, keepdim=True)  # (C, d_k): unit keys
beta_c = torch.full((5,), 0.5, dtype=torch.float64)
product = torch.eye(4, dtype=torch.float64)
for k_i, b_i in zip(k_c, beta_c, strict=True):  # token 1 first, on the right
    product = (
        torch.eye(4, dtype=torch.float64) - b_i * torch.outer(k_i, k_i)
    ) @ product
A_c = ((beta_c[:, None] * k_c) @ k_c.T).tril(-1)  # no decay: Gamma = 1
W_c = torch.linalg.solve_triangular(
    torch.eye(5, dtype=torch.float64) + A_c, beta_c[:, None] * k_c,
    upper=False, unitriangular=True,
)  # fmt: skip
wy_gap = (
    (product - (torch.eye(4, dtype=torch.float64) - k_c.T @ W_c)).abs().max()
)
print(f"largest |product of the transitions - (I - K^T W)|: {wy_gap:.1e}")

# %% [markdown]
# The picture shows one chunk of five tokens with a decay of 0.9 per token: the mask
# $\Gamma$ that weighs token $i$'s contribution to token $r$, and the system $I + A$.

# %% tags=["plot"]
log_gamma = torch.full((5,), math.log(0.9), dtype=torch.float64).cumsum(0)
below = torch.ones(5, 5, dtype=torch.bool).tril()
Gamma = (
    log_gamma[:, None] - log_gamma[None, :]
)  # (C, C): log gamma_r / gamma_i
Gamma = Gamma.masked_fill(~below, -math.inf).exp()  # 0 above the diagonal
system_c = torch.eye(5, dtype=torch.float64) + (
    (beta_c[:, None] * k_c) @ k_c.T * Gamma
).tril(-1)
fig, ax = canvas(11.6, 7.0, scale=0.38)
grid(
    ax, Gamma, 0.3, 1.0, decimals=2, vmax=1, mask=below, label="Γ"
)  # hatched: 0
grid(ax, system_c, 6.3, 1.0, decimals=2, vmax=1, mask=below, label="I + A")
for x in (2.8, 8.8):
    note(ax, x, 6.6, "row r, column i")
figure_to_svg(
    fig,
    alt="Two 5 by 5 matrices for a chunk of five tokens, hatched above "
    "the diagonal. Left, the decay mask Gamma: 1 on the diagonal, 0.9 just "
    "below it, 0.81 below that, and so on. Right, the system I + A: ones on "
    "the diagonal and small entries of either sign below it.",
)

# %% [markdown]
# Everything but one triangular solve is a product of $C \times d$ blocks, and only the
# state passes from chunk to chunk. `delta_rule_chunked` does this. The first cell runs
# both forms on 256 tokens of 2 sequences and 4 heads, in chunks of 64. The folded cell
# after it compares them, gated and not, in float64 and float32: the outputs, the final
# states, and the gradients of every input (of a random weighted sum of the outputs).


# %%
def draw(dtype, gated, seed=0):
    """(q, k, v, beta[, log_alpha]) for (B, H, T, d) = (2, 4, 256, 32)."""
    g = torch.Generator().manual_seed(seed)
    shape = (2, 4, 256, 32)  # (B, H, T, d_k)
    q, k, v = torch.randn(3, *shape, generator=g, dtype=torch.float64)
    k = k / k.norm(dim=-1, keepdim=True)
    beta = torch.rand(shape[:3], generator=g, dtype=torch.float64)
    log_alpha = -0.1 * torch.rand(shape[:3], generator=g, dtype=torch.float64)
    tensors = [q, k, v, beta] + ([log_alpha] if gated else [])
    return [x.to(dtype).requires_grad_() for x in tensors]


q, k, v, beta, log_alpha = draw(torch.float32, gated=True)
slow, slow_state = delta_rule_recurrent(q, k, v, beta, log_alpha)
fast, fast_state = delta_rule_chunked(q, k, v, beta, log_alpha, chunk_size=64)
gap = (fast - slow).abs().max()
print(f"float32, gated: largest |chunked - recurrent| {gap:.1e}")

# %% tags=["plot"]
gaps, sizes = {}, {}  # (dtype, gated) -> differences; largest output, gradient
for dtype in (torch.float64, torch.float32):
    for gated in (False, True):
        slow_in, fast_in = draw(dtype, gated), draw(dtype, gated)
        slow, s1 = delta_rule_recurrent(*slow_in)
        fast, s2 = delta_rule_chunked(*fast_in, chunk_size=64)
        w = torch.randn(slow.shape, generator=torch.Generator().manual_seed(1))
        (slow * w.to(dtype)).sum().backward()
        (fast * w.to(dtype)).sum().backward()
        pairs = list(zip(slow_in, fast_in, strict=True))
        grad = max((a.grad - b.grad).abs().max().item() for a, b in pairs)
        out, st = (slow - fast).abs().max(), (s1.state - s2.state).abs().max()
        gaps[dtype, gated] = (out.item(), st.item(), grad)
        sizes[dtype, gated] = (
            slow.abs().max().item(),
            max(a.grad.abs().max().item() for a in slow_in),
        )
print("largest |chunked - recurrent|")
print("            gated    output     state  gradients")
for (dtype, gated), (o, s, gr) in gaps.items():
    print(f"{str(dtype)[6:]:>9} {gated!s:>7} {o:9.1e} {s:9.1e} {gr:10.1e}")
largest = max(s[0] for s in sizes.values())
print(f"largest |output| {largest:.1f}, largest |gradient|", end=" ")
print(f"{max(s[1] for s in sizes.values()):.1f}")
print(f"float32 gap / float64 gap, in units of 2**29 = {2**29:.1e}:")
for gated in (False, True):
    single, double = gaps[torch.float32, gated], gaps[torch.float64, gated]
    o, s, gr = (a / b / 2**29 for a, b in zip(single, double, strict=True))
    print(f"{gated!s:>17} {o:9.2f} {s:9.2f} {gr:10.2f}")

# %% [markdown]
# The two forms agree to the rounding of each precision. In float64 every gap is below
# $10^{-12}$, where outputs and gradients reach the sizes printed; the gradients' gaps
# are the largest, as the gradients are. In float32 each gap is larger by about the
# ratio of the two precisions' roundings, $2^{-24} / 2^{-53} = 2^{29} \approx 5 \times
# 10^8$: the last rows print each ratio over $2^{29}$, all within a factor of ten of 1.
# The test suite checks the two forms again on random shapes, chunk sizes and gates,
# against the papers' recurrence written out in NumPy, and the gradients against finite
# differences.
#
# <details class="note">
# <summary>Going deeper: what this code does differently from the references</summary>
#
# The reference implementations read for this page (flash-linear-attention's `naive.py`
# files, attention-gym's `linear/gdn/impl/reference.py`, and the eager path of Qwen3-Next
# in transformers) compute the same chunked form. They differ here in small ways:
#
# - **The solve.** They invert $I + A$ row by row, by forward substitution in a loop;
#   `delta_rule_chunked` calls `torch.linalg.solve_triangular` once, on $V$ and $K$
#   side by side.
# - **No padding.** They pad $T$ to a multiple of the chunk (fla's ungated reference
#   asserts it); here the last chunk may be shorter.
# - **No normalization or scale inside.** fla, attention-gym and transformers scale the
#   queries by $d_k^{-1/2}$ by default, and transformers normalizes $q$ and $k$ inside;
#   here `scale` is 1, as in the papers' $o_t = S_t q_t$, and the layer normalizes.
# - **Rows.** The state is `(d_k, d_v)`, read as $q S$ (fla and attention-gym also store
#   it that way; the papers write its transpose).
# - **The gate is checked.** A `log_alpha` above 0 or not finite is refused by name: an
#   $\alpha = 0$ would give $-\infty - (-\infty)$ in the chunked form.
# - **Precision.** Inputs keep their dtype, so the tests can run in float64; the
#   references compute half precision in float32.
#
# Sebastian Raschka's from-scratch Gated DeltaNet (LLMs-from-scratch, `ch04/08_deltanet`)
# has the recurrent form only, and a $\beta$ per value channel where the papers have one
# per head and token.
#
# </details>
#
# ## The work
#
# Per token, the recurrence makes three products of $d_k \times d_v$ multiply-adds: the
# read $k_t S$, the write $k_t^\top u_t$ and the output $q_t S$. The chunked form makes,
# per chunk, $K K^\top$ and $Q K^\top$, three products of $C \times d_k \times d_v$ and
# one of $C \times C \times d_v$, and the triangular solve. `delta_rule_multiply_adds`
# counts both. The cell prints them per token at $d_k = d_v = 128$, chunks of 64 and
# 4,096 tokens, beside linear attention's recurrence and causal softmax attention, and
# checks the count of the products against PyTorch's own FLOP counter.

# %%
T_n, d = 4096, 128
per_token = {
    "linear attention, recurrent": 2 * d * d,  # S += k^T v; o = q S
    "delta rule, recurrent": delta_rule_multiply_adds(T_n, d, d)["total"],
    "delta rule, chunks of 64": delta_rule_multiply_adds(T_n, d, d, 64)[
        "total"
    ],
    "causal softmax, mean": sum((t + 1) * 2 * d for t in range(T_n)),
}
for name in list(per_token)[1:]:
    per_token[name] /= T_n  # totals over T_n tokens -> per token
for name, count in per_token.items():
    print(f"{name:<28} {count:>9,.0f} multiply-adds per token")
q, k, v, beta = (x.detach() for x in draw(torch.float64, False)[:4])
with FlopCounterMode(display=False) as counter:
    delta_rule_chunked(q, k, v, beta, chunk_size=16)
products = delta_rule_multiply_adds(256, 32, 32, 16)["products"]
print("FLOP counter agrees:", counter.get_total_flops() == 2 * 8 * products)

# %% [markdown]
# The chunked form does *more* arithmetic than the recurrence, not less: the price of
# turning $T$ dependent steps into $T / C$ steps of matrix products, which a GPU runs
# far faster per operation than a long chain of small products. DeltaNet's paper says
# it in its first lines: the algorithms then known for such models "do not parallelize
# over sequence length and are thus inefficient to train on modern hardware". Both
# forms stay far below softmax attention at this length, and neither grows with $T$.
#
# On a CPU the chunked form is faster too, for a plainer reason: in eager PyTorch every
# call pays a fixed cost before any arithmetic, and the recurrence makes a few small
# calls for each of the 256 tokens where the chunked form makes them once per chunk.
# One run on the machine that built this page, forward and backward:

# %% tags=["measured"]
timing = {}
forms = {"recurrent": delta_rule_recurrent, "chunked": delta_rule_chunked}
for name, run in forms.items():
    tensors = draw(torch.float32, True, seed=2)
    start = time.process_time()
    out, _ = run(*tensors)
    out.sum().backward()
    timing[name] = time.process_time() - start
print("CPU time, forward and backward, 256 tokens in chunks of 64:")
print(", ".join(f"{name}: {s:.2f} s" for name, s in timing.items()))

# %% [markdown]
# ## What it buys: recall
#
# The cache page's task again: a context of 1 to 64 key–value pairs, keys drawn from 64
# without repeats, and 8 queries. `train_recall` and `recall_accuracy` do what the cache
# page's `train` and `accuracy` cells did: every model trained from one seed starts from
# the same weights and sees the same batches, and every model answers the same 512 fresh
# contexts at each number of pairs. One thing differs: each step's number of pairs is
# drawn once for all the models that train together, so that the three seeds of a kind
# train at once, as one batched model (`torch.func.vmap`), in fewer and larger
# operations than one after another. `DeltaRecall` is the cache page's
# `AssociativeRecall` whose pairs are written into its $16 \times 32$ state by the delta
# rule, as DeltaNet's layer does it: keys and queries through a SiLU and then to unit
# length, a sigmoid $\beta$ per pair, for Gated DeltaNet a decay per pair, and an
# RMSNorm on what a query reads.
#
# One change: 300 steps of Adam instead of the cache page's 150, for every kind. The
# delta-rule models start on a plateau, where their loss stays near $\ln 64$ (a uniform
# guess) for a while before it falls; at 150 steps a model can still be on it, and then
# it measures how long the plateau lasted, not what the state can hold. The loss curves
# below show where each left it. Each kind trains from three seeds.

# %%
PAIRS, SEEDS, STEPS = (1, 2, 4, 8, 16, 32, 64), (0, 1, 2), 300
ONE_LAYER = {
    "softmax": lambda: AssociativeRecall(64, 64, 32, 16, attention="softmax"),
    "linear": lambda: AssociativeRecall(64, 64, 32, 16, attention="linear"),
    "DeltaNet": lambda: DeltaRecall(64, 64, 32, 16, attention="delta"),
    "Gated DeltaNet": lambda: DeltaRecall(64, 64, 32, 16, "gated_delta"),
}
models, losses, seconds = {}, {}, {}


def train(kind, build):
    """Train `build()` from every seed at once; keep the models and losses."""
    start = time.process_time()
    built = []
    for seed in SEEDS:
        torch.manual_seed(seed)  # the same starting weights for every kind
        built.append(build())
    histories = train_recall(built, SEEDS, STEPS)
    for seed, model, history in zip(SEEDS, built, histories, strict=True):
        models[kind, seed], losses[kind, seed] = model, history
    seconds[kind] = time.process_time() - start


for kind, build in ONE_LAYER.items():
    train(kind, build)

# %% tags=["plot"]
recall = {  # kind -> (seeds, pairs) accuracies
    kind: np.array([[recall_accuracy(models[kind, s], n) for n in PAIRS]
                    for s in SEEDS])
    for kind in ONE_LAYER
}  # fmt: skip
print(f"{'pairs':>17}" + "".join(f"{n:>6}" for n in PAIRS) + "  kept")
for kind in ONE_LAYER:
    kept = models[kind, 0].cache_numbers(64)
    for seed, row in zip(SEEDS, recall[kind], strict=True):
        cells = "".join(f"{a:>6.3f}" for a in row)
        print(f"{kind:>14} s{seed}{cells}  {kept if seed == 0 else '':>5}")

# %% [markdown]
# The last column is the numbers each model keeps to answer after 64 pairs: softmax
# keeps every pair's key and value (16 + 32 numbers a pair); linear attention its
# $16 \times 32$ state and a normalizer of 16; the delta rule its state alone.
#
# Softmax recalls nearly every pair at every count. The three models with a state of
# fixed size all fall as the pairs grow: no way of writing makes 512 numbers hold 64
# arbitrary pairs of 32-wide values. But the delta rule falls more slowly. From 8 pairs
# on, each DeltaNet and each Gated DeltaNet model recalls more than every linear-attention
# model, on every seed; the margin is printed below. With a handful of pairs all of them
# are near 1, and at 64 every one-layer model with a state is below one half. The page
# makes no claim between DeltaNet and Gated DeltaNet: nothing in this task asks the
# state to forget, which is what the decay is for.

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(4.5, 3.4), layout="constrained")
colours = {kind: f"C{i}" for i, kind in enumerate(ONE_LAYER)}  # as below
for (kind, seed), history in losses.items():
    if kind in ONE_LAYER:
        smooth = np.convolve(history, np.ones(10) / 10, mode="valid")
        steps = np.arange(10, STEPS + 1)  # the last step of each mean
        label = kind if seed == 0 else None
        ax.plot(steps, smooth, color=colours[kind], lw=1, label=label)
ax.axhline(math.log(64), color="grey", linestyle=":")
ax.axvline(150, color="grey", linewidth=0.8)
ax.set_xlabel("training step (mean of the last 10)")
ax.set_ylabel("loss")
ax.legend(fontsize=9)
figure_to_svg(
    fig,
    alt="Training loss of the twelve one-layer models, 10-step means, "
    "against the step, one colour per kind, with a dotted line at ln 64 and "
    "a vertical line at step 150. Every model starts near ln 64. Softmax "
    "falls to near 0 within about 50 steps; linear attention leaves the "
    "plateau next; the DeltaNet and Gated DeltaNet models stay on it "
    "longest, one of each still falling steeply at step 150.",
)

# %% tags=["plot"]
print("10-step mean loss: first step below 4 | at step 150 | at step 300")
plateau = {}  # (kind, seed) -> (first step below 4, loss at 150, at 300)
for (kind, seed), history in losses.items():
    smooth = np.convolve(history, np.ones(10) / 10, mode="valid")
    first = 10 + int(np.argmax(smooth < 4.0))  # step 10 + i ends window i
    plateau[kind, seed] = (first, smooth[150 - 10], smooth[-1])
for kind in ONE_LAYER:
    for seed in SEEDS:
        first, at150, at300 = plateau[kind, seed]
        print(f"{kind:>14} s{seed}: {first:>4} | {at150:.2f} | {at300:.2f}")
low_delta = np.minimum(recall["DeltaNet"], recall["Gated DeltaNet"]).min(0)
margin = low_delta - recall["linear"].max(axis=0)
print("lowest delta-rule minus highest linear recall, by pairs:")
print(
    "  "
    + " ".join(f"{n}: {m:+.3f}" for n, m in zip(PAIRS, margin, strict=True))
)

# %% [markdown]
# Every model starts near $\ln 64 \approx 4.16$. Softmax leaves it within a few dozen
# steps, linear attention next; the delta-rule models leave it last, and the slowest of
# them is still far above its final loss at step 150. After 300 steps, the order between
# the kinds is the one in the table.
#
# ### Why the delta rule recalls more here
#
# The opening picture's argument, a key written twice, does not apply to this task: every
# context draws its keys without repeats, so no pair is ever overwritten. What differs is
# how a new pair shares the state with the pairs before it. Sixteen dimensions hold at
# most sixteen orthogonal keys, so the keys of a long context overlap, and reading one
# key returns its value plus a little of every value whose key it overlaps. Linear
# attention adds every pair with the same weight, so old and new pairs blur alike. The
# delta rule first subtracts what the state already returns for the new key: the newest
# pair reads back best, and each later write disturbs the older pairs along its own key.
# The cell asks each model for every pair of 512 contexts of 32 pairs, and splits the
# answers by where the pair stood in its context.

# %% tags=["plot"]
g = torch.Generator().manual_seed(7)
keys_a, values_a, _, _ = recall_batch(g, 512, 32, 1)  # (B, N): 32 pairs
by_quarter = {}  # (kind, seed) -> recall of each quarter of the pairs
for kind in ("linear", "DeltaNet", "Gated DeltaNet"):
    for seed in SEEDS:
        with torch.no_grad():  # every pair asked: the queries are the keys
            answers = models[kind, seed](keys_a, values_a, keys_a).argmax(-1)
        right = (answers == values_a).float().mean(0)  # (N,): by position
        by_quarter[kind, seed] = right.reshape(4, 8).mean(-1).numpy()
print("recall at 32 pairs, by position: oldest quarter ... newest quarter")
for (kind, seed), row in by_quarter.items():
    print(f"{kind:>14} s{seed}" + "".join(f"{a:>7.3f}" for a in row))

# %% [markdown]
# Linear attention recalls every quarter alike. The delta-rule models recall the oldest
# quarter about as well as linear attention does, and the newest quarter far better:
# their gain comes from the pairs written last, as a state corrected toward each new pair
# should give.
#
# ## Hybrids
#
# A state of $16 \times 32$ cannot hold 64 pairs; a softmax layer keeps them all, at a
# cost that grows with every pair. Hybrid models keep both. Qwen3-Next makes every fourth
# layer full attention and the other three Gated DeltaNet; Kimi Linear uses "a 3:1
# KDA-to-global MLA ratio" (KDA is a Gated DeltaNet with a decay per channel).
#
# The ratio is a design choice, not a constant. MiniMax-01 places one softmax layer after
# every seven layers of plain linear attention (no delta rule), and Jamba one attention
# layer in eight, the other seven Mamba layers. The Gated DeltaNet paper's own hybrids
# pair its layers with sliding-window attention instead of global attention.
#
# `RecallStack` builds such a stack for the recall task: pairs and queries each have a
# residual stream; in every layer each pair reads the pairs before it (as a decoder reads
# its context) and each query reads every pair. The hybrid has three Gated DeltaNet
# layers and then a softmax layer; the control has four Gated DeltaNet layers. Both train
# with the same recipe and seeds as above.

# %%
STACKS = {
    "3 GDN + softmax": ("gated_delta",) * 3 + ("softmax",),
    "4 GDN": ("gated_delta",) * 4,
}
for name, layers in STACKS.items():
    train(name, lambda layers=layers: RecallStack(layers, 64, 64, 32, 16))
    recall[name] = np.array(
        [[recall_accuracy(models[name, s], n) for n in PAIRS] for s in SEEDS]
    )
four_softmax = RecallStack(("softmax",) * 4, 64, 64, 32, 16)
print(f"{'':>16}  lowest  at 64 pairs  kept after 64 pairs")
for name in (*STACKS, "softmax", "Gated DeltaNet"):
    table, kept = recall[name], models[name, 0].cache_numbers(64)
    spread = f"{table[:, -1].min():.3f}-{table[:, -1].max():.3f}"
    print(f"{name:>16}  {table.min():.3f}  {spread:>11}  {kept:>6,}")
kept_4 = four_softmax.cache_numbers(64)
print(f"{'4 softmax':>16}  (not trained)  {kept_4:>13,}")

# %% [markdown]
# The hybrid recalls like one softmax layer, at every count and from every seed, while
# its cache grows by 48 numbers a pair, a quarter of what four softmax layers keep
# (plus three fixed states). Four Gated DeltaNet layers, with the same depth, stay far
# below the hybrid at 64 pairs: stacking states does not replace a layer that keeps the
# pairs.

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(4.5, 3.8), layout="constrained")
shown = ("softmax", "linear", "DeltaNet", "Gated DeltaNet", *STACKS)
for kind, marker in zip(shown, "osD^vP", strict=True):
    mean = recall[kind].mean(axis=0)
    spread = [mean - recall[kind].min(axis=0), recall[kind].max(axis=0) - mean]
    ax.errorbar(
        PAIRS, mean, yerr=spread, fmt=marker + "-", capsize=3, label=kind
    )
ax.set_xscale("log", base=2)
ax.set_xticks(PAIRS, PAIRS)
ax.minorticks_off()
ax.set_ylim(0, 1.05)
ax.set_xlabel("key-value pairs in the context")
ax.set_ylabel("recall accuracy")
ax.legend(fontsize=8, ncols=2)
figure_to_svg(
    fig,
    alt="Recall accuracy against 1 to 64 key-value pairs, mean of three "
    "seeds with their range, 300 steps. Softmax and the hybrid of three "
    "Gated DeltaNet layers and one softmax layer stay near 1. Linear "
    "attention falls fastest; DeltaNet and Gated DeltaNet fall more slowly; "
    "four Gated DeltaNet layers end far below the hybrid at 64 pairs.",
)

# %% [markdown]
# ### What it costs per token
#
# The cache page's table gave the bytes one layer keeps per token at DeepSeek-V2's shape
# (128 heads of 128, 16-bit numbers, 32,768 tokens). A Gated DeltaNet layer of the same
# shape keeps one $128 \times 128$ state per head: a fixed cost, which the cell divides
# by the tokens, as the table did for linear attention. A 3:1 hybrid averages one
# attention layer and three states over four layers.

# %%
H_t, d_t, T_t, BYTES = 128, 128, 32_768, 2
state = DeltaRuleState(torch.zeros(H_t, d_t, d_t, dtype=torch.bfloat16), T_t)
per_layer = {
    "MHA, 128 heads": 2 * H_t * d_t * BYTES,  # a key and a value per head
    "Gated DeltaNet": state.nbytes / T_t,
}
per_layer["3 GDN : 1 MHA"] = (3 * per_layer["Gated DeltaNet"]
                              + per_layer["MHA, 128 heads"]) / 4  # fmt: skip
print(f"bytes per token per layer, T = {T_t:,}:")
for method, b in per_layer.items():
    print(f"  {method:<16} {b:>9,.0f}")
print(f"one Gated DeltaNet state: {state.nbytes:,} bytes")

# %% [markdown]
# A hybrid's memory is mostly its attention layers' cache, and it still grows with the
# text, at a quarter of the rate; the states are a fixed cost, which exercise 1 weighs
# for Qwen3-Next's real configuration.
#
# <details class="note">
# <summary>Going deeper: what production layers add</summary>
#
# The recall models here keep DeltaNet's core: unit keys and queries, a sigmoid $\beta$,
# an RMSNorm on the output. Production layers add more. DeltaNet's layer runs a short
# causal convolution (kernel 4) over the queries, keys and values before the delta rule;
# fla's Gated DeltaNet layer warns "Do not turn it off", and Qwen3-Next's configuration
# sets `linear_conv_kernel_dim` to 4, a small state of its own per layer. Gated DeltaNet
# also gates its output. Kimi Delta Attention (Kimi Linear) replaces the scalar decay
# $\alpha_t$ by one per channel of the key. None of them changes the recurrence's shape:
# a state of fixed size, corrected one key at a time.
#
# </details>
#
# ## Common pitfalls
#
# **The chunked output with the causal mask $M$.** A common mistake is to write the
# in-chunk term of the gated chunked form as $(Q K^\top \odot M)\, U$, with $M$ the 0/1
# causal mask. It is printed that way in section 3.3 of the Gated DeltaNet paper, and two
# issues on its repository ask about it: the decay mask $\Gamma$ belongs there, as the
# derivation above shows, and as Qwen3-Next's code multiplies by its `decay_mask`.
# Written with $M$, the first chunk no longer matches the recurrence:

# %%
q, k, v, beta, log_alpha = (x.detach() for x in draw(torch.float64, True, 3))
slow, _ = delta_rule_recurrent(q, k, v, beta, log_alpha)
C = 64
kk, bb, c = k[..., :C, :], beta[..., :C], slice(0, C)  # the first chunk
lg = log_alpha[..., c].cumsum(-1)  # (B, H, C): log gamma
below = torch.ones(C, C, dtype=torch.bool).tril()
decay = (lg[..., :, None] - lg[..., None, :]).masked_fill(~below, -math.inf)
decay = decay.exp()  # (B, H, C, C): Gamma
A = ((bb[..., None] * kk) @ kk.mT * decay).tril(-1)
u = torch.linalg.solve_triangular(
    torch.eye(C, dtype=torch.float64) + A,
    bb[..., None] * v[..., c, :],
    upper=False,
    unitriangular=True,
)  # (B, H, C, d_v): S_0 = 0
qk = q[..., c, :] @ kk.mT  # (B, H, C, C)
mask_gaps = {}
for name, mask in (("Gamma", decay), ("M", below.double())):
    mask_gaps[name] = ((qk * mask) @ u - slow[..., c, :]).abs().max().item()
    print(f"with {name:>5}: largest |chunked - recurrent|", end=" ")
    print(f"{mask_gaps[name]:.1e}")
print(f"largest |output| of the chunk: {slow[..., c, :].abs().max():.2f}")

# %% [markdown]
# The error with $M$ is of the size of the outputs themselves. Without a decay,
# $\Gamma = M$ and both are right, which is how the mistake survives a test that leaves
# the gate out.
#
# **The decay after the error.** A decoding loop that reads the error from the state
# *before* decaying it, $u_t = \beta_t (v_t - k_t S_{t-1})$, runs another recurrence
# than Gated DeltaNet's, whose decay comes first (as above). A model trained with one and
# run with the other drifts apart from itself:

# %%
S_late, late = torch.zeros(2, 4, 32, 32, dtype=torch.float64), []
for t in range(64):
    k_t = k[..., t : t + 1, :]  # (B, H, 1, d_k)
    error = v[..., t : t + 1, :] - k_t @ S_late  # read before the decay
    S_late = log_alpha[..., t, None, None].exp() * S_late + k_t.mT @ (
        beta[..., t, None, None] * error
    )
    late.append(q[..., t : t + 1, :] @ S_late)
late_gap = (torch.cat(late, dim=-2) - slow[..., :64, :]).abs().max().item()
print(f"largest |decay after the error - Gated DeltaNet|: {late_gap:.2f}")

# %% [markdown]
# The fix is one order everywhere: decay, then read the error, then write.
#
# **"The chunked form saves work."** It saves *sequential steps*, not arithmetic. The
# count above says it:

# %%
chunked = per_token["delta rule, chunks of 64"]
ratio = chunked / per_token["delta rule, recurrent"]
print(f"chunked / recurrent multiply-adds at d = 128, C = 64: {ratio:.2f}")

# %% [markdown]
# ## Summary
#
# - The **delta rule** writes into a state of fixed size by correcting what the state
#   returns for each key, a step of gradient descent on "return $v$ for $k$"; keys of
#   unit length keep it stable. **Gated DeltaNet** decays the state first.
# - Its **recurrent** form runs one token at a time; its **chunked** form solves one
#   triangular system per chunk and gives the same outputs, states and gradients to
#   rounding, with more multiply-adds and far fewer sequential steps.
# - On the recall task, with the same data and steps, the delta rule recalls more than
#   linear attention from 8 pairs on, and less than softmax; its gain is on the pairs
#   written last. A **hybrid** with one softmax layer in four recalls like softmax, with
#   a quarter of its cache per pair.
#
# The closing figures as this build computed them: the largest differences between the
# chunked and the recurrent forms, and the recall of every model and seed by pairs.

# %%
print("largest |chunked - recurrent|: output, state, gradients")
for (dtype, gated), row in gaps.items():
    name = f"{str(dtype)[6:]}, {'gated' if gated else 'ungated'}"
    print(f"  {name:<17}" + "".join(f"{x:>9.1e}" for x in row))
print(f"recall by pairs: {'':>10}" + "".join(f"{n:>6}" for n in PAIRS))
for kind, table in recall.items():
    for seed, row in zip(SEEDS, table, strict=True):
        cells = "".join(f"{a:>6.3f}" for a in row)
        print(f"  {kind:>15} s{seed}{cells}")

# %% [markdown]
# ## Exercises
#
# **1. Qwen3-Next's memory.** Its configuration in transformers (`Qwen3NextConfig`) has
# 48 layers. Every fourth is full attention with 2 key/value heads of 256; the other 36
# are Gated DeltaNet with 32 value heads, each with a $128 \times 128$ state. In 16-bit
# numbers: how many bytes does the cache grow by per token, how many bytes do the states
# take, and from what length does the hybrid keep less than 48 full-attention layers
# would? (Leave out the short convolutions' small state.) And if the states are kept in
# 32-bit numbers? Transformers' reference code for Qwen3-Next computes the delta rule in
# float32 (`torch_chunk_gated_delta_rule` casts its inputs to it).

# %% tags=["solution"]
kv_per_token = 12 * 2 * 2 * 256 * 2  # 12 layers, keys and values, 2 heads
states = 36 * 32 * 128 * 128 * 2  # 36 layers, 32 heads of 128 x 128
all_full = 48 * 2 * 2 * 256 * 2
print(f"hybrid: {kv_per_token:,} bytes per token + {states:,} bytes of state")
print(f"48 full-attention layers: {all_full:,} bytes per token")
break_even = states / (all_full - kv_per_token)
print(f"equal at {break_even:,.0f} tokens; the hybrid is smaller after")
break_even_32 = 2 * states / (all_full - kv_per_token)  # 4 bytes, not 2
print(f"states in 32 bits: equal at {break_even_32:,.0f} tokens")

# %% [markdown]
# **2. Prefill in chunks, decode one token at a time.** Run the first 100 tokens of a
# gated draw through `delta_rule_chunked`, pass its state on, then decode 20 more with
# `delta_rule_recurrent`, and compare with one recurrent pass over all 120.

# %% tags=["solution"]
q, k, v, beta, log_alpha = (
    x.detach()[..., :120, :] if x.ndim == 4 else x.detach()[..., :120]
    for x in draw(torch.float64, True, seed=5)
)
whole, _ = delta_rule_recurrent(q, k, v, beta, log_alpha)
head, tail = slice(0, 100), slice(100, 120)
first, prefill = delta_rule_chunked(
    q[..., head, :], k[..., head, :], v[..., head, :], beta[..., head],
    log_alpha[..., head],
)  # fmt: skip
rest, _ = delta_rule_recurrent(
    q[..., tail, :], k[..., tail, :], v[..., tail, :], beta[..., tail],
    log_alpha[..., tail], initial_state=prefill,
)  # fmt: skip
carried_gap = (torch.cat([first, rest], -2) - whole).abs().max().item()
print(f"largest difference: {carried_gap:.1e}; tokens in the state:", end=" ")
print(prefill.length)

# %% [markdown]
# **3. Capacity.** With $\beta = 1$, four orthogonal unit keys in $d_k = 4$ store four
# pairs exactly (the picture). Write a fifth pair, value $(10, 20)$, whose key is
# $(k_0 + k_1)/\sqrt 2$. What does each key read afterwards?

# %% tags=["solution"]
k_new = (keys[:1] + keys[1:2]) / math.sqrt(2)
k6, v6 = torch.cat([keys, k_new]), torch.cat([values, v0])
_, full = delta_rule_recurrent(k6, k6, v6, torch.ones(5, dtype=torch.float64))
print(keys @ full.state)  # rows 0 and 1 moved; rows 2 and 3 did not
print("the new key reads", (k_new @ full.state).tolist())
# The new key reads its value exactly, and keys 0 and 1 moved by the same
# step: four dimensions hold four pairs exactly, and a fifth key in their
# span is stored only by disturbing the pairs it overlaps.

# %% [markdown]
# **4. The chunk size.** At $d_k = d_v = 128$ and 4,096 tokens, which chunk size from 16
# to 256 makes the fewest multiply-adds per token, and how does it compare with the
# recurrence?

# %% tags=["solution"]
by_chunk = {
    C: delta_rule_multiply_adds(4096, 128, 128, C)["total"] / 4096
    for C in (16, 32, 64, 128, 256)
}
for C, count in by_chunk.items():
    print(f"C = {C:>3}: {count:>9,.0f} per token")
recurrent_count = delta_rule_multiply_adds(4096, 128, 128)["total"] // 4096
print(f"recurrent: {recurrent_count:>9,} per token")
# Small chunks cost the least arithmetic, but need more sequential steps and
# products too small to keep a GPU busy; kernels settle on 64.

# %% [markdown]
# ## References
#
# - Imanol Schlag, Kazuki Irie, Jürgen Schmidhuber. [Linear Transformers Are Secretly
#   Fast Weight Programmers](https://arxiv.org/abs/2102.11174). ICML 2021. The delta rule
#   in linear attention.
# - Songlin Yang, Bailin Wang, Yu Zhang, Yikang Shen, Yoon Kim. [Parallelizing Linear
#   Transformers with the Delta Rule over Sequence Length](https://arxiv.org/abs/2406.06484).
#   NeurIPS 2024 (DeltaNet; its abstract on training "on modern hardware", the WY
#   representation of products of Householder matrices); and the first author's
#   [DeltaNet Explained, Part II](https://sustcsonglin.github.io/blog/2024/deltanet-2/)
#   (the chunkwise form, the WY representation, FLOPs against hardware) and
#   [Part III](https://sustcsonglin.github.io/blog/2024/deltanet-3/) (the layer, the
#   eigenvalues, β up to 2).
# - Riccardo Grazzi, Julien Siems, Arber Zela, Jörg K. H. Franke, Frank Hutter,
#   Massimiliano Pontil. [Unlocking State-Tracking in Linear RNNs Through Negative
#   Eigenvalues](https://arxiv.org/abs/2411.12537). ICLR 2025. β up to 2, and parity.
# - Songlin Yang, Jan Kautz, Ali Hatamizadeh. [Gated Delta Networks: Improving Mamba2
#   with Delta Rule](https://arxiv.org/abs/2412.06464). ICLR 2025 (the UT transform,
#   section 3.3, after Joffrain et al., 2006; the hybrids with sliding-window attention);
#   code
#   [NVlabs/GatedDeltaNet](https://github.com/NVlabs/GatedDeltaNet); issues
#   [13](https://github.com/NVlabs/GatedDeltaNet/issues/13) and
#   [15](https://github.com/NVlabs/GatedDeltaNet/issues/15) on the mask of section 3.3;
#   [flash-linear-attention issue 885](https://github.com/fla-org/flash-linear-attention/issues/885)
#   on the order of decay and error.
# - Reference code read for this page:
#   [flash-linear-attention](https://github.com/fla-org/flash-linear-attention)
#   (`fla/ops/delta_rule/naive.py`, `fla/ops/gated_delta_rule/naive.py`,
#   `fla/layers/gated_deltanet.py`),
#   [attention-gym](https://github.com/meta-pytorch/attention-gym)
#   (`attn_gym/linear/gdn/impl/reference.py`), Sebastian Raschka's
#   [LLMs-from-scratch, ch04/08_deltanet](https://github.com/rasbt/LLMs-from-scratch/tree/main/ch04/08_deltanet).
# - Qwen3-Next's layers: `Qwen3NextConfig` in
#   [transformers](https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen3_next/configuration_qwen3_next.py);
#   Kimi Linear's "3:1 KDA-to-global MLA ratio":
#   [MoonshotAI/Kimi-Linear](https://github.com/MoonshotAI/Kimi-Linear).
# - Other hybrid ratios: MiniMax. [MiniMax-01: Scaling Foundation Models with Lightning
#   Attention](https://arxiv.org/abs/2501.08313). 2025; its
#   [README](https://github.com/MiniMax-AI/MiniMax-01): "a softmax attention is
#   positioned after every 7 lightning attention". Opher Lieber et al.
#   [Jamba: A Hybrid Transformer-Mamba Language Model](https://arxiv.org/abs/2403.19887).
#   2024 (`attn_layer_period` 8 in its Transformers configuration).
# - Simran Arora et al. [Zoology: Measuring and Improving Recall in Efficient Language
#   Models](https://arxiv.org/abs/2312.04927). 2023. Associative recall as a measure of
#   what a state of fixed size can hold.
#
# **Next:** [Reading only the blocks that matter: learned sparse attention](sparse_attention.md).

# %% tags=["measured"]
print(f"training the {len(models)} models took", end=" ")
print(f"{sum(seconds.values()):.1f} s of CPU time")

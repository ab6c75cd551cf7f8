# %% [markdown]
# # Reading only the blocks that matter: learned sparse attention
#
# A sliding window ([Serving long contexts](serving_long_contexts.md)) bounds the work
# of every query, and forgets every key older than the window. But a query that needs
# one old token needs one old *block* of keys, not all of them. MoBA (Lu et al., 2025)
# and the selection branch of NSA (Yuan et al., 2025) let each query score every block
# of keys cheaply, keep the few best, and attend exactly inside them. This page builds
# that on the site's tiled attention, checks it against dense attention, and measures,
# on a model trained here, how much of each query's attention it keeps for the keys it
# reads, beside a window that reads as many, and what choosing the blocks costs.
#
# It assumes tiled attention and its skipped tiles ([Attention without the T×T
# matrix](efficient_attention.md)), block masks ([Serving long
# contexts](serving_long_contexts.md)) and the induction model ([Attention that learned: induction heads](induction_heads.md)). Shapes follow
# the [notation table](../notation.md): `(B, H, T, d_k)` per head.
#
# The picture: one query, at position 14 of 16 keys cut into blocks of 4. It scores each
# block by the dot product with the block's mean key (top row), keeps its own block and
# the best earlier one, and attends only to their keys (bottom row: its attention
# weights, from dark purple for 0 to yellow for 1, hatched where a key is skipped).

# %% tags=["plot"]
import math

import torch

from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.plotting import figure_to_svg
from attn_ref.sparse import block_scores, select_blocks

g = torch.Generator().manual_seed(2)
k_pic = torch.randn(16, 8, generator=g)  # (S, d_k)
q_pic = 0.8 * k_pic[5] + 0.3 * torch.randn(8, generator=g)  # like key 5
t_pic, B_pic = 14, 4  # the query's position, the block size
scores_pic = block_scores(q_pic[None], k_pic, B_pic)  # (1, n_blocks)
chosen_pic = select_blocks(scores_pic.expand(16, 4), 1, B_pic)[t_pic]  # (4,)
seen = torch.arange(16) <= t_pic  # causal
kept_keys = chosen_pic.repeat_interleave(B_pic) & seen  # (S,)
logits_pic = (k_pic @ q_pic / math.sqrt(8)).masked_fill(~kept_keys, -math.inf)
weights_pic = torch.softmax(logits_pic, dim=-1)
fig, ax = canvas(9.0, 6.4)
grid(ax, scores_pic, 0.5, 1.0, decimals=1, cell=2.0, label="q · mean key")
grid(ax, weights_pic[None], 0.5, 4.4, cmap="viridis", mask=kept_keys[None],
     cell=0.5)  # fmt: skip
for block, name in ((1, "best earlier"), (3, "own")):
    arrow(ax, (1.5 + 2 * block, 3.0), (1.5 + 2 * block, 4.4))
    note(ax, 1.6 + 2 * block, 3.7, name, ha="left", fontsize=10)
note(ax, 4.5, 5.5, "weights on keys 0-15", va="top")
listed = ", ".join(f"{x:.1f}" for x in scores_pic[0])
figure_to_svg(
    fig,
    alt="Top, four block scores of one query, the dot product of the query "
    f"with each block's mean key: {listed}. "
    "The best earlier block, block 1, and the query's own block 3 are kept "
    "(arrows). Bottom, the query's attention weights on the 16 keys: keys of "
    "the other blocks and key 15, after the query, are hatched; key 5 in "
    "block 1 gets most of the weight, in yellow.",
)

# %% [markdown]
# The query resembles key 5, so block 1's mean key scores highest among the earlier
# blocks, and key 5 gets most of the weight. Blocks 0 and 2 are never read: their tiles
# are skipped. The score costs one dot product per block, not per key.
#
# ## Score a block by its mean key
#
# Cut the keys into blocks of $B$ positions. Query $t$ scores block $i$ by its mean key,
# MoBA's gate (its equation 6):
#
# $$
# s_{t,i} = q_t \cdot \overline{k}_i, \qquad
# \overline{k}_i = \tfrac{1}{B} \textstyle\sum_{j \in \text{block } i} k_j
# $$
#
# It keeps its **own block** always, attended with the causal mask, and the `top_k`
# best blocks wholly before it. Blocks after its own hold only future keys and are
# never chosen. The own block is not scored either: its mean includes keys after $t$,
# and letting them decide would let the future choose (a pitfall below measures it).
# `select_blocks` does this for every query at once; `window_blocks` keeps the `top_k`
# blocks just before the own one instead, a sliding window that reads as many keys.

# %%
import time

import matplotlib.pyplot as plt
import torch.nn.functional as F

from attn_ref import scaled_dot_product_attention
from attn_ref.masks import causal_mask
from attn_ref.plotting import attention_heatmap
from attn_ref.sparse import (
    block_sparse_attention,
    captured_weight,
    run_attention_only,
    selection_density,
    window_blocks,
)
from attn_ref.training import (
    AttentionOnlyDecoder,
    next_token_losses,
    part_masks,
    prefix_matching_scores,
    repeated_tokens,
    train_induction,
)

# %%
scores = torch.tensor([[0.0, 5.0, 1.0, 9.0]]).expand(8, 4)  # (L, n_blocks)
print("top 1 by score:\n", select_blocks(scores, top_k=1, block_size=2).int())
print("window of 1:\n", window_blocks(8, 4, num_blocks=1, block_size=2).int())

# %% [markdown]
# Eight queries, blocks of 2, the same scores for every query. Queries 0 and 1 have no
# earlier block and keep their own. Queries 6 and 7 (block 3) keep block 1, the best of
# blocks 0 to 2, where the window keeps block 2, the nearest.
#
# ## On tiled attention
#
# `tiled_attention` computes attention in tiles of `block_q` queries by `block_k` keys,
# and its two hooks, the ones block masks use, do the rest. `block_sparse_attention`
# makes each key block one column of tiles: its `TileRule`'s `skip` skips a tile that
# no query in it chose, so its scores are never computed, and its `modify` sets the
# unchosen keys of a computed tile to $-\infty$ before the softmax. With every block chosen it is causal
# attention, which the cell checks against PyTorch's own.

# %%
g = torch.Generator().manual_seed(0)
q, k, v = torch.randn(3, 1, 2, 64, 16, generator=g)  # (B, H, T, d_k) each
every = select_blocks(block_scores(q, k, 4), top_k=16, block_size=4)
ours, state = block_sparse_attention(q, k, v, every, block_size=4)
theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True)
every_gap = (ours - theirs).abs().max()
print(f"every block: largest |ours - PyTorch causal| {every_gap:.1e}")
print(f"tiles computed {state.tiles_computed}, skipped {state.tiles_skipped}")
top2 = select_blocks(block_scores(q, k, 4), top_k=2, block_size=4)
_, sparse_state = block_sparse_attention(q, k, v, top2, block_size=4)
print(f"top 2, both heads: tiles computed {sparse_state.tiles_computed}")
one = (0, 0)  # one sequence, one head
_, one_state = block_sparse_attention(q[one], k[one], v[one], top2[one], 4)
print(f"top 2, one head: tiles computed {one_state.tiles_computed},", end=" ")
print(f"selected (query, block) pairs {int(top2[one].sum())}")

# %% [markdown]
# With tiles of one query by one block, the tiles computed for one head are exactly its
# selected pairs: at most 3 blocks per query, where causal attention reads up to 16.
# With two heads in one call, a tile is computed when either head chose it (a pitfall
# below comes back to this).
#
# ## A model to read
#
# Random queries and keys say nothing about what a selection keeps: that depends on
# where a trained model looks. The induction model of [its page](induction_heads.md)
# is the right test, because its second layer looks far back: at each token of a
# repeat, its induction head attends to the token after the earlier copy of the current
# one. Here it reads 64 tokens whose period is 8 to 32, so the copy can lie anywhere in
# the context. `AttentionOnlyDecoder` with two layers of two heads trains for 200 steps,
# from three seeds. Each is measured on the same 64 fresh sequences.

# %%
torch.set_num_threads(1)  # one thread: results that do not depend on the cores
VOCAB, T, PERIODS, BLOCK = 64, 64, (8, 32), 4
N_BLOCKS, SEEDS = T // BLOCK, (0, 1, 2)
models, seconds = {}, {}
for seed in SEEDS:
    torch.manual_seed(seed)
    models[seed] = AttentionOnlyDecoder(
        VOCAB, T, embed_dim=64, num_layers=2, num_heads=2
    )
    start = time.process_time()
    train_induction(models[seed], 200, 32, lr=1e-2, periods=PERIODS, seed=seed)
    seconds[seed] = time.process_time() - start
g = torch.Generator().manual_seed(1000)
tokens, periods = repeated_tokens(64, T, VOCAB, PERIODS, g)  # (B, T), (B,)
_, repeated = part_masks(periods, T)  # (B, T - 1): predictions that can copy
dense_loss = {}
for seed, model in models.items():
    with torch.no_grad():
        logits, _ = model(tokens)
    dense_loss[seed] = (
        next_token_losses(logits, tokens)[repeated].mean().item()
    )
    print(f"seed {seed}: loss on the repeated part {dense_loss[seed]:.3f}")
print(f"a uniform guess: ln {VOCAB} = {math.log(VOCAB):.3f}")

# %% [markdown]
# Every seed predicts the repeats far better than a uniform guess: the models copy. The
# picture below shows where the induction head of seed 0 looks, for the queries of the
# second half of one sequence, and which keys a selection of two earlier blocks by mean
# key keeps (left), against a window of the two blocks before the own one (right).
# Hatched keys are skipped.


# %%
def dense_queries_and_keys(model, tokens):
    """Each layer's attention weights and its (q, k), (B, H, T, d_k), dense."""
    kept = {}

    def dense(layer, q, k, v):
        kept[layer] = (q, k)
        return scaled_dot_product_attention(q, k, v, is_causal=True)[0]

    with torch.no_grad():
        run_attention_only(model, tokens, dense)
        _, weights = model(tokens)
    return weights, [kept[layer] for layer in sorted(kept)]


weights0, qk0 = dense_queries_and_keys(models[0], tokens)
q1, k1 = qk0[1]  # layer 1, the induction layer
prefix = prefix_matching_scores(weights0[1], tokens)  # (H,)
head = int(prefix.argmax())
print(
    "prefix-matching scores of layer 1:",
    [round(x, 3) for x in prefix.tolist()],
)
print(f"induction head of seed 0: layer 1, head {head}")

# %% tags=["plot"]
rows = slice(32, 64)  # queries 32 to 63: the second half
chosen_top = select_blocks(block_scores(q1, k1, BLOCK), 2, BLOCK)[0, head]
chosen_win = window_blocks(T, N_BLOCKS, 2, BLOCK)
fig, axes = plt.subplots(2, 1, figsize=(4.5, 4.6), layout="constrained")
for ax, chosen, title in (
    (axes[0], chosen_top, "own + top 2 by mean key"),
    (axes[1], chosen_win, "own + window of 2"),
):
    keep = chosen.repeat_interleave(BLOCK, dim=-1) & causal_mask(T)  # (T, T)
    attention_heatmap(
        weights0[1][0, head, rows], ax=ax, annotate=False, mask=keep[rows],
        title=title, key_labels=[str(j) for j in range(T)], vmax=1.0,
        query_labels=[str(i) for i in range(32, 64)],
    )  # fmt: skip
    ax.set_xticks([0, 31, 63], ["0", "31", "63"])
    ax.set_yticks([0, 31], ["32", "63"])
fig.axes[2].remove()  # the top panel's colour bar: the bottom one serves both
figure_to_svg(
    fig,
    alt="Two heatmaps of the induction head's weights, queries 32 to 63 "
    "against keys 0 to 63, weight 0 dark purple and 1 yellow, skipped keys "
    "hatched. Top, each query's own block and its two best-scored earlier "
    "blocks: the yellow cell of nearly every row lies in a kept block. "
    "Bottom, the two blocks before each query's own: most yellow cells lie "
    "in hatched, skipped blocks.",
)

# %% [markdown]
# The induction head looks one period back, which the window reaches only for the
# shortest periods. The mean keys find the block it needs for almost every query.
#
# ## What a selection keeps
#
# For `top_k` from 0 to 15 earlier blocks, and for a window of the same number of blocks,
# the cell measures on the 64 sequences, for every seed:
#
# - **density**: the selected (query, block) pairs over the causal ones, the share of
#   causal tiles computed with tiles of one query (the same for top-k and window);
# - **captured weight**: the share of each query's dense attention weight that falls in
#   its selected blocks, per layer, averaged over the queries past the first block;
# - **loss**: the next-token loss on the repeated part, with *every* layer sparse.

# %%
TOP_K = (0, 1, 2, 3, 4, 6, 8, 15)
later = torch.arange(T) >= BLOCK  # queries with an earlier block to choose


def choose(how, top_k, q, k):
    """Each query's blocks, (..., T, n_blocks): by mean key, or the window."""
    if how == "top-k":
        return select_blocks(block_scores(q, k, BLOCK), top_k, BLOCK)
    return window_blocks(T, N_BLOCKS, top_k, BLOCK)


# %%
def sparse_logits(model, how, top_k):
    """The model's logits with every layer's attention sparse."""

    def attend(layer, q, k, v):
        chosen = choose(how, top_k, q, k)
        return block_sparse_attention(q, k, v, chosen, BLOCK, block_q=4)[0]

    with torch.no_grad():
        return run_attention_only(model, tokens, attend)


def sparse_loss(model, how, top_k):
    """Loss on the repeated part with every layer's attention sparse."""
    logits = sparse_logits(model, how, top_k)
    return next_token_losses(logits, tokens)[repeated].mean().item()


# %% tags=["plot"]
def measure(model):
    """{(how, top_k): (density, kept per layer, per head of layer 1, loss)}."""
    weights, qk = dense_queries_and_keys(model, tokens)
    table = {}
    for top_k in TOP_K:
        density = selection_density(
            window_blocks(T, N_BLOCKS, top_k, BLOCK), BLOCK
        )
        for how in ("top-k", "window"):
            kept = [  # per layer, (B, H, queries past the first block)
                captured_weight(w, choose(how, top_k, q, k), BLOCK)[..., later]
                for w, (q, k) in zip(weights, qk, strict=True)
            ]
            per_head = kept[1].mean(dim=(0, 2)).tolist()
            loss = sparse_loss(model, how, top_k)
            table[how, top_k] = (
                density,
                [x.mean().item() for x in kept],
                per_head,
                loss,
            )
    return table


results = {seed: measure(model) for seed, model in models.items()}
print("seed 0    layer 0 kept    layer 1 kept      loss")
print("top_k density  top-k window  top-k window  top-k window")
for top_k in TOP_K:
    (d, (a0, a1), _, la), (_, (b0, b1), _, lb) = (
        results[0][how, top_k] for how in ("top-k", "window")
    )
    print(f"{top_k:>5} {d:>6.3f} {a0:>6.3f} {b0:>6.3f} {a1:>6.3f} {b1:>6.3f}"
          f" {la:>6.2f} {lb:>6.2f}")  # fmt: skip

# %% tags=["plot"]
fig, axes = plt.subplots(1, 2, figsize=(4.5, 3.2), layout="constrained")
for how, style, colour in (("top-k", "o-", "C0"), ("window", "s--", "C1")):
    for seed, table in results.items():
        density = [table[how, k][0] for k in TOP_K]
        label = how if seed == SEEDS[0] else None
        kept1 = [table[how, k][1][1] for k in TOP_K]
        axes[0].plot(density, kept1, style, color=colour, ms=3, label=label)
        loss = [table[how, k][3] for k in TOP_K]
        axes[1].plot(density, loss, style, color=colour, ms=3)
axes[1].axhline(math.log(VOCAB), color="grey", linestyle=":")
axes[0].set_ylabel("layer 1: weight kept")
axes[1].set_ylabel("loss, repeated part")
for ax in axes:
    ax.set_xlabel("share of tiles")
axes[0].legend(fontsize=9)
figure_to_svg(
    fig,
    alt="Left: the share of the induction layer's attention weight kept, "
    "against the share of tiles computed, three seeds: blocks chosen by "
    "mean key keep most of it from a third of the tiles on, a window of the "
    "same share rises slowly. Right: the loss with every layer sparse, far "
    "lower for the chosen blocks at every share; the window's loss starts "
    "above the dotted line of a uniform guess.",
)

# %% [markdown]
# With as many keys read, the mean keys keep most of the induction layer's weight where
# the window keeps little, on every seed: the numbers below are the lowest and highest
# over the seeds. The loss follows.

# %% tags=["plot"]
print("layer 1 weight kept (min-max over seeds), loss with every layer sparse")
print("top_k density       top-k      window   top-k loss  window loss")
for top_k in TOP_K:
    cells = []
    for how, index in (("top-k", 1), ("window", 1)):
        kept = [results[s][how, top_k][index][1] for s in SEEDS]
        cells.append(f"{min(kept):.3f}-{max(kept):.3f}")
    for how in ("top-k", "window"):
        losses = [results[s][how, top_k][3] for s in SEEDS]
        cells.append(f"{min(losses):.2f}-{max(losses):.2f}")
    density = results[0]["top-k", top_k][0]
    print(f"{top_k:>5} {density:>7.3f}  " + "  ".join(cells))
print("dense loss:", ", ".join(f"{dense_loss[s]:.3f}" for s in SEEDS))

# %% [markdown]
# With the window and few blocks, the model predicts worse than a uniform guess would.
# A model that knew it could not find the copy would spread its bets evenly and score
# $\ln 64$. The cell prints, for a window of one block, the loss and the entropy of the
# predictions on the repeated part.

# %% tags=["plot"]
confident = {}  # seed -> (loss, entropy of the predictions), window of 1 block
for seed, model in models.items():
    logits = sparse_logits(model, "window", 1)
    log_p = logits[:, :-1].log_softmax(-1)[repeated]  # (predictions, V)
    entropy = -(log_p.exp() * log_p).sum(-1).mean().item()
    loss = next_token_losses(logits, tokens)[repeated].mean().item()
    confident[seed] = (loss, entropy)
    print(f"seed {seed}: loss {loss:.2f}, entropy {entropy:.2f} nats")

# %% [markdown]
# The entropy is a nat or so below $\ln 64$ while the loss is well above it: the model
# bets on fewer tokens than a uniform guess would, and on the wrong ones. It still
# tries to copy, as it was trained to, but a window of one block reaches 4 to 7 tokens
# back, while the token its induction head needs, the one after the earlier copy, lies 7
# to 31 tokens back: in reach for almost none of the predictions.

# %% [markdown]
# Two more things the table shows.
#
# - **The loss falls toward the dense one slowly.** At a third of the tiles, where the
#   induction layer keeps most of its weight, it is still well above it. Every layer is
#   sparse here, and the model was trained dense: what each layer loses changes what
#   the next one reads, in ways it never saw in training.
#   MoBA and NSA train with the sparsity; DeepSeek-V3.2 trains its selector first and
#   then the model with it.
# - **Layer 0 is different.** Its heads put part of their weight on the previous token
#   (the previous-token half of the induction circuit) and spread much of the rest
#   thinly over the whole past. Their own block alone holds only a quarter or so of it
#   (`top_k` = 0), and no block stands out, so the mean keys keep less of it than of
#   layer 1's. NSA adds a sliding-window branch beside its selected blocks; exercise 1
#   tries its fixed blocks, the first one and the local ones, here.
#
# ## What choosing costs
#
# "As many keys" is not the same work. The window knows its blocks in advance; the mean
# keys must first score every earlier block, one product $q_t \cdot \overline{k}_i$ of
# length $d_k$ per query and block, the length of one query-key product. (Making the
# means adds one pass over the keys, which is small.) The cell counts the products of
# length $d_k$ each way: this page's 64 tokens in blocks of 4 with `top_k` = 2, and
# MoBA's own settings, blocks of 512 over 8,192 tokens and blocks of 4,096 over a
# million, its "top-3" and "top-12" counting the own block.


# %%
def products(T, B, top_k):
    """Query-key products over T tokens in blocks of B, each query reading
    its own block up to itself and top_k earlier blocks; and the products
    that score the earlier blocks."""
    t = torch.arange(T)
    read = (t % B + 1) + B * (t // B).clamp(max=top_k)
    return int(read.sum()), int((t // B).sum())


cost = {}  # (tokens, block, top_k) -> (products read, products scoring)
print(f"{'tokens':>9} {'block':>5} {'top_k':>5} {'read':>14} {'scoring':>11}")
for T_c, B_c, k_c in ((T, BLOCK, 2), (8192, 512, 2), (2**20, 4096, 11)):
    read, scoring = cost[T_c, B_c, k_c] = products(T_c, B_c, k_c)
    print(
        f"{T_c:>9,} {B_c:>5} {k_c:>5} {read:>14,} {scoring:>11,}"
        f"  scoring / read {scoring / read:.1%}"
    )
print(f"dense causal attention over {T} tokens: {T * (T + 1) // 2:,}")

# %% [markdown]
# On this page the scoring adds more than half again to the products the attention
# reads: at this size a window of as many keys is the cheaper choice by that much. The
# scoring grows with $T^2 / B$ and the reading with $T \cdot k B$, so the scores' share
# falls with the block size, to under one per cent at MoBA's 512 and less at 4,096. The
# selector pays off only with large blocks (or, as in NSA, with keys compressed to one
# per block by a small network).
#
# Large blocks have a cost of their own. $q \cdot \overline{k}_i$ is the mean of the
# block's $B$ logits, so one key that matches the query moves its block's score by only
# $1/B$ of its logit. At $B = 4$ that hardly matters; among 512 keys a single match is
# diluted. MoBA is trained with its gate ("MoBA requires continue training of existing
# models to achieve its acceleration benefits. It is not a drop-in sparse attention
# solution", its README says), and NSA learns its compression instead of taking a plain
# mean. This page does
# the opposite: it makes a model trained dense sparse when it runs. That is the setting of
# *training-free* selectors. Quest (Tang et al., 2024) keeps each block's smallest and
# largest key in every channel and scores a block by the largest $q \cdot k$ they allow,
# an upper bound rather than a mean. MInference (Jiang et al., 2024) fixes a sparse
# pattern per head offline and builds each pattern's index from the input when it runs.
#
# <details class="note">
# <summary>Going deeper: NSA's three branches, and DeepSeek's lightning indexer</summary>
#
# **NSA** scores blocks from *compressed* keys, made by "a learnable MLP with intra-block
# position encoding", through a softmax, and sums the scores of the query heads that
# share keys (a GQA group), because "consistent block selection across these heads has
# to be ensured to minimize KV cache loading during decoding". Its model keeps 16 blocks
# of 64, "including fixed activating the 1 initial block and 2 local blocks", beside a
# compressed branch and a sliding window of 512, the three mixed by learned gates.
#
# **DeepSeek-V3.2** selects *tokens*, not blocks. A "lightning indexer" with 64 heads of
# width 128 (`index_n_heads`, `index_head_dim`) computes
# $I_{t,s} = \sum_j w_{t,j} \operatorname{ReLU}(q_{t,j} \cdot k_s)$ for every earlier
# token, and the main attention reads the top 2,048 tokens by that score. One choice
# serves all 128 query heads of a token: DSA runs on MLA's multi-query form, "where each
# latent vector (the key-value entry of MLA) will be shared across all query heads of
# the query token": the token-level twin of NSA's shared choice (the pitfall "Choosing
# per query, computing per tile" below shows why a kernel wants one choice for many
# queries). The indexer is trained to match the dense attention's
# distribution (a KL divergence), first with the model frozen. Its report notes that the
# indexer "still has a complexity of $O(L^2)$", while the main attention's falls to
# $O(Lk)$; it is cheap because it "has a small number of heads and can be implemented in
# FP8".
#
# This page's selector is MoBA's: the plain mean key, per query and per head, on a
# model trained dense, with `top_k` counting the earlier blocks only.
#
# </details>
#
# ## Common pitfalls
#
# **Scoring the own block by its mean key.** The own block's mean includes keys after
# the query. A common mistake lets it compete like the others; then a later token
# changes which blocks an earlier query reads. The cell changes key 13 of the induction
# layer (in block 3) and counts, over the 64 sequences and 2 heads, how often query 12's
# choice changes, with the own block competing and with it always kept.

# %%
changed = k1.clone()
changed[..., 13, :] += 3.0  # a key after query 12, in its own block (3)
upto = torch.arange(N_BLOCKS)[None, :] <= (torch.arange(T) // BLOCK)[:, None]
picks = []
for keys in (k1, changed):
    s = block_scores(q1, keys, BLOCK).masked_fill(~upto, -math.inf)
    best = s.topk(2, dim=-1).indices  # own block competes: 2 in all
    picks.append(
        torch.zeros(s.shape, dtype=torch.bool).scatter(-1, best, True)
    )
moved = (picks[0][..., 12, :] != picks[1][..., 12, :]).any(-1)  # (B, H)
print(f"own block competing: query 12 changes blocks in {int(moved.sum())}")
print(f"of {moved.numel()} (sequence, head) pairs")
fixed = [
    select_blocks(block_scores(q1, x, BLOCK), 1, BLOCK) for x in (k1, changed)
]
leak_fixed = int((fixed[0][..., 12, :] != fixed[1][..., 12, :]).any(-1).sum())
print(f"own block always kept: {leak_fixed} changes")

# %% [markdown]
# The fix is MoBA's: "each token must be routed to its respective current block", and
# the current block is attended with the causal mask.
#
# **Choosing per query, computing per tile.** A kernel that loads tiles of several
# queries must compute the union of their choices. The counts above used tiles of one
# query. With tiles of 4 queries, the share of tiles computed grows:

# %%
for top_k in (1, 2, 4):
    chosen = select_blocks(block_scores(q1, k1, BLOCK), top_k, BLOCK)
    one, four = (selection_density(chosen, BLOCK, block_q=b) for b in (1, 4))
    print(
        f"top_k {top_k}: tiles of 1 query {one:.3f}, of 4 queries {four:.3f}"
    )

# %% [markdown]
# NSA's kernel loads one query position with all the heads of its group, which share
# one choice (its equation 10), for this reason.
#
# **Counting the tiles of a batched call.** `tiled_attention` decides to skip a tile
# once for the whole batch, so a tile is computed if *any* sequence or head chose it.
# Its counters then show almost no saving, where one sequence and head shows the real
# one:

# %%
top2_all = select_blocks(block_scores(q1, k1, BLOCK), 2, BLOCK)  # (B, H, T, n)
v1 = torch.randn(q1.shape, generator=torch.Generator().manual_seed(3))
_, batched = block_sparse_attention(q1, k1, v1, top2_all, BLOCK)
_, alone = block_sparse_attention(
    q1[0, 0], k1[0, 0], v1[0, 0], top2_all[0, 0], BLOCK
)
causal_tiles = int(window_blocks(T, N_BLOCKS, N_BLOCKS, BLOCK).sum())
print(
    f"64 sequences x 2 heads: {batched.tiles_computed} of {causal_tiles} tiles"
)
print(
    f"one sequence and head:   {alone.tiles_computed} of {causal_tiles} tiles"
)

# %% [markdown]
# Count per sequence and head, as a kernel launched per (sequence, head) would compute;
# the density above does.
#
# ## Summary
#
# - A query scores each earlier block by the dot product with its **mean key**, keeps
#   its own block and the best `top_k`, and attends exactly inside them; with every block
#   kept this is causal attention. On tiled attention the unchosen tiles are skipped.
# - On the trained induction model, a third of the tiles chosen this way keeps most of
#   the induction layer's weight, where a window of as many keys keeps little; the loss
#   follows, though a model trained dense loses something whenever it runs sparse.
# - The choice is not free: scoring every earlier block adds one product per block,
#   more than half again the attention's own products at this page's size, under one per
#   cent with MoBA's blocks of 512 or more, whose means in turn dilute a single matching
#   key.
#
# The closing figures as this build computed them: the induction layer's captured weight
# against the density, for every seed.

# %%
print("layer 1 weight kept by density; top-k / window")
print("density " + " ".join(f"{f'seed {s}':>13}" for s in SEEDS))
for top_k in TOP_K:
    pairs = [
        (results[s]["top-k", top_k], results[s]["window", top_k])
        for s in SEEDS
    ]
    cells = [f"{a[1][1]:.3f}/{b[1][1]:.3f}" for a, b in pairs]
    print(
        f"{results[0]['top-k', top_k][0]:>7.3f} "
        + " ".join(f"{c:>13}" for c in cells)
    )

# %% [markdown]
# ## Exercises
#
# **1. NSA's fixed blocks.** NSA always keeps the first block and the blocks just before
# the query's own ("fixed activating the 1 initial block and 2 local blocks"). Keep
# block 0 and the block before the own one, and let the mean keys choose `top_k - 2`
# blocks among the others, so that each query reads as many blocks as with plain
# top-k. Compare layer 0's captured weight with plain top-k, and with the local block
# alone (`top_k - 1` chosen), at `top_k` = 2 and 4, for seed 0. Do the fixed blocks
# help this model's first layer?

# %% tags=["solution"]
weights, qk = dense_queries_and_keys(models[0], tokens)
q0, k0 = qk[0]
scores0 = block_scores(q0, k0, BLOCK)  # (B, H, T, n)
local = window_blocks(T, N_BLOCKS, 1, BLOCK)  # own block and the one before
first = torch.zeros(T, N_BLOCKS, dtype=torch.bool)
first[:, 0] = True  # block 0, for every query
fixed_kept = {}
for top_k in (2, 4):
    for name, fixed, chosen in (
        ("top-k", torch.zeros_like(local), top_k),  # nothing fixed
        ("local", local, top_k - 1),
        ("first + local", local | first, top_k - 2),
    ):
        others = scores0.masked_fill(fixed, -math.inf)  # fixed: not scored
        c = select_blocks(others, chosen, BLOCK) | fixed
        kept = captured_weight(weights[0], c, BLOCK)[..., later].mean().item()
        fixed_kept[top_k, name] = (selection_density(c, BLOCK), kept)
        print(f"top_k {top_k} {name:>13}: density", end=" ")
        print(f"{fixed_kept[top_k, name][0]:.3f}, layer 0 kept {kept:.3f}")
# Not here: at the same density, each fixed block keeps less of layer 0's
# weight than a block the scores would choose. This model, trained dense and
# without them, puts little of its first layer's weight there.

# %% [markdown]
# **2. One choice for both heads.** NSA shares one choice among the query heads that
# share keys: it turns each head's block scores into probabilities with a softmax, and
# sums them over the heads (its equations 8 and 10). Do that for the induction layer of
# seed 0, with `top_k` = 2 and the softmax over each query's earlier blocks, and compare
# the weight kept per head with each head's own choice, and with a sum of the raw
# scores.

# %% tags=["solution"]
scores1 = block_scores(q1, k1, BLOCK)  # (B, H, T, n)
earlier = (
    torch.arange(N_BLOCKS) < (torch.arange(T) // BLOCK)[:, None]
)  # (T, n)
probabilities = scores1.masked_fill(~earlier, -math.inf).softmax(-1)
probabilities = probabilities.nan_to_num(0.0)  # block 0's queries: none
choices = {
    "each head": select_blocks(scores1, 2, BLOCK),
    "raw sum": select_blocks(scores1.sum(1, keepdim=True), 2, BLOCK),
    "NSA's sum": select_blocks(probabilities.sum(1, keepdim=True), 2, BLOCK),
}  # a shared choice is (B, 1, T, n): broadcast over the heads
shared_kept = {}
for name, c in choices.items():
    per_head = captured_weight(weights0[1], c, BLOCK)[..., later].mean((0, 2))
    shared_kept[name] = per_head.tolist()
    print(
        f"{name:>9}: weight kept per head",
        [round(x, 3) for x in per_head.tolist()],
    )
# One shared choice keeps within a few hundredths of what each head's own
# keeps: the two heads of this layer look for the same blocks. Normalizing
# first stops a head whose scores are larger from deciding for both.

# %% [markdown]
# **3. The density by formula.** With $T = 64$ and blocks of 4, query $t$ reads
# $\min(1 + \text{top\_k}, 1 + \lfloor t/4 \rfloor)$ blocks of the $1 + \lfloor t/4 \rfloor$
# causal ones. Compute the density of `top_k` = 2 from that and compare with
# `selection_density`.

# %% tags=["solution"]
read = sum(min(1 + 2, 1 + t // 4) for t in range(64))
causal = sum(1 + t // 4 for t in range(64))
by_formula = read / causal
print(f"{read} of {causal} = {by_formula:.4f}")
computed = selection_density(window_blocks(64, 16, 2, 4), 4)
print(f"selection_density: {computed:.4f}")

# %% [markdown]
# **4. An oracle that picks tokens.** DeepSeek-V3.2 keeps the top keys one by one. Keep,
# for each query of seed 0's induction layer, the $3 \times 4 = 12$ keys with the largest
# dense weights (as many keys as `top_k` = 2 with its own block), and compare the weight
# kept with the blocks chosen by mean key.

# %% tags=["solution"]
w1 = weights0[1]  # (B, H, T, T)
top_tokens = w1.topk(12, dim=-1).values.sum(-1)[..., later].mean().item()
by_mean = select_blocks(block_scores(q1, k1, BLOCK), 2, BLOCK)
blocks = captured_weight(w1, by_mean, BLOCK)[..., later].mean().item()
print(f"12 best keys (an oracle): {top_tokens:.3f}")
print(f"3 blocks by mean key:     {blocks:.3f}")
# The oracle is an upper bound for any selector of 12 keys; a trained indexer
# approaches it at a cost per key, the mean key at a cost per block.

# %% [markdown]
# ## References
#
# - Enzhe Lu et al. [MoBA: Mixture of Block Attention for Long-Context
#   LLMs](https://arxiv.org/abs/2502.13189). 2025; code and technical report:
#   [MoonshotAI/MoBA](https://github.com/MoonshotAI/MoBA). The mean-key gate (its
#   equations 4 to 6), the current block always kept, and the sliding window as a
#   special case; its block sizes (512 and top-3 for the scaling experiments, 4,096 and
#   top-12 at a million tokens, in the technical report) and the README's note that it
#   "requires continue training".
# - Jingyang Yuan et al. [Native Sparse Attention: Hardware-Aligned and Natively
#   Trainable Sparse Attention](https://arxiv.org/abs/2502.11089). 2025; reference code:
#   [fla-org/native-sparse-attention](https://github.com/fla-org/native-sparse-attention).
#   Compressed keys, selection shared in a GQA group, its block counts and window.
# - DeepSeek-AI. [DeepSeek-V3.2-Exp: Boosting Long-Context Efficiency with DeepSeek
#   Sparse Attention](https://github.com/deepseek-ai/DeepSeek-V3.2-Exp). 2025. The
#   lightning indexer (its equations 1 to 3), one choice for all query heads (MLA's
#   multi-query mode), FP8; `index_n_heads` 64, `index_head_dim` 128 and `index_topk`
#   2048 in `inference/config_671B_v3.2.json`.
# - Jiaming Tang, Yilong Zhao, Kan Zhu, Guangxuan Xiao, Baris Kasikci, Song Han.
#   [Quest: Query-Aware Sparsity for Efficient Long-Context LLM
#   Inference](https://arxiv.org/abs/2406.10774). ICML 2024. Blocks scored by the
#   smallest and largest key of each channel, without training.
# - Huiqiang Jiang et al. [MInference 1.0: Accelerating Pre-filling for Long-Context
#   LLMs via Dynamic Sparse Attention](https://arxiv.org/abs/2407.02490). NeurIPS 2024.
#   A sparse pattern per head, its index built from the input, without training.
# - Iz Beltagy, Matthew E. Peters, Arman Cohan. [Longformer: The Long-Document
#   Transformer](https://arxiv.org/abs/2004.05150). 2020. The sliding window.
#
# **Next:** [Speculative decoding](speculative_decoding.md): a drafter guesses, and
# the model checks every guess in one pass.

# %% tags=["measured"]
print(f"training the {len(models)} models took", end=" ")
print(f"{sum(seconds.values()):.1f} s of CPU time")

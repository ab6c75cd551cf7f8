# %% [markdown]
# # Over budget: dropping cache entries by importance
#
# A [KV cache](kv_cache.md) keeps one key and one value per token, per head and per
# layer, and grows with the text. [Serving long contexts](serving_long_contexts.md)
# bounded it by position: a sliding window and a few attention sinks. This page bounds
# it by *importance*: after the prompt, each head keeps $B$ of its entries, the budget,
# and the policy chooses which. Some choose by the attention the entries received
# (H2O, SnapKV, TOVA), some by position, one at random. The page measures them on the
# site's trained induction model, whose answers depend on tokens far back; shows what
# goes wrong when kept keys are numbered again under RoPE; and counts what the scores
# cost, which Quest's page summaries avoid.
#
# It assumes the KV cache, sinks and windows ([Serving long
# contexts](serving_long_contexts.md)), the induction model ([Attention that learned:
# induction heads](induction_heads.md)) and RoPE ([Longer than
# trained](longer_than_trained.md)). Shapes follow the site's
# [notation](../notation.md).
#
# The picture: one head whose query at position $i$ looks mostly at key $i - 5$. Its
# prompt has 12 entries and the budget is 6. Each row is what one policy keeps: a
# coloured cell is kept, a hatched one is dropped. The last row marks the entries the
# next three queries (positions 12 to 14) look at.

# %% tags=["plot"]
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from attn_ref.diagrams import canvas, grid, note
from attn_ref.plotting import figure_to_svg
from attn_ref.serving import (
    decode_mask,
    h2o_keep,
    quest_keep,
    quest_page_scores,
    random_keep,
    sink_window_keep,
    snapkv_keep,
    tova_keep,
)

T_pic, B_pic, LAG = 12, 6, 5
causal = torch.ones(T_pic, T_pic).tril()  # (T, T)
back = torch.eye(T_pic).roll(-LAG, dims=1).tril()  # 1 at key i - 5
weights_pic = 0.3 * causal / causal.sum(-1, keepdim=True) + 0.7 * back
weights_pic = weights_pic / weights_pic.sum(-1, keepdim=True)  # rows sum to 1
kept_pic = {
    "sinks + window": sink_window_keep(T_pic, B_pic, num_sinks=2),
    "random": random_keep((T_pic,), B_pic, torch.Generator().manual_seed(0)),
    "H2O": h2o_keep(weights_pic, B_pic),
    "SnapKV": snapkv_keep(weights_pic, B_pic, window=2, kernel_size=3),
    "TOVA": tova_keep(weights_pic[None], B_pic)[0],
}
needed_pic = torch.zeros(T_pic, dtype=torch.bool)
needed_pic[[i - LAG for i in range(T_pic, T_pic + 3)]] = True
rows = torch.stack([*kept_pic.values(), needed_pic])  # (6, T)
colours = torch.where(needed_pic, 2.5, 0.5).expand_as(rows)  # green, blue
fig, ax = canvas(9.4, 5.4)
grid(ax, colours, 3.2, 0.9, cmap="tab10", vmax=10, mask=rows, cell=0.5,
     row_names=[*kept_pic, "needed next"])  # fmt: skip
for j in range(0, T_pic, 2):
    note(ax, 3.2 + 0.5 * (j + 0.5), 0.5, str(j), fontsize=9)
note(ax, 3.2, 4.5, "entry (position in the prompt)", ha="left", fontsize=10)
listed = "; ".join(
    f"{name}: {[j for j in range(T_pic) if keep[j]]}"
    for name, keep in kept_pic.items()
)
figure_to_svg(
    fig,
    kind="diagram",
    alt=f"Six rows of {T_pic} cells, one per prompt entry. Kept entries: "
    f"{listed}. Last row, the entries the next queries look at: "
    f"{[j for j in range(T_pic) if needed_pic[j]]}, green where kept.",
)

# %% [markdown]
# The entries the next queries need are green wherever a policy kept them. The
# policies keep different sets. The window keeps what is recent; SnapKV keeps what
# the *prompt's* last queries looked at, five positions behind each of them, while a
# later query looks further on. Which guess pays depends on the model and the text:
# the rest of the page measures it on a trained model.
#
# ## Five ways to choose
#
# After a prompt of $T$ tokens, a head's cache holds $T$ entries; the policy keeps
# $B$ and the queries that follow read only those, and the keys of the tokens
# generated after the prompt. Write $a_{ij}$ for the prompt's attention weights
# (query $i$, key $j \le i$), per head.
#
# - **Sinks and window** (StreamingLLM, on [Serving long
#   contexts](serving_long_contexts.md)): the first `num_sinks` entries and the
#   last $B - {}$`num_sinks`.
# - **Random**: $B$ entries drawn uniformly, a baseline that knows nothing.
# - **H2O** (Zhang et al., 2023): the *heavy hitters*, entries with the most
#   attention summed over every query of the prompt, $\sum_i a_{ij}$, and the most
#   recent entries, half the budget each.
# - **SnapKV** (Li et al., 2024): the votes of an *observation window*, the last $w$
#   queries of the prompt, $\sum_{i \ge T - w} a_{ij}$ (positions counted from 0),
#   averaged over a few neighbouring
#   positions, and the window's own entries.
# - **TOVA** (Oren et al., 2024): the weights of the last query, averaged over the
#   layer's heads (as kvpress computes it); one choice for the whole layer.
#
# Each function of `attn_ref.serving` returns a boolean *keep* mask with one row per
# head. On the picture's weights:

# %%
from attn_ref.serving import h2o_keep, snapkv_keep

print("summed attention:", weights_pic.sum(0).numpy().round(2))
print("H2O keeps:   ", h2o_keep(weights_pic, budget=6).int().numpy())
snap = snapkv_keep(weights_pic, budget=6, window=2, kernel_size=3)
print("SnapKV keeps:", snap.int().numpy())

# %% [markdown]
# The summed attention favours early entries: key $j$ is seen by every query from $j$
# on, so the first entries collect from the most queries. H2O keeps the largest sums,
# the first entries, and its recent half. SnapKV keeps its window and the entries
# around those its window's queries looked at, five positions back.
#
# ## A model to evict from
#
# The test needs a model whose next token depends on an entry far back. The induction
# model is one: on text that repeats with a period $p$, its second layer attends from
# the current token to the token after its earlier copy, $p - 1$ positions back, and
# copies it. Here it is the [RoPE version](longer_than_trained.md)
# (`attn_ref.training.RotaryDecoder`), two layers of two heads, RoPE's usual base of
# 10,000, trained on that page's task: periods 8 to 16, sequences of 32, 250 steps,
# from three seeds. RoPE makes the positions of kept entries matter, which the
# pitfalls come back to.

# %%
from attn_ref.training import RotaryDecoder, repeated_tokens, train_induction

torch.set_num_threads(1)  # one thread: results that do not depend on the cores
VOCAB, WIDTH, PERIODS, SEEDS = 64, 64, (8, 16), (0, 1, 2)
models, train_seconds = {}, {}
for seed in SEEDS:
    torch.manual_seed(seed)
    models[seed] = RotaryDecoder(VOCAB, 32, WIDTH, num_layers=2, num_heads=2)
    start = time.process_time()
    train_induction(models[seed], 250, 32, lr=1e-2, periods=PERIODS, seed=seed)
    train_seconds[seed] = time.process_time() - start

# %% [markdown]
# ## Decoding with what was kept
#
# The test: 64 fresh sequences of $T = 64$ tokens. The first $P = 48$ are the prompt,
# run in full; then each head of each layer keeps $B$ of its 48 entries, and the
# model reads the 16 tokens that follow one at a time, each appended to the cache
# (the tokens are given, as in teacher forcing). A prediction counts as right when the
# most likely next token is the true one. The copy each of these tokens needs lies in
# the prompt: one period back, or further.
#
# Decoding step by step with a cut cache is the same computation as one causal pass
# in which the queries after the prompt cannot see the dropped entries.
# `decode_mask` builds that mask from a keep mask; `RotaryDecoder` takes one mask per
# layer. (The test suite checks the two against each other, in float64, token by
# token.) Here a prompt of 4 entries keeps entries 0 and 2, and two tokens follow:
# their rows, the last two, do not see entries 1 and 3.

# %%
print(decode_mask(torch.tensor([True, False, True, False]), 6).int())

# %% [markdown]
# The cell below measures the full cache, then every policy at budgets from 4 to 32
# entries of 48: sinks and window with 4 sinks, StreamingLLM's number; H2O with half
# the budget recent; SnapKV with a window of 4 and a pooling of 5, SnapKV's kernel.

# %% tags=["check"]
torch.set_grad_enabled(False)  # from here on, inference only
P, T, BUDGETS = 48, 64, (4, 8, 12, 16, 24, 32)
g = torch.Generator().manual_seed(1000)
tokens, periods = repeated_tokens(64, T, VOCAB, PERIODS, g)  # (B, T), (B,)


def accuracy(model, keeps, positions=None):
    """Share of right next tokens after the prompt, each layer's cache cut."""
    masks = [decode_mask(keep, T) for keep in keeps]  # per layer, (B, H, T, T)
    logits, _ = model(tokens, masks, positions)
    guessed = logits[:, P : T - 1].argmax(-1)  # (B, T - 1 - P)
    return (guessed == tokens[:, P + 1 :]).float().mean().item()


def policies(weights, budget):
    """Each policy's keep mask, per layer: name -> [(B, H, P), ...]."""
    shape = weights[0].shape[:-1]  # (B, H, P)
    draw = torch.Generator().manual_seed(budget)
    return {
        "sinks+window": [sink_window_keep(P, budget)] * 2,
        "random": [random_keep(shape, budget, draw) for _ in weights],
        "H2O": [h2o_keep(w, budget) for w in weights],
        "SnapKV": [snapkv_keep(w, budget, min(4, budget)) for w in weights],
        "TOVA": [tova_keep(w, budget) for w in weights],
    }


full_keep = [torch.ones(64, 2, P, dtype=torch.bool)] * 2
results = {}  # seed -> {"full": accuracy, (policy, budget): accuracy}
for seed, model in models.items():
    _, prompt_weights = model(tokens[:, :P])  # per layer, (B, H, P, P)
    results[seed] = {"full": accuracy(model, full_keep)}
    for budget in BUDGETS:
        for name, keeps in policies(prompt_weights, budget).items():
            results[seed][name, budget] = accuracy(model, keeps)
NAMES = list(policies(prompt_weights, 4))
print("full cache:", ", ".join(f"{results[s]['full']:.3f}" for s in SEEDS))
print("accuracy, mean over seeds 0-2 (lowest seed in brackets)")
print(f"{'B':>3}" + "".join(f"{name:>15}" for name in NAMES))
for budget in BUDGETS:
    cells = []
    for name in NAMES:
        runs = [results[s][name, budget] for s in SEEDS]
        cells.append(f"{np.mean(runs):.3f} ({min(runs):.3f})")
    print(f"{budget:>3}" + "".join(f"{c:>15}" for c in cells))

# %% [markdown]
# The plot shows the table, one line per policy: the mean over the seeds, with each
# seed a dot. The grey line is the full cache.

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(4.5, 3.2), layout="constrained")
styles = ["o-", "s--", "^-", "v-.", "D:"]
for colour, (name, style) in enumerate(zip(NAMES, styles, strict=True)):
    runs = np.array([[results[s][name, b] for b in BUDGETS] for s in SEEDS])
    ax.plot(BUDGETS, runs.mean(0), style, color=f"C{colour}", ms=4, label=name)
    for run in runs:
        ax.plot(BUDGETS, run, ".", color=f"C{colour}", ms=2)
full = np.mean([results[s]["full"] for s in SEEDS])
ax.axhline(full, color="grey", linestyle=":", label="full cache")
ax.set_xlabel(f"entries kept per head, of {P}")
ax.set_ylabel("next-token accuracy")
ax.set_ylim(0, 1)
ax.legend(fontsize=8, loc="lower right")
figure_to_svg(
    fig,
    alt="Next-token accuracy against the budget, one line per policy. "
    + "; ".join(
        f"{name}: "
        + ", ".join(
            f"{np.mean([results[s][name, b] for s in SEEDS]):.2f}"
            for b in BUDGETS
        )
        for name in NAMES
    )
    + f" at budgets {', '.join(map(str, BUDGETS))}; full cache {full:.2f}.",
)

# %% [markdown]
# Three things show, on every seed (the tests check them on each, with margin):
#
# - At a third of the prompt (16 entries), **sinks and window** come close to the
#   full cache, well ahead of every score. The copy this model needs is the most
#   recent one, at most a period (16) back, and the window's 12 recent entries
#   hold it for all but the first few predictions after the prompt.
# - **The scores keep the past's choices.** H2O's sums favour early entries, seen by
#   more queries (as in the toy above); it catches up only as its recent half grows.
#   SnapKV keeps what its window's queries looked at, about a period behind
#   *them*, while the next queries need entries a few positions further on. TOVA
#   asks only the last query of the prompt, and falls below random at every budget
#   from 8 up: one query's weights say little about what the next ones will read.
# - At 4 entries, **SnapKV's window alone** (the last 4) beats the window with 4
#   sinks: the sinks take the whole budget from the recent entries this model
#   copies from. Sinks help a model that parks attention on its first tokens, as
#   large trained models do; here they cost.
#
# What a policy needs is a guess of what *later* queries will look at. A question
# placed at the end of a prompt (SnapKV's setting: the prompt's last tokens ask what
# the answer needs) makes the window's guess good; a copying task whose next queries
# move on makes it poor. Exercise 1 widens SnapKV's pooling to reach further.
#
# ## Common pitfalls
#
# **Numbering the kept entries again.** After eviction a cache holds $B$ entries in
# slots $0, \dots, B - 1$. A tempting shortcut gives the next token the cache's
# length as its position, $B$, as if the dropped entries had never existed. Under RoPE
# the kept keys were rotated at their *original* positions when they were cached, so
# the next query, rotated at $B$ instead of $P$, sees every kept key $P - B$
# positions closer than it is. The cell gives the tokens after the prompt positions
# $B, B + 1, \dots$ (the prompt keeps its own), with sinks and window at $B = 16$.

# %%
budget = 16
window_keep = [sink_window_keep(P, budget)] * 2
renumbered = torch.cat([torch.arange(P), torch.arange(P, T) - (P - budget)])
for seed, model in models.items():
    right = accuracy(model, window_keep)
    wrong = accuracy(model, window_keep, positions=renumbered)
    print(f"seed {seed}: true positions {right:.3f}, renumbered {wrong:.3f}")

# %% [markdown]
# The fix is to count positions in the text, not in the cache: token $t$ keeps
# position $t$, whatever was dropped before it, and the cached keys need no change.
# StreamingLLM does the opposite on purpose: it caches keys *before* rotation and
# rotates them at their slot in the cache, so that a text longer than the model's
# training length never shows it a larger distance. Both are consistent; mixing
# them, keys rotated at one numbering and queries at another, is the bug. Exercise 2
# checks that a cached key can be moved from one numbering to the other by one more
# rotation.
#
# ## What the scores cost
#
# Every score above is made of attention *weights*. Tiled attention, as in
# [Attention without the T×T matrix](efficient_attention.md), and the fused kernels
# built on it, never write the weights out: they keep a running maximum and sum per
# query, and return outputs. A policy that needs weights needs a second computation
# of the scores it wants. For one head with $d_k = 128$:
#
# - **H2O** sums every column of the prompt's $T \times T$ weights: the whole score
#   matrix again, $T^2 d_k$ multiply-adds (half of them under the causal mask), or a
#   kernel that accumulates column sums as it goes.
# - **SnapKV** needs the weights of its $w$ window queries only: $w T d_k$.
# - **TOVA**, run at every decoding step, needs the current query's weights over
#   the cache, $B d_k$ per step, which a fused decoding kernel does not return.
# - **Quest** (Tang et al., 2024) drops nothing and scores no weights. The cache is
#   cut into pages of $n$ keys (the pages of a [paged cache](serving_batches.md)),
#   each summarised by its smallest and largest value in every channel, $m_c$ and
#   $M_c$. A query bounds every key of a page at once,
#   $q \cdot k \le \sum_c \max(q_c m_c, q_c M_c)$, and reads only the pages with the
#   highest bounds: $2 T d_k / n$ multiply-adds for the bounds, per query.
#
# The cell counts them for a prompt of 32,768 tokens, with a window of 32 (SnapKV's
# default) and pages of 16.

# %%
T_long, d_k, w, page = 32_768, 128, 32, 16
costs = {
    "attention itself (causal)": T_long * (T_long + 1) // 2 * d_k * 2,
    "H2O: all weights again": T_long * (T_long + 1) // 2 * d_k,
    "SnapKV: the window's weights": w * T_long * d_k,
    "Quest: bounds, per query": 2 * (T_long // page) * d_k,
}
for name, count in costs.items():
    print(f"{name:<30} {count:>18,} multiply-adds")

# %% [markdown]
# H2O's scores cost half as much as the prompt's attention again (the $QK^\top$
# half of it); SnapKV's are a small fraction; Quest's cost per query what reading
# $2 / n$ of the keys costs. Quest's bound is an upper bound, so a page with one key
# that matches the query well is found, where a page's mean key (as on [learned
# sparse attention](sparse_attention.md)) would dilute it. The check: on random
# queries and keys, the bound is at least the best $q \cdot k$ of every page; and
# reading two pages of eight, a quarter of the keys, how many queries find their
# best key.

# %% tags=["check"]
g = torch.Generator().manual_seed(5)
q_r, k_r = torch.randn(8, 16, generator=g), torch.randn(64, 16, generator=g)
bounds = quest_page_scores(q_r, k_r, page_size=8)  # (8 queries, 8 pages)
best = (q_r @ k_r.T).view(8, 8, 8).amax(-1)  # (8 queries, 8 pages)
print(f"bound - best q.k: smallest {(bounds - best).min():.3f}")
read = quest_keep(q_r, k_r, budget=16, page_size=8)  # (8, 64): 2 pages each
top_key = (q_r @ k_r.T).argmax(-1)  # each query's best key
found = read.gather(-1, top_key[:, None]).float().mean()
print(f"queries whose best key is on a page read: {found:.0%}")

# %% [markdown]
# ## Summary
#
# - A policy keeps $B$ entries per head after the prompt; decoding with them equals
#   one causal pass with the dropped entries masked from the later queries.
# - On the induction model, whose next token depends on the most recent copy, sinks
#   and a window beat every attention score at a third of the prompt: the scores
#   keep what the prompt's queries looked at, not what the next ones will.
# - Positions belong to the text: a kept key keeps its rotation, and the next token
#   its true position.
# - The scores need attention weights, which fused kernels do not write; Quest's
#   page bounds need none, and keep every entry.
#
# ## Exercises
#
# **1. A wider pooling.** The next queries need entries a few positions after those
# SnapKV's window looked at. Measure SnapKV at $B = 16$ on seed 0 with pooling
# kernels of 1 (no pooling), 5 and 9.

# %% tags=["solution"]
model = models[0]
_, prompt_weights = model(tokens[:, :P])
pooled = {}
for kernel in (1, 5, 9):
    keeps = [snapkv_keep(w, 16, 4, kernel_size=kernel) for w in prompt_weights]
    pooled[kernel] = accuracy(model, keeps)
    print(f"kernel {kernel}: accuracy {pooled[kernel]:.3f}")
# A wider kernel keeps more of each voted entry's neighbours, the ones the
# next queries look at.

# %% [markdown]
# **2. Moving a key to another numbering.** A key cached rotated at position $j$ can
# be given position $s$ by rotating it once more by $s - j$. Check it with
# `attn_ref.positional.apply_rotary` on a random key, $j = 40$, $s = 7$.

# %% tags=["solution"]
from attn_ref.positional import apply_rotary

key = torch.randn(1, 32, generator=torch.Generator().manual_seed(2))
at_j = apply_rotary(key, torch.tensor([40]))
rerotated = apply_rotary(at_j, torch.tensor([7 - 40]))
direct = apply_rotary(key, torch.tensor([7]))
gap = (rerotated - direct).abs().max()
print(f"largest |rotated again - rotated at 7|: {gap:.1e}")

# %% [markdown]
# **3. TOVA per head.** Keep, in each head, the entries its own last query weighs
# most (`keep_top` on `weights[..., -1, :]`), and compare with TOVA's shared choice at
# $B = 8$ and $16$, on seed 0.

# %% tags=["solution"]
from attn_ref.serving import keep_top

for budget in (8, 16):
    own = [keep_top(w[..., -1, :], budget) for w in prompt_weights]
    shared = [tova_keep(w, budget) for w in prompt_weights]
    print(
        f"B = {budget}: shared {accuracy(model, shared):.3f},",
        f"per head {accuracy(model, own):.3f}",
    )

# %% [markdown]
# ## References
#
# - Zhenyu Zhang et al. [H₂O: Heavy-Hitter Oracle for Efficient Generative
#   Inference of Large Language Models](https://arxiv.org/abs/2306.14048).
#   NeurIPS 2023. Heavy hitters by accumulated attention, beside recent tokens; Meta's
#   [llama-recipes H2O
#   example](https://github.com/meta-llama/llama-recipes/tree/main/recipes/experimental/long_context/H2O)
#   splits the cache evenly between the two.
# - Yuhong Li et al. [SnapKV: LLM Knows What You are Looking for Before
#   Generation](https://arxiv.org/abs/2404.14469). 2024. The observation window and
#   the pooling; its code,
#   [FasterDecoding/SnapKV](https://github.com/FasterDecoding/SnapKV), sums the
#   window's weights, pools with `avg_pool1d` (kernel 5) and keeps the window, 32
#   queries by default.
# - Matanel Oren, Michael Hassid, Nir Yarden, Yossi Adi, Roy Schwartz. [Transformers
#   are Multi-State RNNs](https://arxiv.org/abs/2401.06104). 2024. TOVA: drop the
#   entry the current query weighs least. kvpress's `TOVAPress`, reviewed by one of
#   its authors, averages the last query's weights over the heads, as here.
# - Jiaming Tang et al. [Quest: Query-Aware Sparsity for Efficient Long-Context LLM
#   Inference](https://arxiv.org/abs/2406.10774). ICML 2024. Per-page minimum and
#   maximum keys, the upper bound, the top pages per query.
# - Guangxuan Xiao et al. [Efficient Streaming Language Models with Attention
#   Sinks](https://arxiv.org/abs/2309.17453). 2023. Sinks and a window, and positions
#   given within the cache.
# - NVIDIA. [kvpress](https://github.com/NVIDIA/kvpress). Reference code for these
#   policies and many more, applied once after the prompt as on this page
#   (`StreamingLLMPress`, `RandomPress`, `SnapKVPress`, `TOVAPress`, and
#   `ObservedAttentionPress`, "related to H2O").
#
# Beside it: [Attention across processes](context_parallel.md) splits one long
# context over several devices instead of dropping any of it.
#
# Next: [Attention bugs seen in the wild](../practice/bugs.md), the mistakes these
# pages warn of, as exercises.

# %% tags=["measured"]
print(f"training the {len(models)} models took", end=" ")
print(f"{sum(train_seconds.values()):.1f} s of CPU time")

# %% [markdown]
# # Speculative decoding — verify, roll back, trees
#
# A large model writes one token per forward pass, and each pass spends most of
# its time reading the model's weights and cache, not computing. So a pass over a
# few more queries costs little more than a pass over one. Speculative decoding
# turns that into speed: a cheap *drafter* guesses the next $k$ tokens, and the
# model, the *target*, checks all $k$ guesses in one forward pass. Every guess it
# agrees with is a token it did not have to produce on its own. ([Leviathan et
# al.](https://arxiv.org/abs/2211.17192) found decoding "often not bottlenecked on
# arithmetic operations, but rather on memory bandwidth and communication"; [Chen et
# al.](https://arxiv.org/abs/2302.01318), that scoring a short continuation in
# parallel takes about as long as sampling one token.)
#
# This page builds it on the site's trained character model and paged cache, and
# checks its three promises: greedy decoding writes the same
# text, sampling draws from the same distribution, and the cache ends each round
# holding exactly the text. Then it measures what it buys on this machine, and
# verifies a *tree* of guesses in one pass.
#
# It assumes the KV cache and its bottom-right causal mask ([Generating text with a
# KV cache](kv_cache.md)), chunked prefill and the paged cache ([Serving
# attention](serving_batches.md)), and the character model of [Attention on real
# text](attention_on_text.md), which is the target here. The section on recurrent
# states uses [the delta rule](delta_rule.md). Shapes follow the
# [notation table](../notation.md). The code runs top to bottom, as the downloadable
# notebook does, folded blocks included (the first holds the imports, the models'
# recipe and the page's texts).
#
# Here is one round of the page's decoding, the first that keeps some guesses and
# rejects one. The target has cached the text but its last character. A drafter
# guesses 4 characters. The target runs one *chunk* of 5 queries (the last
# character and the guesses) over its cache: query $i$ sees the cache and the
# chunk's keys up to its own (coloured; hatched: not seen), and predicts the next
# character. On the right, the prediction and whether it matches the next guess;
# the round keeps the guesses up to the first mismatch, then adds the target's own
# character. The rejected guesses' keys (framed) are dropped from the cache.

# %% tags=["plot"]
import copy
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from attn_ref.compression import delta_rule_recurrent
from attn_ref.diagrams import Box, canvas, grid, note, outline
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.masks import causal_mask
from attn_ref.measure import cpu_time_ms
from attn_ref.plotting import figure_to_svg
from attn_ref.serving import (
    ModelDrafter,
    NGramDrafter,
    PagedKVCache,
    accept_greedy,
    accept_sampled,
    accept_tree_greedy,
    draft_tree,
    keep_path,
    merge_partials,
    residual_distribution,
    speculative_generate,
    tree_ancestor_mask,
    verify_forward,
)
from attn_ref.training import (
    ALPHABET,
    CharTransformer,
    decode,
    encode,
    load_corpus,
    train_char_model,
    windows,
)

torch.set_num_threads(1)  # results that do not depend on the core count
T = 32  # the character model's context
RECIPE = dict(steps=550, batch_size=32, lr=3e-2, warmup=30)
V = len(ALPHABET)
started = time.process_time()
corpus = load_corpus()
train_ids, held_ids = encode(corpus.train), encode(corpus.held_out)


def train_target(seed):
    """The character model of Attention on real text, with its recipe."""
    torch.manual_seed(seed)
    model = CharTransformer(
        context_length=T, embed_dim=32, num_layers=2, num_heads=4
    )
    train_char_model(model, train_ids, seed=seed, **RECIPE)
    return model


def new_pool(model, blocks=8):
    """An empty paged cache for one request of up to 32 positions."""
    attn = model.blocks[0].attn
    return PagedKVCache(
        len(model.blocks), blocks, 4, attn.num_kv_heads, attn.head_dim
    )


def show(ids):
    """Characters as a picture shows them: the space and newline visible."""
    return ["␣" if c == " " else "⏎" if c == "\n" else c for c in decode(ids)]


target = train_target(0)
ngram = NGramDrafter(train_ids, vocab_size=V, order=3)
g = torch.Generator().manual_seed(0)
starts = torch.randint(0, len(held_ids) - T, (8,), generator=g).tolist()
prompts = [held_ids[s : s + 8] for s in starts]  # 8 characters each
NEW = T - 8  # characters each prompt gets: the model's whole context


def first_partial_round(prompt, run, k):
    """The text before the run's first round of k guesses that keeps some of
    them and rejects one, or None if it has no such round."""
    emitted = 0
    for drafted, a in zip(run.drafted, run.accepted, strict=True):
        if 0 < a < drafted == k:
            return torch.cat([prompt, run.tokens[:emitted]])
        emitted += a + 1
    return None


k_pic = 4
for p in prompts:  # the picture's text: the first such round of the texts
    run = speculative_generate(target, ngram, new_pool(target), p, NEW, k_pic)
    context = first_partial_round(p, run, k_pic)
    if context is not None:
        break
else:
    raise ValueError(f"no round of {k_pic} guesses keeps some and rejects one")
pic_pool = new_pool(target)
with torch.no_grad():
    verify_forward(target, pic_pool, "pic", context[:-1])
    pic_draft, _ = ngram.propose(context, k_pic)
    chunk = torch.cat([context[-1:], pic_draft])  # (k + 1,) queries
    pic_logits = verify_forward(target, pic_pool, "pic", chunk)
pic_a, pic_token = accept_greedy(pic_logits, pic_draft)
S0 = len(context) - 1  # cached positions
L = k_pic + 1
seen = causal_mask(L, S0 + L, lower_right=True)  # (L, S): bottom-right
shown_cache = 7  # the last 7 cached keys are drawn
keys = torch.cat([context[S0 - shown_cache : S0], chunk])
roles = torch.tensor([0.5] * shown_cache + [1.5] * L)  # cache, chunk
cell = 0.55
fig, ax = canvas(10, 5.6)
box = grid(
    ax,
    roles.expand(L, -1),
    1.3,
    1.3,
    cmap="tab10",
    vmax=10,
    mask=seen[:, -len(keys) :],
    cell=cell,
)
for j, ch in enumerate(show(keys)):
    note(ax, box.x + cell * (j + 0.5), 1.0, ch, fontsize=10)
note(
    ax, box.x + cell * shown_cache / 2, 0.45, f"cache ({S0} keys)", fontsize=10
)
note(ax, box.x + cell * (shown_cache + L / 2), 0.45, "chunk", fontsize=10)
best = pic_logits.argmax(dim=-1)
right = box.x + box.width + 0.3
for i, ch in enumerate(show(chunk)):
    y = box.y + cell * (i + 0.5)
    note(ax, 0.9, y, ch, fontsize=10)
    if i <= pic_a:  # the rows after the first wrong guess are thrown away
        mark = "✓" if i < pic_a else "✗"
        note(ax, right, y, f"→ {show(best[i : i + 1])[0]} {mark}", ha="left")
note(ax, 0.9, box.y - 0.3, "query", fontsize=9)
note(ax, right, box.y - 0.3, "target", ha="left", fontsize=9)
rejected = k_pic - pic_a
first = shown_cache + 1 + pic_a  # the first rejected guess's column
frame = Box(box.x + cell * first, box.y, cell * rejected, box.height)
outline(ax, frame, width=1.5, style="--")
guess_text = "".join(show(pic_draft[:pic_a]))
said = show([pic_token])[0]
below = box.y + box.height
kept_note = f"kept: '{guess_text}' and the target's '{said}'"
note(ax, 0.3, below + 0.6, kept_note, ha="left", fontsize=10)
dropped_note = f"dropped: the keys of {rejected} rejected guesses (framed)"
note(ax, 0.3, below + 1.2, dropped_note, ha="left", fontsize=10)
figure_to_svg(
    fig,
    alt=f"A chunk of {L} queries (the last character and {k_pic} guesses) "
    f"over a cache of {S0} keys: each query sees every cached key and the "
    "chunk's keys up to its own. Beside each query, the target's predicted "
    f"character: it agrees with the guesses before guess {pic_a + 1}, not "
    f"with guess {pic_a + 1}; the round keeps {pic_a} of them and the "
    f"target's character, and the columns of the {rejected} rejected "
    "guesses' keys are framed, to be dropped.",
)

# %% [markdown]
# The guesses the target agreed with cost it nothing extra: it checked them in the
# pass it had to run anyway to produce its next character. When the drafter is
# right, one pass yields several characters; when it is wrong, the pass still yields
# the one character the target would have written.
#
# ## The target and two drafters
#
# The target is [the character model](attention_on_text.md): two blocks of width 32
# with four heads, a context of 32 characters, trained on Python's documentation with
# that page's recipe and seed, in the folded cell above. The page's texts are 8
# pieces of its held-out text, 8 characters each; each is continued for 24
# characters, filling the model's context.
#
# A drafter must be much cheaper than the target, and often right. Two kinds:
#
# - `NGramDrafter` counts every run of three characters in the training text and
#   guesses the most frequent continuation of the last two. It runs no model.
# - `ModelDrafter` runs a smaller model with its own paged cache: one block of
#   width 16 with two heads, trained on the same text for 200 steps.


# %%
def train_drafter(seed):
    torch.manual_seed(seed)
    small = CharTransformer(T, embed_dim=16, num_layers=1, num_heads=2)
    recipe = dict(steps=200, batch_size=32, lr=3e-2, warmup=30)
    train_char_model(small, train_ids, seed=seed, **recipe)
    return small


small = train_drafter(0)
sizes = [sum(p.numel() for p in m.parameters()) for m in (target, small)]
print(f"target: {sizes[0]:,} parameters; small model: {sizes[1]:,}")
print(f"n-gram table: {ngram.counts.numel():,} counts")

# %% [markdown]
# How often does each drafter guess the target's greedy choice? The folded cell
# compares their argmax with the target's at every position of the held-out text,
# each reading the same 32-character windows: that is how often a single guess
# would be kept, if the drafter read the true text.

# %% tags=["check"]
held = windows(held_ids, T)  # (n, 32)
with torch.no_grad():
    target_best = target(held)[0].argmax(dim=-1)  # (n, 32)
    small_best = small(held)[0].argmax(dim=-1)
# the n-gram's guess at position t reads characters t - 1 and t
pairs = held[:, :-1] * V + held[:, 1:]  # (n, 31)
table_best = ngram.counts.view(V * V, V).argmax(dim=-1)[pairs]  # (n, 31)
agreement = {
    "n-gram": (table_best == target_best[:, 1:]).double().mean().item(),
    "small model": (small_best == target_best).double().mean().item(),
}
for name, share in agreement.items():
    print(f"{name:>11} guesses the target's character {share:.0%} of the time")

# %% [markdown]
# ## One pass checks k guesses
#
# `verify_forward` runs the target on new tokens of a request in the paged cache:
# it reserves their slots, writes their keys and values, and attends each new query
# to the whole cache and to the new keys at or before its own position. That is
# [chunked prefill](serving_batches.md#chunked-prefill), with the chunk's causal mask
# aligned to the bottom-right corner. Here the picture's text fills the cache, all
# but its last character, and a chunk of five characters follows: that last one and
# four guesses.

# %%
text = context  # the picture's text
pool = new_pool(target)
with torch.no_grad():
    verify_forward(target, pool, "a", text[:-1])  # cache all but the last
    draft, _ = ngram.propose(text, k=4)
    logits = verify_forward(target, pool, "a", torch.cat([text[-1:], draft]))
print("text:", repr(decode(text)), " guesses:", repr(decode(draft)))
print(
    "logits",
    tuple(logits.shape),
    "from one pass;",
    "cache now",
    pool.lengths["a"],
    "positions",
)
print(causal_mask(5, pool.lengths["a"], lower_right=True).int().numpy())

# %% [markdown]
# Row $i$ of the logits is the target's prediction after the text and the first $i$
# guesses: the same numbers that five separate one-token passes would give, up to
# float rounding. The folded cell checks it against the target run on each prefix
# of the text from scratch, without a cache.

# %% tags=["check"]
with torch.no_grad():
    full = torch.cat([text, draft])
    one_by_one = torch.stack(
        [target(full[None, : len(text) + i])[0][0, -1] for i in range(5)]
    )
chunk_gap = (logits - one_by_one).abs().max().item()
print(f"largest |chunk - one prefix at a time| logit: {chunk_gap:.1e}")

# %% [markdown]
# ## Greedy: keep the guesses the target would have written
#
# `accept_greedy` compares each guess with the target's argmax at the position
# before it. It keeps the guesses up to the first disagreement, and adds the target's
# argmax there: a correction if a guess was wrong, a *bonus* token if all $k$ were
# right. Every character kept is one the target chose itself, so the text is the
# target's greedy text. `speculative_generate` runs the rounds; with $k = 0$ it is
# plain decoding, one token per pass. Below, both decode from the prompt the
# picture's text began with, its first 8 characters.

# %%
a, token = accept_greedy(logits, draft)
print("target's argmax:", repr(decode(logits.argmax(dim=-1))))
print(f"kept {a} of 4 guesses, then {decode([token])!r}")

prompt = text[:8]
plain = speculative_generate(target, ngram, new_pool(target), prompt, NEW, k=0)
fast = speculative_generate(target, ngram, new_pool(target), prompt, NEW, k=4)
print("plain:      ", repr(decode(plain.tokens)))
print("speculative:", repr(decode(fast.tokens)))
print(
    f"target passes: {plain.target_forwards} plain,",
    f"{fast.target_forwards} speculative",
)
print("guesses kept per round:", fast.accepted)

# %% [markdown]
# Same characters, in fewer passes. Always? In exact arithmetic, yes. In float32,
# the chunk's logits and a one-token pass's differ in their last bits (sums added
# in another order), and an argmax could flip where the two best logits nearly tie.
# The folded cell decodes all 8 texts with $k$ = 1, 2, 4 and 8 and compares them
# with plain decoding. It prints the smallest gap between the two best logits over
# every step of plain decoding, and the largest difference between the two ways'
# logits for one position: while the gap is more than twice the difference, no
# argmax can flip.

# %% tags=["check"]
KS = (1, 2, 4, 8)
drafters = {  # a fresh drafter for each text
    "n-gram": lambda: ngram,
    "small model": lambda: ModelDrafter(small, new_pool(small)),
}


def decode_texts(make, k, temperature=None, generator=None):
    """The 8 texts, each continued with a fresh drafter from make()."""
    return [
        speculative_generate(
            target,
            make(),
            new_pool(target),
            p,
            NEW,
            k,
            temperature=temperature,
            generator=generator,
        )
        for p in prompts
    ]


plains = decode_texts(lambda: ngram, 0)
runs = {  # (drafter, k) -> one SpeculativeResult per prompt
    (name, k): decode_texts(make, k)
    for name, make in drafters.items()
    for k in KS
}
same = sum(
    torch.equal(r.tokens, base.tokens)
    for results in runs.values()
    for r, base in zip(results, plains, strict=True)
)
top2 = torch.cat([base.logits for base in plains]).topk(2, dim=-1).values
gap = (top2[:, 0] - top2[:, 1]).min().item()
moved = max(
    (r.logits - base.logits).abs().max().item()
    for results in runs.values()
    for r, base in zip(results, plains, strict=True)
    if torch.equal(r.tokens, base.tokens)
)
print(f"identical texts: {same} of {len(runs) * len(prompts)}")
print(f"smallest gap between the two best logits: {gap:.1e}")
print(f"largest logit difference, speculative - plain: {moved:.1e}")

# %% [markdown]
# ## Rolling back the cache
#
# The chunk wrote the keys and values of every guess into the cache, the rejected
# ones too. Before the next round they must go: a query of the next round would see
# them as part of the text. A KV cache holds one slot per position, so this is a
# truncation. With the text's last character left out (the next round's chunk
# starts with it), the target's cache ends each round with $n + a$ positions, where
# $n$ was the text's length before the round: the $k - a$ rejected guesses are
# dropped. `PagedKVCache.truncate` gives back a block once no position in it is used.

# %%
print("before:", pool.lengths["a"], "positions,", pool.num_free, "blocks free")
pool.truncate("a", len(text) + a)
print("after: ", pool.lengths["a"], "positions,", pool.num_free, "blocks free")

# %% [markdown]
# Is the truncated cache the cache of the text? The folded cell builds the cache of
# the same text from scratch, one character at a time, and compares every key and
# value of every layer.

# %% tags=["check"]
kept = torch.cat([text, draft[:a]])  # the text, as the cache should hold it
fresh = new_pool(target)
with torch.no_grad():
    for i in range(len(kept)):
        verify_forward(target, fresh, "a", kept[i : i + 1])
cache_gap = max(
    (mine - theirs).abs().max().item()
    for layer in range(len(target.blocks))
    for mine, theirs in zip(
        pool.gather(layer, "a"), fresh.gather(layer, "a"), strict=True
    )
)
print(
    f"positions: {pool.lengths['a']} and {fresh.lengths['a']}; "
    f"largest |key or value difference|: {cache_gap:.1e}"
)

# %% [markdown]
# The drafter's own cache rolls back too, by its own count. It ran the text's last
# character and the first $k - 1$ guesses (the last guess is never run): it drops
# $k - 1 - a$ of them, one fewer than the target, and after a round that kept all
# $k$ it lacks the last guess. `ModelDrafter.rollback` keeps the positions that are
# still the text's; the next `propose` first runs what its cache lacks. Get that
# count wrong by two and the drafter falls further behind the text at every
# rejection: that happened in mlxcel, and the
# [bugs page](../practice/bugs.md#a-draft-cache-rewound-two-entries-too-far)
# reproduces it.
#
# ## A state that cannot be trimmed
#
# A layer with a recurrent state, such as the delta rule of
# [A state that corrects itself](delta_rule.md), has no slot per position to drop.
# Its state after the chunk is one $d_k \times d_v$ matrix into which every guess,
# the rejected ones too, has been written. A pull request to mlx-lm,
# [#1486](https://github.com/ml-explore/mlx-lm/pull/1486), puts it for hybrid
# models such as Qwen3-Next: their recurrent state "has no valid `trim()`", since
# "a multi-token draft advances the recurrence and there is no way to undo it by
# truncation". The fix is a *checkpoint*: keep the state from before the chunk,
# and after the verdict, run the kept tokens through the recurrence again from it.
# Its author's "capture-and-replay rollback" (in the thread of
# [#1456](https://github.com/ml-explore/mlx-lm/pull/1456)) keeps the chunk's
# recurrence inputs with the state, so the replay needs no pass through the layers
# below.
#
# One delta-rule head, its keys of unit length: a state that holds 20 tokens of
# text, then a chunk of 5 (the text's last token, not yet in the state, and 4
# guesses) of which the first 3 are kept: the last token and 2 guesses.

# %%
g = torch.Generator().manual_seed(1)
d_k = 8
query, key = torch.randn(2, 25, d_k, generator=g)
key = key / key.norm(dim=-1, keepdim=True)  # unit keys, as DeltaNet's
value = torch.randn(25, d_k, generator=g)
beta = torch.rand(25, generator=g)


def state_after(start, stop, state=None):  # tokens start .. stop - 1
    s = slice(start, stop)
    q, k, v, b = query[s], key[s], value[s], beta[s]
    return delta_rule_recurrent(q, k, v, b, initial_state=state)[1]


before = state_after(0, 20)  # the state after the text: the checkpoint
after_chunk = state_after(20, 25, before)  # the verify pass writes all 5
truth = state_after(0, 23)  # the state of the text plus the 3 kept tokens
replayed = state_after(20, 23, before)  # restore the checkpoint, replay 3
state_gap = (after_chunk.state - truth.state).abs().max()
print(
    f"state after the chunk vs the text's: largest difference {state_gap:.2f}"
)
bitwise = torch.equal(replayed.state, truth.state)
print("checkpoint + replay gives the text's state bit for bit:", bitwise)
print(f"checkpoint: {before.state.numel()} numbers, however long the text")

# %% [markdown]
# Keeping the state the chunk left is wrong: it holds two tokens the text does not
# have. The replay runs the same operations, in the same order, on the same numbers
# as decoding the text token by token, so its state is equal bit for bit. A
# checkpoint costs one state per layer and the chunk's recurrence inputs, and the
# replay runs the recurrence again over the kept tokens.
# Storing the state after every token of the chunk instead (one matrix per guess)
# trades that replay for memory.
#
# ## Sampling: the rejection rule
#
# Greedy decoding has one right answer; sampling has a distribution. The drafter now
# draws guess $x$ from its distribution $q$, and the target's distribution at the
# same position is $p$. Leviathan et al. (2023) and Chen et al. (2023) keep the
# guess with probability $\min(1, p(x)/q(x))$. At the first rejection they draw the
# next token from the *residual*, Leviathan's
# $\operatorname{norm}(\max(0, p(x) - q(x)))$:
#
# $$
# r(x) = \frac{\max\bigl(0,\ p(x) - q(x)\bigr)}
#             {\sum_y \max\bigl(0,\ p(y) - q(y)\bigr)}
# $$
#
# and end the round; if all $k$ guesses are kept, a bonus token comes from the
# target's $p$ after them. A token $x$ comes out of a position either as a kept
# guess, with probability $q(x) \min(1, p(x)/q(x)) = \min(p(x), q(x))$, or from
# the residual after a rejection. A rejection happens with probability
#
# $$
# \begin{aligned}
# &1 - \sum_y \min\bigl(p(y), q(y)\bigr) \\
# &= \sum_y \max\bigl(0,\ p(y) - q(y)\bigr),
# \end{aligned}
# $$
#
# the residual's denominator, so the second way gives $\max(0, p(x) - q(x))$, and
# the two add up to $p(x)$ exactly. `accept_sampled` is that rule. (Chen et al.
# swap the letters: their target is $q$ and their drafter $p$, so their rule reads
# $\min(1, q(x)/p(x))$ and $(q(x) - p(x))_+$. This page keeps Leviathan's.)
#
# A common mistake draws the replacement from $p$ itself: it looks as natural, and
# it is wrong, because the tokens the drafter proposes too often then come out both
# ways. Here is that rule, as someone would write it: `accept_sampled` with one line
# changed.


# %%
def accept_resampling_p(p, q, draft, generator):
    """accept_sampled with the mistake: the replacement drawn from p."""
    for i in range(len(draft)):
        x = int(draft[i])
        u = torch.rand((), generator=generator, dtype=torch.float64)
        if not u * q[i, x] < p[i, x]:  # rejected
            return i, int(torch.multinomial(p[i], 1, generator=generator))
    return len(draft), int(torch.multinomial(p[-1], 1, generator=generator))


# %% [markdown]
# To tell the two apart, take a vocabulary of 3 tokens and a target and a drafter
# that are Markov chains: row $t$ of `P` (target) and `Q` (drafter) is the next
# token's distribution after token $t$. The folded cell computes, for each rule, the
# exact distribution of the first 3 tokens that speculative sampling with $k = 2$
# produces after token 0, by adding up every way its rounds can go (each guess
# drawn, kept or rejected, each replacement and bonus token), and compares it with
# the target's own: $P_{0 x_1} P_{x_1 x_2} P_{x_2 x_3}$.

# %%
P = torch.tensor(
    [[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.3, 0.2, 0.5]], dtype=torch.float64
)  # the target
Q = torch.tensor(
    [[0.4, 0.4, 0.2], [0.2, 0.4, 0.4], [0.4, 0.2, 0.4]], dtype=torch.float64
)  # the drafter
target_dist = P[0][:, None, None] * P[:, :, None] * P[None, :, :]  # (3, 3, 3)


# %% tags=["check"]
def round_outcomes(last, replacement, k=2):
    """{tokens one round emits: probability}, after token `last`."""
    out = {}

    def add(key, chance):
        out[key] = out.get(key, 0.0) + chance

    def walk(prev, emitted, chance):
        if len(emitted) == k:  # every guess kept: a bonus token from P
            for x in range(3):
                add((*emitted, x), chance * P[prev, x].item())
            return
        for x in range(3):  # the drafter guesses x
            keep = min(1.0, (P[prev, x] / Q[prev, x]).item())
            walk(x, (*emitted, x), chance * Q[prev, x].item() * keep)
            r = replacement(P[prev], Q[prev])  # after rejecting x
            lost = chance * Q[prev, x].item() * (1 - keep)
            for y in range(3):
                add((*emitted, y), lost * r[y].item())

    walk(last, (), 1.0)
    return out


def first_tokens(replacement, length=3):
    """The exact distribution of the first `length` tokens: (3,) * length."""
    dist = torch.zeros((3,) * length, dtype=torch.float64)

    def go(text, chance):
        if len(text) > length:
            dist[tuple(text[1 : length + 1])] += chance
            return
        for emitted, c in round_outcomes(text[-1], replacement).items():
            go(text + list(emitted), chance * c)

    go([0], 1.0)  # after token 0
    return dist


exact = {
    "residual (right)": first_tokens(residual_distribution),
    "resample from p (wrong)": first_tokens(lambda p_row, q_row: p_row),
}
for name, dist in exact.items():
    error = (dist - target_dist).abs().sum().item()
    print(f"{name:>24}: sum |P(rule) - P(target)| = {error:.1e}")

# %% [markdown]
# The right rule's distribution is the target's to the last bits of float64. The
# wrong rule's is off, but not by much. Would a test on samples see it? The cells
# below run the rounds with random draws (`toy_speculative`, with `attn_ref`'s
# `accept_sampled` or the wrong rule), count the 27 possible three-token beginnings
# over 4,000 runs, and compare the counts with the target's probabilities by a
# chi-square test. The p-value is the chance of counts at least this far from the
# target's if the rule were right.
#
# <details class="example">
# <summary>The test's helpers: the sampled rounds, the chi-square test</summary>
#
# `toy_speculative` runs speculative sampling on the two chains and counts the first
# three tokens; `chi2_test` returns the chi-square statistic of the counts and its
# p-value, which for an even number of degrees of freedom $2m$ is the finite sum
# $e^{-x/2} \sum_{j < m} (x/2)^j / \Gamma(j + 1)$, with $\Gamma(j + 1)$ the factorial of $j$.
#
# </details>


# %% tags=["deeper"]
def toy_speculative(accept, n, seed, k=2, length=3):
    """Counts of the first `length` tokens of n runs: (3,) * length."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.zeros((3,) * length, dtype=torch.long)
    for _ in range(n):
        text = [0]  # the start token, not counted
        while len(text) <= length:
            draft = []
            for _ in range(k):
                prev = draft[-1] if draft else text[-1]
                draft.append(int(torch.multinomial(Q[prev], 1, generator=g)))
            before = [text[-1], *draft]  # the token before each position
            a, token = accept(
                P[before], Q[before[:-1]], torch.tensor(draft), g
            )
            text += [*draft[:a], token]
        counts[tuple(text[1 : length + 1])] += 1
    return counts


def chi2_sf(x, df):
    """P(chi-square with an even df > x)."""
    terms = [(x / 2) ** j / math.factorial(j) for j in range(df // 2)]
    return math.exp(-x / 2) * sum(terms)


def chi2_test(counts, probabilities):
    expected = counts.sum() * probabilities.flatten()
    observed = counts.flatten().double()
    statistic = ((observed - expected) ** 2 / expected).sum().item()
    return statistic, chi2_sf(statistic, df=observed.numel() - 1)


# %%
N, ALPHA = 4000, 1e-3  # runs per test, significance level
p_values = {
    name: [
        chi2_test(toy_speculative(rule, N, seed), target_dist)[1]
        for seed in (0, 1)
    ]
    for name, rule in (
        ("residual (right)", accept_sampled),
        ("resample from p (wrong)", accept_resampling_p),
    )
}
for name, values in p_values.items():
    shown = ", ".join(f"{p:.2g}" for p in values)
    print(f"{name:>24}: p-values {shown} (seeds 0, 1)")

# %% [markdown]
# The right rule's p-values are unremarkable; the wrong rule's are far below the
# significance level of 0.001. Is that luck? A test's *power* is the chance that it
# rejects a wrong rule. The folded cell estimates it for several numbers of runs, by
# running the test on 2,000 sets of counts drawn from each rule's exact
# distribution: for the wrong rule that is its power, for the right one its false
# alarms.

# %% tags=["check"]
rng = np.random.default_rng(0)
power = {}  # (rule, runs) -> share of 2,000 tests that reject
for name, dist in exact.items():
    for n in (250, 1000, N):
        simulated = rng.multinomial(n, dist.flatten().numpy(), size=2000)
        power[name, n] = float(
            np.mean(
                [
                    chi2_test(torch.from_numpy(c), target_dist)[1] < ALPHA
                    for c in simulated
                ]
            )
        )
print(f"tests that reject at significance {ALPHA} (26 degrees of freedom)")
print(f"{'runs:':>24}" + "".join(f"{n:>8,}" for n in (250, 1000, N)))
for name in exact:
    print(
        f"{name + ':':>24}"
        + "".join(f"{power[name, n]:>8.1%}" for n in (250, 1000, N))
    )

# %% [markdown]
# With 4,000 runs the test catches the wrong rule almost every time, and raises a
# false alarm on the right one about as often as its significance level says. With
# a thousand runs it would miss the wrong rule most of the time: a test of a
# sampler proves little unless its power is stated with it.
#
# On the character model, the same rule runs at temperature 1 (`temperature=1.0`):
# both models' logits become probabilities, the drafters sample their guesses, and
# `accept_sampled` decides. The share of guesses kept changes, since the target's
# draws are not its argmax; the text is now a sample, distributed as the target's.


# %% tags=["check"]
def kept_share(results):
    """Guesses kept over guesses proposed, over a list of runs."""
    proposed = sum(sum(r.drafted) for r in results)
    return sum(sum(r.accepted) for r in results) / proposed


g = torch.Generator().manual_seed(0)
sampled = {
    name: kept_share(decode_texts(make, 4, 1.0, g))
    for name, make in drafters.items()
}
for name, share in sampled.items():
    greedy_share = kept_share(runs[name, 4])
    print(
        f"{name:>11}, k = 4: {share:.0%} of guesses kept at temperature 1,"
        f" {greedy_share:.0%} greedy"
    )

# %% [markdown]
# ## How many tokens per pass
#
# Three numbers describe a drafter on a text, and the first two are easy to
# confuse.
#
# - The *share of guesses kept*: guesses kept over guesses proposed. A round stops
#   at its first wrong guess and throws the rest away unjudged, so this share falls
#   as $k$ grows even if every guess were as good as the last.
# - The *acceptance rate* $\alpha$ of Leviathan et al.: the chance that a guess is
#   kept once the target judges it (once every guess before it was kept), estimated
#   by $\hat\alpha$, the guesses kept over the guesses judged (the kept ones and
#   each round's first wrong one). At $k = 1$ the two are the same.
# - *Tokens per target pass*, $\tau$: what a round yields, the guesses kept plus the
#   target's own token, between 1 and $k + 1$. This is what saves passes.
#
# The folded cell trains the small model with two more seeds and decodes the 8
# texts greedily with every drafter and $k$ = 1, 2, 4 and 8. The n-gram drafter has
# no seed: it counts the text.

# %% tags=["check"]
smalls = {0: small}
for seed in (1, 2):
    smalls[seed] = train_drafter(seed)
for seed in (1, 2):
    for k in KS:
        runs[f"small model, seed {seed}", k] = decode_texts(
            lambda m=smalls[seed]: ModelDrafter(m, new_pool(m)), k
        )
names = ["n-gram", "small model", "small model, seed 1", "small model, seed 2"]
table = {  # (drafter, k) -> (share of guesses kept, tokens per pass)
    (name, k): (
        kept_share(runs[name, k]),
        NEW * len(prompts) / sum(r.target_forwards for r in runs[name, k]),
    )
    for name in names
    for k in KS
}
alpha_hat = {  # (drafter, k) -> guesses kept / guesses judged
    (name, k): sum(sum(r.accepted) for r in runs[name, k])
    / sum(
        a + (a < d)  # the kept ones, and the first wrong one if any
        for r in runs[name, k]
        for a, d in zip(r.accepted, r.drafted, strict=True)
    )
    for name in names
    for k in KS
}
print(f"{'drafter':<19}" + "".join(f"{'k = ' + str(k):>15}" for k in KS))
for name in names:
    label = "small model, seed 0" if name == "small model" else name
    cells = "".join(
        f"{table[name, k][0]:>5.0%}{alpha_hat[name, k]:>5.0%}"
        f"{table[name, k][1]:>5.2f}"
        for k in KS
    )
    print(f"{label:<19}{cells}")
print("each cell: share of guesses kept, α̂, tokens per target pass τ")

# %% tags=["plot"]
fig, ax = plt.subplots(figsize=(4.6, 3.2), layout="constrained")
ax.plot(
    KS,
    [k + 1 for k in KS],
    color="0.6",
    linestyle="--",
    label="every guess kept",
)
for name, colour in zip(names, ("C0", "C1", "C2", "C3"), strict=True):
    label = "small model, seed 0" if name == "small model" else name
    ax.plot(
        KS,
        [table[name, k][1] for k in KS],
        marker="o",
        color=colour,
        label=label,
    )
ax.set(
    xlabel="guesses per round, k", ylabel="tokens per target pass", xticks=KS
)
ax.legend(fontsize=8)
figure_to_svg(
    fig,
    alt="Tokens per target pass against k for the n-gram drafter and three "
    "seeds of the small model: every curve rises with k and stays below "
    "k + 1, the dashed line where every guess would be kept; at k = 8 the "
    "n-gram drafter reaches "
    f"{table['n-gram', 8][1]:.1f} tokens per pass.",
)

# %% [markdown]
# Every drafter saves passes, and more with larger $k$, though far from $k + 1$:
# each round stops at its first wrong guess. From $k = 1$ to $k = 8$ the share of
# guesses kept falls by more than a third, but $\hat\alpha$ moves by a few points
# only: the drafters are no worse at later guesses; more guesses go unjudged. The
# n-gram counts, which agree with the target more often than the small model (as
# printed earlier), keep more guesses here too, for every seed of the small model. (The tests check these claims with two more seeds of the target
# too, those of [Attention on real text](attention_on_text.md#other-seeds).)
#
# Greedy text from a model this small repeats itself (read the plain text printed
# earlier), which makes it easy to guess: a property of this model's text, not of
# speculative decoding. Real deployments see acceptance vary with the text too:
# Saxena's prompt-lookup drafter (2023), which copies from the prompt, reports
# "significant speedups (2x-4x) in input-grounded tasks" such as summarization,
# document question answering, multi-turn chat and code editing.
#
# ## What it buys on this machine
#
# A round costs one pass of the target over $k + 1$ queries and the drafter's $k$
# guesses; plain decoding costs one pass over one query per token. With
# $\mathrm{pass}(L)$ the cost of a target pass over $L$ queries and
# $\mathrm{draft}(k)$ the cost of drafting $k$ guesses, the expected speed-up of a
# drafter that yields $\tau$ tokens per pass is
#
# $$
# \text{speedup} = \frac{\tau \, \mathrm{pass}(1)}{\mathrm{pass}(k + 1) + \mathrm{draft}(k)} .
# $$
#
# It exceeds 1 when
# $\mathrm{pass}(k + 1) + \mathrm{draft}(k) < \tau\, \mathrm{pass}(1)$: a round
# must cost less than the $\tau$ plain passes it replaces. That needs a pass over $k + 1$ queries that costs little more than a
# pass over one, as when a pass is paid for by reading weights and cache rather
# than by arithmetic (the [memory-bound decoding](serving_long_contexts.md) of
# large models), and a cheap drafter. The folded cell measures $\mathrm{pass}(L)$
# for the target with a cache of 16 positions, and $\mathrm{draft}(k)$ for both
# drafters, in CPU time on the machine that built this page.


# %% tags=["plot", "measured"]
def target_pass(L):
    """One target pass over L new queries after 16 cached positions."""

    def step():
        verify_forward(target, timing_pool, "t", held_ids[16 : 16 + L])
        timing_pool.truncate("t", 16)

    return cpu_time_ms(step, repeat=15)


def small_drafts(k):
    def step():
        drafter = ModelDrafter(small, timing_small)
        drafter.propose(held_ids[:17], k)
        drafter.rollback(16)

    return cpu_time_ms(step, repeat=15)


with torch.no_grad():
    timing_pool, timing_small = new_pool(target), new_pool(small)
    verify_forward(target, timing_pool, "t", held_ids[:16])
    verify_forward(small, timing_small, "draft", held_ids[:16])
    target_pass(1)  # warm-up
    cost = {L: target_pass(L) for L in (1, *(k + 1 for k in KS))}
    draft_cost = {
        "n-gram": {
            k: cpu_time_ms(lambda k=k: ngram.propose(held_ids[:17], k))
            for k in KS
        },
        "small model": {k: small_drafts(k) for k in KS},
    }
print("target pass over L queries (ms):")
print("  " + ", ".join(f"L={L}: {ms:.2f}" for L, ms in cost.items()))
for name, costs in draft_cost.items():
    print(f"{name} drafting k guesses (ms):")
    print("  " + ", ".join(f"k={k}: {ms:.3f}" for k, ms in costs.items()))
speedup = {
    (name, k): table[name, k][1] * cost[1] / (cost[k + 1] + costs[k])
    for name, costs in draft_cost.items()
    for k in KS
}
print(
    f"{'expected speed-up':<20}" + "".join(f"{'k = ' + str(k):>8}" for k in KS)
)
for name in draft_cost:
    print(f"{name:<20}" + "".join(f"{speedup[name, k]:>7.2f}x" for k in KS))
c_ratio = {name: costs[1] / cost[1] for name, costs in draft_cost.items()}
print(
    "one guess over one target pass, Leviathan's c:",
    ", ".join(f"{name} {c:.2f}" for name, c in c_ratio.items()),
)

# %% [markdown]
# Read the table with the formula beside it. The speed-up could reach the tokens
# per pass only if drafting were free and the extra queries cost nothing (a timing
# of such short passes can still come out a hair either way: noise, not a gain). A
# pass of this tiny target is mostly
# Python's overhead, so a pass over 9 queries costs far less than 9 passes over one,
# as for a large model on a GPU. The n-gram drafter costs a table lookup per guess.
# The small model costs a pass per guess, a good part of a target's pass for the
# same reason: its guesses, kept less often and paid for more dearly, buy less than
# the n-gram's at every $k$, and at the larger $k$ less than they cost.
#
# Leviathan et al.'s expected speed-up (their Theorem 3.8) is this formula under
# three assumptions. A pass over $k + 1$ queries costs what a pass over one does:
# they "assume that we can run $\gamma+1$ concurrent evaluations of $M_p$ in
# parallel without increasing the walltime" ($\gamma$ is their $k$). A guess costs a
# fixed fraction $c$ of a target pass,
# $\mathrm{draft}(k) = k\, c\, \mathrm{pass}(1)$. And guesses are kept
# independently with probability $\alpha$, so that
# $\tau = \frac{1 - \alpha^{k+1}}{1 - \alpha}$. Then
#
# $$
# \text{speedup} = \frac{1 - \alpha^{k+1}}{(1 - \alpha)(k c + 1)} .
# $$
#
# In their experiments $c$ "was always less than 0.05"; the cell's last line prints
# it for this page's drafters, and the small model's is nowhere near.
#
# ## Trees: several guesses per position
#
# A chain of guesses is lost from its first wrong guess on. A *tree* hedges: at each
# position it tries several likely tokens, each with its own continuation. SpecInfer
# (Miao et al., 2024), Medusa (Cai et al., 2024) and EAGLE (Li et al., 2024) verify
# a whole tree in one pass. Its nodes are laid out in one chunk, parents first; each
# node must see the cache and its own ancestors only, as if its branch had been run
# alone, and its position is the cache's length plus its depth, not its place in the
# chunk. The mask is the *ancestor mask*: row $i$ marks node $i$ and every node on
# the path from the root to it (`tree_ancestor_mask`). SpecInfer calls it a
# "topology-aware causal mask"; Medusa's paper, "an attention mask that exclusively
# permits attention flow from the current token back to its antecedent tokens",
# with "positional indices ... adjusted in line with this structure";
# attention-gym's `jetspec` example builds the same matrix in
# `build_tree_ancestor_matrix`.
#
# They grow their trees differently. SpecInfer's simplest tree follows a fixed
# *expansion configuration* $(k_1, k_2, \ldots)$: each node at depth $i - 1$ gets
# the drafter's $k_i$ likeliest next tokens after its branch. Medusa's heads each
# predict one position ahead without seeing the branch, so its tree combines their
# top tokens. EAGLE's drafter runs on the
# tree itself, and EAGLE-2 (Li et al., 2024b) shapes the tree to the context,
# expanding the nodes whose branch the drafter is most confident in.
#
# The picture is a tree the n-gram drafter grows from the picture's text at the top
# of the page, with SpecInfer's configuration $(2, 2, 1)$ (the example
# of its Figure 3): the 2 likeliest characters after its last one, the 2 likeliest
# after each of those, then the likeliest one after each. Node 0 is the text's last
# character. Right, its ancestor mask (coloured: seen; hatched: not seen), with the
# branch the target accepts framed.

# %% tags=["plot"]
WIDTHS = [2, 2, 1]
tree_tokens, parents = draft_tree(ngram.distribution, context, WIDTHS)
tree_mask = tree_ancestor_mask(parents)
tree_pool = new_pool(target)
with torch.no_grad():
    verify_forward(target, tree_pool, "tree", context[:-1])
    tree_logits = verify_forward(
        target, tree_pool, "tree", tree_tokens, parents
    )
path, tree_token = accept_tree_greedy(tree_logits, tree_tokens, parents)
depth = [0]
for p in parents[1:]:
    depth.append(depth[p] + 1)
leaves = [i for i in range(len(parents)) if i not in parents]
row_of = {leaf: r for r, leaf in enumerate(leaves)}
for i in reversed(range(len(parents))):  # a parent sits among its children
    if i not in row_of:
        kids = [row_of[c] for c, p in enumerate(parents) if p == i]
        row_of[i] = sum(kids) / len(kids)
cell = 0.5
fig, ax = canvas(10, 7.4)
chars = show(tree_tokens)


def drawn_at(i):  # where node i of the tree is drawn
    return 0.35 + 0.95 * depth[i], 1.6 + 1.2 * row_of[i]


for i, p in enumerate(parents):
    x, y = drawn_at(i)
    if p >= 0:
        px, py = drawn_at(p)
        ax.plot([px + 0.2, x - 0.2], [py, y], color="0.5", lw=1)
    bold = "bold" if i in path else "normal"
    note(ax, x, y, chars[i], fontsize=12, fontweight=bold)
    note(ax, x, y + 0.4, str(i), fontsize=8, color="0.45")
note(ax, 1.8, 0.4, "the tree (small: node numbers)", fontsize=9)
box = grid(
    ax,
    torch.full(tree_mask.shape, 2.5),
    4.4,
    1.0,
    cmap="tab10",
    vmax=10,
    mask=tree_mask,
    cell=cell,
)
for j, ch in enumerate(chars):
    middle = cell * (j + 0.5)
    note(ax, box.x + middle, 0.72, ch, fontsize=9)
    note(ax, box.x + middle, 0.3, str(j), fontsize=7, color="0.45")
    note(ax, box.x - 0.22, box.y + middle, ch, fontsize=9)
    note(ax, box.x - 0.6, box.y + middle, str(j), fontsize=7, color="0.45")
for i in path:
    outline(ax, Box(box.x + cell * i, box.y + cell * i, cell, cell), width=1.5)
note(
    ax,
    box.center[0],
    box.y + box.height + 0.5,
    "ancestor mask: row = query node",
    fontsize=9,
)
kept_branch = "".join(chars[i] for i in path[1:])
figure_to_svg(
    fig,
    alt=f"A tree of {len(parents)} guessed characters: node 0, the text's "
    f"last character, has {WIDTHS[0]} children, each of those "
    f"{WIDTHS[1]}, and each of those one more. Beside it, its "
    f"{len(parents)} by {len(parents)} ancestor mask: each row marks the "
    "node and its ancestors only. The target keeps the branch "
    f"'{kept_branch}', nodes {path}, framed on the diagonal.",
)

# %% [markdown]
# Does one pass over the tree give each branch what it would get alone? The cell
# verifies every root-to-leaf branch separately, as a chain after the same cache,
# and compares the logits of its nodes with the tree's.

# %%
branches = []
for leaf in leaves:
    branch = [leaf]
    while parents[branch[0]] >= 0:
        branch.insert(0, parents[branch[0]])
    branches.append(branch)
tree_gap = 0.0
with torch.no_grad():
    for branch in branches:
        alone = copy.deepcopy(tree_pool)
        alone.truncate("tree", len(context) - 1)  # the cache before the tree
        chain = verify_forward(target, alone, "tree", tree_tokens[branch])
        tree_gap = max(
            tree_gap, (chain - tree_logits[branch]).abs().max().item()
        )
print(
    f"{len(branches)} branches of {len(branches[0])} nodes;",
    f"the tree's pass has {len(parents)} queries",
)
print(f"largest |tree - branch alone| logit: {tree_gap:.1e}")
print(f"kept: nodes {path}, then {decode([tree_token])!r}")

# %% [markdown]
# After the verdict the cache holds the whole tree in the order its nodes were
# listed. The accepted branch must end up where a chain would have put it, node
# `path[j]` at position $S_0 + j$: `keep_path` copies its keys and values there, then
# truncates. Medusa's code does the same, selecting the accepted branch's entries of
# its cache and copying them to the next positions.

# %%
keep_path(tree_pool, "tree", len(context) - 1, path)
branch_pool = new_pool(target)
with torch.no_grad():
    verify_forward(target, branch_pool, "tree", context[:-1])
    verify_forward(target, branch_pool, "tree", tree_tokens[path])
kept_gap = max(
    (mine - theirs).abs().max().item()
    for layer in range(len(target.blocks))
    for mine, theirs in zip(
        tree_pool.gather(layer, "tree"),
        branch_pool.gather(layer, "tree"),
        strict=True,
    )
)
print(f"positions kept: {tree_pool.lengths['tree']}")
print(
    "largest |key or value difference| from the branch alone:",
    f"{kept_gap:.1e}",
)

# %% [markdown]
# What does the hedge buy? At every position of the 8 greedy texts that leaves room
# for 10 guesses in the model's context, the folded cell runs one round from the true
# text with three drafts: a chain of 3 guesses (4 queries), a chain of 10 guesses
# (11 queries), and the tree above (11 queries, 3 deep), and counts the tokens each
# round yields.

# %% tags=["check"]
yields = {"chain of 3": [], "chain of 10": [], "tree [2, 2, 1]": []}
with torch.no_grad():
    for prompt, base in zip(prompts, plains, strict=True):
        full_text = torch.cat([prompt, base.tokens])
        for n in range(len(prompt), T - 10 + 1):  # room for 10 guesses
            so_far = full_text[:n]
            cache_pool = new_pool(target)
            verify_forward(target, cache_pool, "r", so_far[:-1])
            for guesses in (3, 10):
                round_pool = copy.deepcopy(cache_pool)
                d, _ = ngram.propose(so_far, guesses)
                scored = verify_forward(
                    target, round_pool, "r", torch.cat([so_far[-1:], d])
                )
                yields[f"chain of {guesses}"].append(
                    accept_greedy(scored, d)[0] + 1
                )
            nodes, ps = draft_tree(ngram.distribution, so_far, WIDTHS)
            scored = verify_forward(target, cache_pool, "r", nodes, ps)
            yields["tree [2, 2, 1]"].append(
                len(accept_tree_greedy(scored, nodes, ps)[0])
            )
for name, counts in yields.items():
    print(f"{name:>15}: {np.mean(counts):.2f} tokens per target pass")

# %% [markdown]
# The tree yields more than the chain of 3, which is as deep: where the first guess
# at a position is wrong, its sibling can still be right. The chain of 10 spends the
# same 11 queries on depth instead, and on this repetitive text long runs of right
# guesses are common enough that depth wins. Which shape is best depends on the
# drafter and the text, which is why EAGLE-2 shapes its tree to each context.
#
# Verifying a tree needs an attention kernel that takes an arbitrary mask; a chain
# needs only the causal one. Asked for custom masks in
# [flash-attention #1576](https://github.com/Dao-AILab/flash-attention/issues/1576),
# the library's author asked whether a chain could "just pass in 4 tokens in the query with
# `causal=True`", and was told the mask was for "EAGLE 2, EAGLE 3 and MTP". vLLM's
# [#18327](https://github.com/vllm-project/vllm/issues/18327) asked for
# "topology-aware masking", and
# [#20401](https://github.com/vllm-project/vllm/pull/20401) added a tree attention
# backend. A kernel without custom masks can still verify a tree in two parts, as
# SGLang's [#29706](https://github.com/sgl-project/sglang/pull/29706) does: the
# tree's queries over the cache with no mask at all, then over the tree's own keys
# with the ancestor mask, merged by their log-sum-exps as
# [split-K decoding](serving_long_contexts.md) merges its parts.
#
# <details class="example">
# <summary>Going deeper: the two-part verification equals the masked one</summary>
#
# The folded cell takes queries, keys and values for the tree above after a cache of
# its text, attends once over everything with the cache and the ancestor mask, and
# once in two parts merged by `merge_partials`.
#
# </details>


# %% tags=["deeper"]
g = torch.Generator().manual_seed(2)
nodes, cached, d_head = len(parents), len(context) - 1, 8
q_tree = torch.randn(nodes, d_head, generator=g, dtype=torch.float64)
k_cache, v_cache = torch.randn(2, cached, d_head, generator=g).double()
k_tree, v_tree = torch.randn(2, nodes, d_head, generator=g).double()
whole, _ = scaled_dot_product_attention(  # one pass, one mask
    q_tree,
    torch.cat([k_cache, k_tree]),
    torch.cat([v_cache, v_tree]),
    torch.cat([torch.ones(nodes, cached, dtype=torch.bool), tree_mask], 1),
)
outputs, lses = [], []
for part_k, part_v, allowed in (
    (k_cache, v_cache, torch.ones(nodes, cached, dtype=torch.bool)),
    (k_tree, v_tree, tree_mask),
):
    scores = q_tree @ part_k.T / math.sqrt(d_head)  # (nodes, keys)
    scores = scores.masked_fill(~allowed, -math.inf)
    outputs.append(scores.softmax(dim=-1) @ part_v)
    lses.append(scores.logsumexp(dim=-1))
merged, _ = merge_partials(torch.stack(outputs), torch.stack(lses))
cascade_gap = (merged - whole).abs().max().item()
print(f"largest |two parts merged - one masked pass|: {cascade_gap:.1e}")


# %% [markdown]
# ## Summary
#
# - A drafter guesses $k$ tokens; the target scores them in one pass, a chunk of
#   $k + 1$ queries with a bottom-right causal mask over its cache.
# - Greedy: keep the guesses that match the target's argmax, then its own token:
#   the target's greedy text, unless rounding flips a near tie (measured here).
# - Sampling: keep a guess with probability $\min(1, p/q)$, replace the first
#   rejected one from $(p - q)_+$ normalized: exactly the target's distribution.
# - Roll back: truncate the target's cache by the $k - a$ rejected guesses, the
#   drafter's by its own count; a recurrent state needs a checkpoint and a replay.
# - Compare drafters across $k$ by $\hat\alpha$, guesses kept over guesses judged.
# - Speed: tokens per pass times
#   $\mathrm{pass}(1) / (\mathrm{pass}(k + 1) + \mathrm{draft}(k))$. Cheap
#   drafters and passes whose cost barely grows with their queries make it pay.
# - Trees: several guesses per position in one pass, with the ancestor mask and
#   positions by depth; the accepted branch moves to consecutive slots. Without a
#   masked kernel: the cache unmasked, the tree masked, merged.
#
# ## Common pitfalls
#
# **1. "After a rejection, draw the next token from the target's distribution."**
# It sounds harmless, but the rejected token's position then gets the drafter's
# kept guesses *and* a fresh draw from $p$, so the tokens the drafter favours come
# out too often. The [sampling section](#sampling-the-rejection-rule) computed the
# symptom: the exact distribution off by the printed sum, and a chi-square p-value
# far below any significance level. Fix: draw from the residual $(p - q)_+$ normalized
# (`residual_distribution`).
#
# **2. Forgetting to roll back the target's cache.** The next round's chunk then
# lands after the rejected guesses, and its queries read them as text. Below, the
# round after the picture's, on the truncated cache and on the cache that kept them.

# %%
with torch.no_grad():
    rounds = {}
    for rolled_back in (True, False):
        p1 = new_pool(target)
        verify_forward(target, p1, "a", text[:-1])
        verify_forward(target, p1, "a", torch.cat([text[-1:], draft]))
        if rolled_back:
            p1.truncate("a", len(text) + a)
        next_text = torch.cat([text, draft[:a], torch.tensor([token])])
        next_draft, _ = ngram.propose(next_text, 4)
        chunk_after = torch.cat([next_text[-1:], next_draft])
        rounds[rolled_back] = verify_forward(target, p1, "a", chunk_after)
stale_gap = (rounds[True] - rounds[False]).abs().max().item()
print(f"largest logit difference: {stale_gap:.2f}")

# %% [markdown]
# The logits move by far more than rounding: where the target's two best logits
# are closer than that, the stale cache can make it write another character, and
# from there the text is no longer the target's. Fix: `pool.truncate(request, n + a)` after
# every round, as `speculative_generate` does.
#
# **3. A tree verified with the causal mask of a chain.** Laid out in one chunk, the
# tree's nodes are not a sequence: with a causal mask, node $i$ sees every node
# listed before it, siblings and cousins included, at positions that count them.

# %%
with torch.no_grad():
    wrong_pool = new_pool(target)
    verify_forward(target, wrong_pool, "w", context[:-1])
    as_chain = verify_forward(target, wrong_pool, "w", tree_tokens)
wrong_gap = (as_chain - tree_logits).abs().max().item()
wrong_nodes = (as_chain.argmax(-1) != tree_logits.argmax(-1)).sum().item()
print(f"largest logit difference from the ancestor mask: {wrong_gap:.2f}")
print(f"argmax changed at {wrong_nodes} of {len(parents)} nodes")

# %% [markdown]
# Fix: attend with `tree_ancestor_mask(parents)` and give each node the position
# cache length + depth, as `verify_forward(..., parents)` does.
#
# **4. "The acceptance rate drops as k grows, so the drafter gets worse at longer
# guesses."** Computed as guesses kept over guesses proposed, the rate does drop:
# the first column of each cell of the [table](#how-many-tokens-per-pass). But the
# guesses after a round's first wrong one were never judged, and counting them as
# failures mixes the drafter's quality with $k$ itself. Fix: divide by the guesses
# the target judged; that $\hat\alpha$, the second column, barely moves.
#
# ## Exercises
#
# **1. A prompt-lookup drafter.** Saxena's prompt lookup guesses by copying from the
# text itself: it looks for an earlier occurrence of the text's last 3 tokens (then
# 2, then 1) and proposes the tokens that followed the first one it finds. A
# simpler form finds the latest earlier occurrence of the last 2 tokens only. Write
# that as a drafter (a `propose` that returns the guesses and one-hot
# probabilities, and a `rollback` that does nothing), decode the 8 texts greedily
# with $k = 4$, and check that the text is the plain greedy text.


# %% tags=["solution"]
class PromptLookupDrafter:
    def propose(self, context, k, temperature=None, generator=None):
        ids, guesses = context.tolist(), []
        for start in range(len(ids) - 3, -1, -1):  # latest match first
            if ids[start : start + 2] == ids[-2:]:
                guesses = ids[start + 2 : start + 2 + k]
                break
        draft = torch.tensor(guesses, dtype=torch.long)
        return draft, torch.eye(V, dtype=torch.float64)[draft]

    def rollback(self, length):
        pass


lookup = decode_texts(PromptLookupDrafter, 4)
print(
    "same text as plain decoding:",
    all(
        torch.equal(r.tokens, b.tokens)
        for r, b in zip(lookup, plains, strict=True)
    ),
)
print(
    f"tokens per target pass: "
    f"{NEW * len(prompts) / sum(r.target_forwards for r in lookup):.2f}"
)

# %% [markdown]
# **2. Leviathan's formula.** If every guess were kept independently with probability
# $\alpha$, a round of $k$ guesses would yield $(1 - \alpha^{k+1}) / (1 - \alpha)$
# tokens on average (their Equation 1). Take $\alpha$ as the n-gram drafter's
# $\hat\alpha$ at $k = 1$, predict its tokens per pass for $k$ = 2, 4 and 8, and
# compare with the table. Then predict round by round, each round with the guesses
# it made (near a text's end, fewer than $k$). How does what is left of the gap
# compare with the measurement's standard error, and what else is uncertain?

# %% tags=["solution"]
alpha = alpha_hat["n-gram", 1]
judged = sum(  # the guesses alpha-hat was counted on
    a + (a < d)
    for r in runs["n-gram", 1]
    for a, d in zip(r.accepted, r.drafted, strict=True)
)
alpha_error = math.sqrt(alpha * (1 - alpha) / judged)  # its standard error


def expected_tokens(m, alpha):
    """Tokens a round of m independent guesses yields on average."""
    return (1 - alpha ** (m + 1)) / (1 - alpha)


print(
    f"alpha-hat {alpha:.2f} ± {alpha_error:.2f}, from {judged} judged guesses"
)
for k in KS[1:]:
    made = [m for r in runs["n-gram", k] for m in r.drafted]
    by_round = np.mean([expected_tokens(m, alpha) for m in made])
    yielded = [a + 1 for r in runs["n-gram", k] for a in r.accepted]
    scatter = np.std(yielded, ddof=1) / math.sqrt(len(yielded))
    print(
        f"k = {k}: formula {expected_tokens(k, alpha):.2f}; round by round "
        f"{by_round:.2f}; measured\n       "
        f"{np.mean(yielded):.2f} ± {scatter:.2f}, over {len(yielded)} rounds"
    )
# Round by round the prediction is lower at every k: the texts end in short
# rounds. What is left of the gap can have either sign. Set it against two
# uncertainties: the measurement's and alpha-hat's (which the formula amplifies
# at large k). Both treat guesses as independent; with 8 texts whose guesses
# are kept in runs, the true ones are larger. Telling whether guesses are kept
# independently, the formula's last assumption, takes many more texts.

# %% [markdown]
# **3. Temperature.** Decode the 8 texts by speculative sampling with the n-gram
# drafter and $k = 4$ at temperatures 0.5 and 2, and print the share of guesses
# kept. Then tell the temperature's own effect from the texts': average the chance a
# guess from $q$ is kept, $\sum_x \min(p(x), q(x))$, over the held-out windows at
# both temperatures, and count the pairs of characters in each temperature's texts
# that the drafter's training text never has. What lowers the share kept?

# %% tags=["solution"]
trained = ngram.counts.sum(dim=-1) > V * ngram.alpha + 0.5  # pairs seen
with torch.no_grad():  # position t: the guess after characters t - 1 and t
    p_logits = target(held)[0][:, 1:].double()
q_logits = ngram.counts.view(V * V, V).double().log()[pairs]
shares, overlap, unseen = {}, {}, {}  # temperature -> measurement
for t in (0.5, 2.0):
    decoded = decode_texts(
        lambda: ngram, 4, t, torch.Generator().manual_seed(0)
    )
    shares[t] = kept_share(decoded)
    p_t, q_t = torch.softmax(p_logits / t, -1), torch.softmax(q_logits / t, -1)
    overlap[t] = torch.minimum(p_t, q_t).sum(-1).mean().item()
    written = torch.stack([r.tokens for r in decoded])  # (8, 24)
    texts = torch.cat([torch.stack(prompts), written], dim=1)
    unseen[t] = (~trained[texts[:, 7:-1], texts[:, 8:]]).double().mean().item()
    print(
        f"temperature {t}: {shares[t]:.0%} of guesses kept;\n  overlap on "
        f"the held-out text {overlap[t]:.3f}; pairs never seen in training "
        f"{unseen[t]:.0%}"
    )
# On the held-out text, the overlap rose a little from 0.5 to 2 (in the limit
# both tend to the uniform one). So the fall comes from the texts: at
# temperature 2 the target writes pairs the training text never has, after
# which the drafter's counts are all alpha and its guess is uniform. These
# numbers show such pairs appear, not how much of the fall they cause.
# Leviathan et al. saw α fall on large models too ("the sharper the adjusted
# distribution, the higher the α values"), measured on text written at each
# temperature: the same two effects, mixed.

# %% [markdown]
# ## References
#
# - Yaniv Leviathan, Matan Kalman, Yossi Matias. [Fast Inference from Transformers
#   via Speculative Decoding](https://arxiv.org/abs/2211.17192). ICML 2023. The
#   rejection rule (Section 2.3), the acceptance rate $\alpha$ (Section 3.1), the
#   expected tokens per round (Equation 1) and speed-up (Theorem 3.8).
# - Charlie Chen, Sebastian Borgeaud, Geoffrey Irving, Jean-Baptiste Lespiau, Laurent
#   Sifre, John Jumper. [Accelerating Large Language Model Decoding with Speculative
#   Sampling](https://arxiv.org/abs/2302.01318). 2023. The same rule ("modified
#   rejection sampling"; target $q$, drafter $p$) and its proof.
# - Xupeng Miao et al. [SpecInfer: Accelerating Large Language Model Serving with
#   Tree-based Speculative Inference and
#   Verification](https://arxiv.org/abs/2305.09781). ASPLOS 2024. Token trees
#   grown by an expansion configuration, verified in one pass with a
#   "topology-aware causal mask".
# - Tianle Cai et al. [Medusa: Simple LLM Inference Acceleration Framework with
#   Multiple Decoding Heads](https://arxiv.org/abs/2401.10774). ICML 2024; its code,
#   [`medusa/model/utils.py`](https://github.com/FasterDecoding/Medusa/blob/main/medusa/model/utils.py):
#   the ancestor mask, positions by depth, the accepted branch copied into place.
# - Yuhui Li, Fangyun Wei, Chao Zhang, Hongyang Zhang. [EAGLE: Speculative Sampling
#   Requires Rethinking Feature Uncertainty](https://arxiv.org/abs/2401.15077). ICML
#   2024; and [EAGLE-2: Faster Inference of Language Models with Dynamic Draft
#   Trees](https://arxiv.org/abs/2406.16858). EMNLP 2024.
# - Apoorv Saxena. [Prompt Lookup
#   Decoding](https://github.com/apoorvumang/prompt-lookup-decoding). 2023.
# - meta-pytorch/attention-gym,
#   [`attn_gym/masks/jetspec.py`](https://github.com/meta-pytorch/attention-gym/blob/main/attn_gym/masks/jetspec.py):
#   `build_tree_ancestor_matrix`, a tree's ancestor mask for FlexAttention.
# - Dao-AILab/flash-attention [#1576](https://github.com/Dao-AILab/flash-attention/issues/1576),
#   custom masks for EAGLE and MTP; vllm-project/vllm
#   [#18327](https://github.com/vllm-project/vllm/issues/18327) and
#   [#20401](https://github.com/vllm-project/vllm/pull/20401), tree attention;
#   sgl-project/sglang [#29706](https://github.com/sgl-project/sglang/pull/29706),
#   a tree verified in two parts.
# - lablup/mlxcel [#994](https://github.com/lablup/mlxcel/issues/994) and its fix
#   [#1002](https://github.com/lablup/mlxcel/pull/1002): the drafter's cache rewound
#   two entries too far.
# - ml-explore/mlx-lm [#1486](https://github.com/ml-explore/mlx-lm/pull/1486) (split
#   from [#1456](https://github.com/ml-explore/mlx-lm/pull/1456)): exact rollback
#   for hybrid caches.
#
# **Next:** [Attention bugs seen in the wild](../practice/bugs.md), where the
# drafter's rewind that went wrong is reproduced.

# %% tags=["measured"]
print(
    f"this execution: {time.process_time() - started:.0f} s of CPU time,",
    "from the corpus's loading on,",
)
print("the four models' training included")

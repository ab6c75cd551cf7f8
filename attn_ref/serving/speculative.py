r"""Speculative decoding: a cheap drafter guesses k tokens, the target checks them in one forward pass.

A target model writes one token per forward pass. Speculative decoding (Leviathan, Kalman and
Matias, 2023; Chen et al., 2023) lets a cheaper *drafter* guess the next $k$ tokens, then runs the
target once on a *chunk* of $k + 1$ queries: the last token it accepted and the $k$ guesses, each
query seeing the target's cache and the guesses before it. That one pass gives the target's
distribution after every prefix of the guess, so it can check them all:

- greedy: keep the guesses up to the first one that is not the target's argmax, then add the
  target's own token there (`accept_greedy`); the text is the target's greedy text;
- sampling: keep guess $x$ with probability $\min(1, p(x) / q(x))$, and at the first rejection draw
  from the residual $\max(0, p - q)$, normalized (`accept_sampled`); the text is distributed
  exactly as the target's own samples.

Either way one pass yields between 1 and $k + 1$ tokens. The keys and values of the rejected
guesses are then rolled back: the request's cache in the paged pool is truncated
(`attn_ref.serving.PagedKVCache.truncate`).

- `verify_forward`: the target's pass over a chunk, or a tree of guesses, on the paged cache;
- `tree_ancestor_mask`, `tree_depths`: the mask of a tree of guesses (SpecInfer, Medusa, EAGLE),
  each node seeing its own ancestors; a chain is the tree whose mask is causal;
- `keep_path`: the rollback of a tree, the accepted branch's keys moved to consecutive slots;
- `NGramDrafter`, `ModelDrafter`: two drafters, counts of a text and a smaller model;
- `speculative_generate`: the whole loop for one request, with what every round accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from attn_ref import _validate
from attn_ref.serving.forward import attention, run_decoder
from attn_ref.serving.paged import PagedKVCache

__all__ = [
    "ModelDrafter",
    "NGramDrafter",
    "SpeculativeResult",
    "accept_greedy",
    "accept_sampled",
    "accept_tree_greedy",
    "draft_tree",
    "keep_path",
    "residual_distribution",
    "speculative_generate",
    "tree_ancestor_mask",
    "tree_depths",
    "verify_forward",
]


# --- trees of guesses --------------------------------------------------------------------------


def _parents(parents: object) -> list[int]:
    """A list of parent indices, each in ``[-1, i - 1]``: a parent comes before its child."""
    if isinstance(parents, Tensor):
        _validate.index_vector("parents", parents)
        parents = parents.tolist()
    if not isinstance(parents, (list, tuple)) or not all(
        isinstance(p, int) and not isinstance(p, bool) for p in parents
    ):
        raise ValueError(f"parents must be a list of ints (-1 for a root), got {parents!r}")
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"parents[{i}] = {p} must be in [-1, {i - 1}]: a parent comes before its child")
    return list(parents)


def tree_ancestor_mask(parents: list[int] | Tensor) -> Tensor:
    """Which nodes of a tree each node sees: itself and its ancestors, ``(N, N)`` booleans.

    The nodes are listed parents first, ``parents[i]`` being the index of node
    ``i``'s parent, or ``-1`` for a root. Row ``i`` is node ``i``'s path from its
    root: attending with this mask, each node sees exactly the tokens of its own
    branch, as if that branch had been run alone with a causal mask. A chain
    (``parents = [-1, 0, 1, ...]``) gives the causal mask itself.

    Raises:
        ValueError: A parent does not come before its child.

    Examples:
        A root with two children, the second of which has a child:

        >>> tree_ancestor_mask([-1, 0, 0, 2]).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [1, 0, 1, 0],
                [1, 0, 1, 1]], dtype=torch.int32)
        >>> chain = tree_ancestor_mask([-1, 0, 1])
        >>> torch.equal(chain, torch.ones(3, 3, dtype=torch.bool).tril())
        True
    """
    parents = _parents(parents)
    mask = torch.eye(len(parents), dtype=torch.bool)  # (N, N): every node sees itself
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] |= mask[p]  # and whatever its parent sees
    return mask


def tree_depths(parents: list[int] | Tensor) -> Tensor:
    """Each node's depth, 0 for a root: its position after the cache is ``cached + depth``.

    Examples:
        >>> tree_depths([-1, 0, 0, 2]).tolist()
        [0, 1, 1, 2]
    """
    parents = _parents(parents)
    depths: list[int] = []
    for p in parents:
        depths.append(0 if p < 0 else depths[p] + 1)
    return torch.tensor(depths, dtype=torch.long)


# --- the target's pass -------------------------------------------------------------------------


@torch.no_grad()
def verify_forward(
    model: torch.nn.Module,
    pool: PagedKVCache,
    request: object,
    tokens: Tensor,
    parents: list[int] | Tensor | None = None,
) -> Tensor:
    r"""Run ``model`` on new ``tokens`` of ``request`` in one pass over its cache; write their keys.

    The pool holds the request's first $S_0$ positions. The $L$ new tokens
    get $L$ more slots, and each new query sees every cached key and, among
    the new ones, those of its ancestors (`tree_ancestor_mask`); its position
    is $S_0$ plus its depth. Without ``parents`` the tokens form a chain, the
    mask is causal (aligned to the bottom-right corner of the $(L, S_0 + L)$
    scores), and this is chunked prefill: what a one-token-at-a-time decode
    computes, up to float rounding. No gradient is kept: this is inference.

    Args:
        model: A `attn_ref.decoder.TinyDecoder` or a model with its parts
            (`attn_ref.training.CharTransformer`).
        pool: The paged cache; its layers and heads must fit ``model``.
        request: The request id in ``pool`` (a new one starts empty).
        tokens: ``(L,)`` token ids.
        parents: ``L`` parent indices within ``tokens`` (``-1``: a child of the
            cache's last token); ``None`` for a chain.

    Returns:
        ``(L, vocab_size)`` logits: row ``i`` is the next-token prediction after node ``i``.

    Raises:
        ValueError: ``tokens`` is not a 1-D integer tensor, ``parents`` does not
            fit it, or the pool has no room (`PagedKVCache.reserve`).

    Examples:
        A chunk of three tokens after a cached prompt gives the logits of the
        whole text at once:

        >>> from attn_ref.decoder import TinyDecoder
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(10, 16, embed_dim=8, num_layers=2, num_heads=2)
        >>> pool = PagedKVCache(
        ...     2, num_blocks=4, block_size=4, num_kv_heads=2, head_dim=4
        ... )
        >>> text = torch.tensor([1, 2, 3, 4, 5, 6])
        >>> _ = verify_forward(model, pool, "a", text[:3])  # the prompt, cached
        >>> chunk = verify_forward(model, pool, "a", text[3:])  # (3, vocab)
        >>> whole = model(text[None])[0, 3:]
        >>> pool.lengths["a"], bool((chunk - whole).abs().max() < 1e-5)
        (6, True)
        >>> verify_forward(model, pool, "a", torch.tensor([7, 8]), parents=[-1, 1])
        Traceback (most recent call last):
        ...
        ValueError: parents[1] = 1 must be in [-1, 0]: a parent comes before its child
    """
    _validate.index_vector("tokens", tokens)
    L = len(tokens)
    parents = list(range(-1, L - 1)) if parents is None else _parents(parents)
    if len(parents) != L:
        raise ValueError(
            f"parents has {len(parents)} entries, expected one per token: tokens has shape ({L},)"
        )
    cached = pool.lengths.get(request, 0)
    new = pool.reserve(request, L)
    seen = torch.cat(
        [torch.ones(L, cached, dtype=torch.bool), tree_ancestor_mask(parents)], dim=1
    )  # (L, S_0 + L): the cache, then each node's own branch
    positions = (cached + tree_depths(parents))[None]  # (1, L)

    def attend(layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        pool.write(layer, request, new, k[0], v[0])  # (H_kv, L, d_k) each
        keys, values = pool.gather(layer, request)  # (H_kv, S_0 + L, d_k)
        return attention(q, keys[None], values[None], seen)  # (1, H, L, d_k)

    return run_decoder(model, tokens[None], positions, attend)[0]  # (1, L, V) -> (L, V)


def keep_path(pool: PagedKVCache, request: object, start: int, path: list[int]) -> None:
    """Keep, of a tree written from position ``start``, only the nodes on ``path``, in order.

    After `verify_forward` with a tree, the request's slots ``start, start + 1,
    ...`` hold the tree's nodes in the order they were listed. The accepted
    branch must end up where a chain would have put it: node ``path[j]`` at
    position ``start + j``. Its keys and values are copied there (a node never
    moves to a later slot: its index is at least its depth), then the rest is
    truncated. With ``path = [0, 1, ..., a]`` on a chain this is a plain truncation.

    Examples:
        >>> pool = PagedKVCache(
        ...     1, num_blocks=2, block_size=4, num_kv_heads=1, head_dim=1
        ... )
        >>> _ = pool.reserve("a", 5)
        >>> marks = torch.arange(5.0).view(1, 5, 1)  # slot i holds the number i
        >>> pool.write(0, "a", range(5), marks, marks)
        >>> keep_path(pool, "a", start=1, path=[0, 2, 3])  # tree nodes 0, 2, 3
        >>> pool.gather(0, "a")[0].flatten().tolist()
        [0.0, 1.0, 3.0, 4.0]
    """
    length = pool.lengths.get(request, 0)
    if not (isinstance(path, (list, tuple)) and all(isinstance(i, int) for i in path)):
        raise ValueError(f"path must be a list of node indices, got {path!r}")
    if any(not 0 <= i < length - start for i in path) or list(path) != sorted(set(path)):
        raise ValueError(
            f"path must list distinct nodes in increasing order, each in [0, {length - start - 1}] "
            f"(the {length - start} slots from start={start}), got {path}"
        )
    for layer in range(pool.num_layers):
        keys, values = pool.gather(layer, request)  # (H_kv, length, d_k)
        chosen = torch.tensor([start + i for i in path], dtype=torch.long)
        moved = range(start, start + len(path))
        pool.write(layer, request, moved, keys[:, chosen].clone(), values[:, chosen].clone())
    pool.truncate(request, start + len(path))


# --- accepting guesses -------------------------------------------------------------------------


def accept_greedy(logits: Tensor, draft: Tensor) -> tuple[int, int]:
    """Greedy verification: how many guesses match the target's argmax, and the token after them.

    Args:
        logits: ``(k + 1, V)``: row ``i`` is the target's prediction after guess ``i - 1``
            (row 0: after the last accepted token).
        draft: ``(k,)`` the guesses.

    Returns:
        ``(a, token)``: the first ``a`` guesses agree with the target; ``token`` is the
        target's argmax after them (a correction, or a bonus token if all ``k`` agree).

    Examples:
        >>> logits = torch.tensor([[0.0, 9.0], [9.0, 0.0], [0.0, 9.0]])  # 1, 0, 1
        >>> accept_greedy(logits, torch.tensor([1, 1]))  # guess 1 is wrong: 0
        (1, 0)
        >>> accept_greedy(logits, torch.tensor([1, 0]))  # both right, and a bonus
        (2, 1)
    """
    k = _draft_length(draft)
    _validate.shape("logits", _validate.tensor("logits", logits), (k + 1, None), "(k + 1, V), k = len(draft)")
    best = logits.argmax(dim=-1)  # (k + 1,)
    wrong = (best[:k] != draft).nonzero()
    a = int(wrong[0]) if len(wrong) else k
    return a, int(best[a])


def residual_distribution(p: Tensor, q: Tensor) -> Tensor:
    r"""Where to draw from after a rejection: $\max(0, p - q)$, normalized.

    Over the tokens where the target wants more than the drafter gives, in
    proportion to the shortfall. When $p = q$ a guess is never rejected, and
    this returns $p$ (any distribution would do).

    Examples:
        >>> p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
        >>> q = torch.tensor([0.7, 0.1, 0.2], dtype=torch.float64)
        >>> residual_distribution(p, q).tolist()  # only token 1 is short: by 0.2
        [0.0, 1.0, 0.0]
    """
    excess = (p - q).clamp(min=0)  # (V,)
    total = excess.sum()
    return excess / total if total > 0 else p


def _draw(probabilities: Tensor, generator: torch.Generator | None) -> int:
    """One token from ``(V,)`` probabilities, by the inverse of their cumulative sum at a uniform draw."""
    cumulative = probabilities.cumsum(dim=0)  # (V,)
    u = torch.rand((), generator=generator, dtype=torch.float64) * cumulative[-1]
    return min(int(torch.searchsorted(cumulative, u, right=True)), len(probabilities) - 1)


def accept_sampled(
    p: Tensor, q: Tensor, draft: Tensor, generator: torch.Generator | None = None
) -> tuple[int, int]:
    r"""Speculative sampling's rule: the accepted guesses, and one more token, distributed as ``p``'s.

    Guess $i$, drawn from the drafter's $q_i$, is kept with probability
    $\min(1, p_i(x) / q_i(x))$. At the first rejection the next token is drawn
    from `residual_distribution` $(p_i - q_i)_+$ and the round ends; if all
    $k$ are kept, a bonus token is drawn from $p_k$. Each token then has the
    target's probability exactly:

    $$
    \begin{aligned}
    &q(x) \min(1, p(x)/q(x)) \\
    &\quad + \bigl(1 - \textstyle\sum_y \min(p(y), q(y))\bigr)
    \frac{(p(x) - q(x))_+}{\sum_y (p(y) - q(y))_+} \\
    &= \min(p, q)(x) + (p(x) - q(x))_+ = p(x).
    \end{aligned}
    $$

    Args:
        p: ``(k + 1, V)`` the target's probabilities (row ``i``: after guess ``i - 1``).
        q: ``(k, V)`` the drafter's probabilities that each guess was drawn from.
        draft: ``(k,)`` the guesses.
        generator: The source of the uniform draws.

    Returns:
        ``(a, token)``: ``a`` guesses kept, then ``token``.

    Examples:
        A guess the target finds as likely as the drafter did is always kept:

        >>> p = torch.tensor([[0.5, 0.5], [0.9, 0.1]], dtype=torch.float64)
        >>> q = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
        >>> g = torch.Generator().manual_seed(0)
        >>> [accept_sampled(p, q, torch.tensor([1]), g)[0] for _ in range(5)]
        [1, 1, 1, 1, 1]
    """
    k = _draft_length(draft)
    _validate.shape("p", _validate.tensor("p", p), (k + 1, None), "(k + 1, V), k = len(draft)")
    _validate.shape("q", _validate.tensor("q", q), (k, p.shape[1]), "(k, V) with p's V")
    p, q = p.double(), q.double()  # the rule in float64: u * q < p is decided without rounding doubts
    for i in range(k):
        x = int(draft[i])
        u = torch.rand((), generator=generator, dtype=torch.float64)
        if not u * q[i, x] < p[i, x]:  # rejected, with probability 1 - min(1, p / q)
            return i, _draw(residual_distribution(p[i], q[i]), generator)
    return k, _draw(p[k], generator)


def accept_tree_greedy(logits: Tensor, tokens: Tensor, parents: list[int] | Tensor) -> tuple[list[int], int]:
    """Greedy verification of a tree: the longest branch the target agrees with, and the token after it.

    From the root (node 0, the last accepted token), step to a child whose
    token is the target's argmax at the current node, as long as there is one
    (if two siblings hold the same token, to the one whose branch goes deeper).

    Args:
        logits: ``(N, V)`` the target's logits at each node (`verify_forward` with ``parents``).
        tokens: ``(N,)`` the nodes' tokens, node 0 the root.
        parents: ``N`` parent indices, ``parents[0] = -1``.

    Returns:
        ``(path, token)``: the nodes kept, from the root, and the target's
        argmax after the last of them.

    Examples:
        A root with two guesses for the next token (2 and 1); the target picks 1:

        >>> logits = torch.eye(4)[[1, 3, 0]] * 9  # argmax: 1 at node 0, 3, then 0
        >>> accept_tree_greedy(logits, torch.tensor([0, 2, 1]), [-1, 0, 0])
        ([0, 2], 0)
    """
    parents = _parents(parents)
    _validate.index_vector("tokens", tokens)
    N = len(tokens)
    if len(parents) != N or parents[0] != -1 or -1 in parents[1:]:
        raise ValueError(f"parents must give node 0 as the only root of the {N} nodes, got {parents}")
    _validate.shape("logits", _validate.tensor("logits", logits), (N, None), "(N, V), one row per node")
    best = logits.argmax(dim=-1).tolist()  # (N,)

    def longest(node: int) -> list[int]:  # siblings may repeat a token: follow the deeper
        kept = [longest(c) for c, p in enumerate(parents) if p == node and int(tokens[c]) == best[node]]
        return [node, *max(kept, key=len, default=[])]

    path = longest(0)
    return path, best[path[-1]]


def draft_tree(
    distribution: Callable[[Tensor], Tensor], context: Tensor, widths: list[int]
) -> tuple[Tensor, list[int]]:
    """A tree of guesses: the ``widths[d]`` likeliest tokens at depth ``d + 1`` under each node.

    Args:
        distribution: ``distribution(tokens) -> (V,)`` probabilities of the next token
            (`NGramDrafter.distribution`, say).
        context: ``(n,)`` the text so far; its last token is the root, node 0.
        widths: How many children each node of each depth gets.

    Returns:
        ``(tokens, parents)``: ``(N,)`` the nodes, parents first, and their parents.

    Examples:
        >>> text = torch.tensor([0, 1, 0, 2, 0, 1])
        >>> drafter = NGramDrafter(text, vocab_size=3, order=2)
        >>> tokens, parents = draft_tree(
        ...     drafter.distribution, torch.tensor([0]), widths=[2, 1]
        ... )
        >>> tokens.tolist(), parents  # after 0: 1 or 2; after 1: 0; after 2: 0
        ([0, 1, 2, 0, 0], [-1, 0, 0, 1, 2])
    """
    _validate.index_vector("context", context)
    _validate.count("context's length", len(context))
    for d, w in enumerate(widths):
        _validate.count(f"widths[{d}]", w)
    tokens, parents, paths = [int(context[-1])], [-1], [context]
    level = [0]
    for w in widths:
        next_level = []
        for node in level:
            likeliest = distribution(paths[node]).topk(w).indices.tolist()
            for x in likeliest:
                tokens.append(x)
                parents.append(node)
                paths.append(torch.cat([paths[node], torch.tensor([x])]))
                next_level.append(len(tokens) - 1)
        level = next_level
    return torch.tensor(tokens, dtype=torch.long), parents


def _draft_length(draft: object) -> int:
    _validate.index_vector("draft", draft)
    return len(draft)


# --- drafters ----------------------------------------------------------------------------------


def _probabilities(logits: Tensor, temperature: float | None) -> Tensor:
    """``(..., V)`` logits -> probabilities at ``temperature``; one-hot on the argmax when ``None``."""
    if temperature is None:
        return F.one_hot(logits.argmax(dim=-1), logits.shape[-1]).double()
    return F.softmax(logits.double() / temperature, dim=-1)


@dataclass
class NGramDrafter:
    r"""Guesses from the counts of a text: the next token after the last ``order - 1`` tokens.

    $q(x \mid c) \propto n(c\,x) + \alpha$, counted on ``train_ids``; greedy
    drafting takes the most frequent continuation. It runs no model: a guess
    costs one table lookup.

    Attributes:
        counts: ``(V,) * order`` counts plus ``alpha``, the last axis the next token.

    Examples:
        >>> text = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
        >>> drafter = NGramDrafter(text, vocab_size=3, order=2)
        >>> drafter.propose(torch.tensor([2, 0]), k=4)[0].tolist()  # 0, then 1, 2
        [1, 2, 0, 1]
        >>> drafter.propose(torch.tensor([5]), k=1)
        Traceback (most recent call last):
        ...
        ValueError: context must lie in [0, 2], got 5 .. 5
    """

    train_ids: Tensor = field(repr=False)
    vocab_size: int
    order: int = 3
    alpha: float = 0.01
    counts: Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _validate.index_vector("train_ids", self.train_ids)
        _validate.count("vocab_size", self.vocab_size)
        _validate.count("order", self.order, maximum=4)
        _validate.number("alpha", self.alpha, 0.0, above=True)
        _validate.ids_below("train_ids", self.train_ids, self.vocab_size)
        _validate.count("train_ids' length", len(self.train_ids), minimum=self.order)
        V, n = self.vocab_size, self.order
        index = torch.zeros(len(self.train_ids) - n + 1, dtype=torch.long)
        for j in range(n):  # the n-gram starting at each position, as one number in base V
            index = index * V + self.train_ids[j : len(self.train_ids) - n + 1 + j]
        counts = torch.bincount(index, minlength=V**n).float() + self.alpha
        self.counts = counts.view((V,) * n)  # (V, ..., V): context, then the next token

    def distribution(self, context: Tensor, temperature: float | None = 1.0) -> Tensor:
        """``(V,)`` the drafter's probabilities after ``context`` (its last ``order - 1`` tokens).

        ``temperature=None`` gives the greedy drafter's: all on the most frequent continuation.
        """
        row = self.counts[tuple(context[len(context) - self.order + 1 :].tolist())]  # (V,)
        if temperature is None:
            return _probabilities(row, None)
        return _probabilities(row.double().log(), temperature)

    def propose(
        self,
        context: Tensor,
        k: int,
        temperature: float | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``k`` guesses after ``context`` ``(n,)``, and the ``(k, V)`` probabilities each came from."""
        _validate.index_vector("context", context)
        _validate.ids_below("context", context, self.vocab_size)
        _validate.count("context's length", len(context), minimum=self.order - 1)
        _validate.count("k", k, minimum=0)
        tokens, rows = context.clone(), []
        for _ in range(k):
            q = self.distribution(tokens, temperature)  # (V,)
            x = int(q.argmax()) if temperature is None else _draw(q, generator)
            rows.append(q)
            tokens = torch.cat([tokens, torch.tensor([x])])
        return tokens[len(context) :], torch.stack(rows) if rows else torch.zeros(0, self.vocab_size)

    def rollback(self, length: int) -> None:
        """Nothing to roll back: the drafter keeps no state between rounds."""


@dataclass
class ModelDrafter:
    """Guesses from a smaller model, one token at a time, with its own paged cache.

    Each round, `propose` first runs the context tokens its cache lacks (the
    target's correction, and after a round that kept every guess, the last
    guess too), then writes guess $i$ from the pass over guess $i - 1$: the
    last guess is never run, so a round of $k$ guesses adds ``len(context) + k
    - 1`` positions. `rollback` keeps the positions that are still the text's.

    Attributes:
        model: The drafter's model (a `attn_ref.decoder.TinyDecoder` or `attn_ref.training.CharTransformer`).
        pool: Its own paged cache.
        request: Its id in ``pool``.
        forwards: Passes of the model so far.
    """

    model: torch.nn.Module
    pool: PagedKVCache
    request: object = "draft"
    forwards: int = 0

    @property
    def length(self) -> int:
        """Positions in the drafter's cache."""
        return self.pool.lengths.get(self.request, 0)

    def propose(
        self,
        context: Tensor,
        k: int,
        temperature: float | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``k`` guesses after ``context`` ``(n,)``, and the ``(k, V)`` probabilities each came from.

        Raises:
            ValueError: The cache holds more positions than ``context`` has
                tokens (a rollback was missed), or a bad argument.
        """
        _validate.index_vector("context", context)
        _validate.count("context's length", len(context))
        _validate.count("k", k, minimum=0)
        if self.length >= len(context):
            raise ValueError(
                f"the drafter's cache holds {self.length} positions, but context has {len(context)} tokens: "
                "roll it back to the text it shares with the target before the next round"
            )
        guesses, rows = [], []
        step = context[self.length :]  # (m,): what the cache lacks, the last token included
        with torch.no_grad():
            for _ in range(k):
                logits = verify_forward(self.model, self.pool, self.request, step)[-1]  # (V,)
                self.forwards += 1
                q = _probabilities(logits, temperature)  # (V,)
                x = int(q.argmax()) if temperature is None else _draw(q, generator)
                guesses.append(x)
                rows.append(q)
                step = torch.tensor([x])
        V = self.model.head.out_features
        return torch.tensor(guesses, dtype=torch.long), torch.stack(rows) if rows else torch.zeros(0, V)

    def rollback(self, length: int) -> None:
        """Keep at most the first ``length`` positions: those of the text the target accepted."""
        _validate.count("length", length, minimum=0)
        if self.request in self.pool.lengths:
            self.pool.truncate(self.request, min(self.length, length))


# --- the loop ----------------------------------------------------------------------------------


@dataclass
class SpeculativeResult:
    """What `speculative_generate` returns.

    Attributes:
        tokens: ``(n,)`` the new tokens.
        logits: ``(n, V)`` the target's logits each new token was chosen from.
        drafted: Guesses proposed in each round (one round: one target pass).
        accepted: Guesses kept in each round.
    """

    tokens: Tensor
    logits: Tensor
    drafted: list[int]
    accepted: list[int]

    @property
    def target_forwards(self) -> int:
        """Passes of the target after the prompt: one per round."""
        return len(self.accepted)

    @property
    def tokens_per_forward(self) -> float:
        """New tokens per pass of the target (1 for plain decoding)."""
        return len(self.tokens) / len(self.accepted)

    @property
    def acceptance_rate(self) -> float:
        """Guesses kept over guesses proposed (nan if none was proposed)."""
        proposed = sum(self.drafted)
        return sum(self.accepted) / proposed if proposed else float("nan")


@torch.no_grad()
def speculative_generate(
    target: torch.nn.Module,
    drafter: NGramDrafter | ModelDrafter,
    pool: PagedKVCache,
    prompt: Tensor,
    max_new_tokens: int,
    k: int,
    *,
    temperature: float | None = None,
    generator: torch.Generator | None = None,
    request: object = "target",
) -> SpeculativeResult:
    """Decode ``max_new_tokens`` after ``prompt`` with ``drafter``'s guesses, ``k`` per round.

    The target's cache holds every token but the last one emitted. Each
    round: the drafter guesses ``k`` tokens (fewer near the end, so that no
    round writes past ``max_new_tokens``); `verify_forward` runs the last
    token and the guesses, ``k + 1`` queries, in one pass; `accept_greedy`
    (``temperature=None``) or `accept_sampled` keeps ``a`` guesses and adds
    one token; the target's cache is truncated to the text (dropping the
    ``k - a`` rejected guesses) and the drafter rolls back to it. ``k = 0`` is
    plain decoding, one token per pass.

    Args:
        target: The model whose text this is.
        drafter: An `NGramDrafter` or a `ModelDrafter` (with an empty cache).
        pool: The target's paged cache; ``request`` must not be in it yet.
        prompt: ``(T,)`` token ids, ``T >= 1``.
        max_new_tokens: Tokens to generate.
        k: Guesses per round.
        temperature: ``None`` for greedy decoding, else the sampling temperature of both models.
        generator: The source of the draws when sampling.
        request: The id of the target's request in ``pool``.

    Returns:
        A `SpeculativeResult`, with ``max_new_tokens`` tokens.

    Examples:
        With a drafter that is the target itself, every guess is kept:

        >>> from attn_ref.decoder import TinyDecoder
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(10, 32, embed_dim=8, num_layers=1, num_heads=2)
        >>> def new_pool():
        ...     return PagedKVCache(
        ...         1, num_blocks=8, block_size=4, num_kv_heads=2, head_dim=4
        ...     )
        >>> drafter = ModelDrafter(model, new_pool())
        >>> prompt = torch.tensor([1, 2, 3])
        >>> fast = speculative_generate(model, drafter, new_pool(), prompt, 9, 2)
        >>> fast.accepted, fast.tokens_per_forward  # 2 guesses and a bonus, 3 times
        ([2, 2, 2], 3.0)
        >>> plain = speculative_generate(model, drafter, new_pool(), prompt, 9, 0)
        >>> torch.equal(fast.tokens, plain.tokens), plain.target_forwards
        (True, 9)
    """
    _validate.index_vector("prompt", prompt)
    _validate.count("prompt's length", len(prompt))
    _validate.count("max_new_tokens", max_new_tokens)
    _validate.count("k", k, minimum=0)
    if temperature is not None:
        _validate.number("temperature", temperature, 0.0, above=True)
    if request in pool.lengths:
        raise ValueError(f"request {request!r} already holds {pool.lengths[request]} positions in pool")
    text = prompt.clone()
    if len(prompt) > 1:
        verify_forward(target, pool, request, prompt[:-1])  # the prompt but its last token
    drafter.rollback(0)
    tokens, logits, drafted, accepted = [], [], [], []
    while len(text) - len(prompt) < max_new_tokens:
        n = len(text)
        guesses = min(k, max_new_tokens - (n - len(prompt)) - 1)  # a round emits up to guesses + 1
        draft, q = drafter.propose(text, guesses, temperature, generator)
        scored = verify_forward(target, pool, request, torch.cat([text[-1:], draft]))  # (guesses + 1, V)
        if temperature is None:
            a, token = accept_greedy(scored, draft)
        else:
            p = _probabilities(scored, temperature)
            a, token = accept_sampled(p, q, draft, generator)
        new = torch.cat([draft[:a], torch.tensor([token])])  # (a + 1,)
        text = torch.cat([text, new])
        tokens.append(new)
        logits.append(scored[: a + 1])
        drafted.append(guesses)
        accepted.append(a)
        pool.truncate(request, n + a)  # the text but its last token: the k - a rejected guesses go
        drafter.rollback(n + a)
    return SpeculativeResult(torch.cat(tokens), torch.cat(logits), drafted, accepted)

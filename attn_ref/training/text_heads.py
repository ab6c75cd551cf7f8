r"""What the character model's heads attend to: one score, and the targets it is read against.

Every head score has one form (`target_scores`): for every query that has a
*target* key, the weight the head puts on it, averaged over those queries; the
prefix matching score of Olsson et al. (2022) is one such score. The targets
are the previous character (`previous_char_targets`), the first letter of the
current word (`word_start_targets`), the bracket or quote still open
(`opener_targets`, from `open_spans`), and the characters that followed an
earlier copy of the last few characters (`induction_targets`).
`closing_predictions` and `copy_predictions` mark the predictions where a head
should matter, for `attn_ref.training.text.ablated_losses` to check with the loss.
"""

from __future__ import annotations

import string

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref.training.corpus import ALPHABET, char_ids, decode

__all__ = [
    "closing_predictions",
    "copy_predictions",
    "induction_targets",
    "open_spans",
    "opener_targets",
    "previous_char_targets",
    "target_scores",
    "word_start_targets",
]

_OPENERS, _CLOSERS, QUOTE = "([{", ")]}", '"'
_LETTERS = torch.tensor([c in string.ascii_letters for c in ALPHABET])  # (V,)


# --- what the heads attend to -----------------------------------------------------------------


def target_scores(weights: Tensor, targets: Tensor) -> Tensor:
    r"""Each head's mean attention weight on its targets, over the queries that have one.

    $$
    \text{score}_h = \operatorname{mean}_{(b, i) \in Q}\;
    \sum_{j:\, t_{bij}} a^{(h)}_{bij}
    $$

    where $Q$ holds the queries that have at least one target.
    A head that always attends to its targets scores 1. A head that spreads
    its weight evenly also scores above 0, since the targets are among the
    keys it sees: compare a score with that of uniform weights.

    Args:
        weights: ``(B, H, T, T)`` attention weights of one layer.
        targets: ``(B, T, T)`` booleans, ``True`` where key ``j`` is a target of query ``i``.

    Returns:
        ``(H,)`` scores; ``nan`` if no query has a target.

    Examples:
        Three queries: query 1 targets key 0, query 2 targets keys 0 and 1.

        >>> weights = torch.tensor([[1.0, 0.0, 0.0],
        ...                         [0.8, 0.2, 0.0],
        ...                         [0.1, 0.3, 0.6]])
        >>> targets = torch.tensor([[False, False, False],
        ...                         [True, False, False],
        ...                         [True, True, False]])
        >>> target_scores(weights[None, None], targets[None])  # (0.8 + 0.4) / 2
        tensor([0.6000])
    """
    if not isinstance(weights, Tensor) or weights.ndim != 4 or not weights.dtype.is_floating_point:
        got = (
            f"shape {tuple(weights.shape)} and dtype {weights.dtype}"
            if isinstance(weights, Tensor)
            else type(weights).__name__
        )
        raise ValueError(f"weights must be a floating (B, H, T, T) tensor, got {got}")
    B, _, T, S = weights.shape
    if not isinstance(targets, Tensor) or targets.dtype != torch.bool or targets.shape != (B, T, S):
        got = (
            f"{tuple(targets.shape)} {targets.dtype}"
            if isinstance(targets, Tensor)
            else type(targets).__name__
        )
        raise ValueError(
            f"targets must be a ({B}, {T}, {S}) boolean tensor, like weights without H; got {got}"
        )
    queries = targets.any(dim=-1)  # (B, T)
    on_target = (weights * targets[:, None]).sum(dim=-1)  # (B, H, T)
    return (on_target * queries[:, None]).sum(dim=(0, 2)) / queries.sum()  # (H,)


def _one_key(keys: Tensor) -> Tensor:
    """One key per query, ``(B, T)`` indices (``-1``: none) -> ``(B, T, T)`` booleans."""
    T = keys.shape[1]
    return keys[:, :, None] == torch.arange(T, device=keys.device)  # (B, T, 1) == (T,) -> (B, T, T)


def previous_char_targets(batch: Tensor) -> Tensor:
    """Query $i \\ge 1$ targets key $i - 1$: ``(B, T)`` ids -> ``(B, T, T)`` booleans.

    Examples:
        >>> from attn_ref.training import encode
        >>> previous_char_targets(encode("abc")[None]).int()
        tensor([[[0, 0, 0],
                 [1, 0, 0],
                 [0, 1, 0]]], dtype=torch.int32)
    """
    char_ids("batch", batch, 2)
    B, T = batch.shape
    return _one_key((torch.arange(T) - 1).expand(B, T))  # query 0 gets -1: no target


def word_start_targets(batch: Tensor, min_offset: int = 2) -> Tensor:
    """Query $i$ inside a word targets the word's first letter, at least ``min_offset`` back.

    A word is a run of ASCII letters. The query must be a letter at least
    ``min_offset`` letters into its word (so that a previous-character head
    does not score), and the word must start inside the window, after a
    character that is not a letter (so that it did not begin before it).

    Examples:
        >>> from attn_ref.training import encode
        >>> targets = word_start_targets(encode(" for x")[None])[0]
        >>> targets.nonzero().tolist()  # query 3 ("r") targets key 1 ("f")
        [[3, 1]]
    """
    char_ids("batch", batch, 2)
    _validate.count("min_offset", min_offset)
    B, T = batch.shape
    letter = _LETTERS[batch]  # (B, T)
    position = torch.arange(T).expand(B, T)  # (B, T)
    after_other = torch.cat([torch.zeros(B, 1, dtype=torch.bool), ~letter[:, :-1]], dim=1)  # (B, T)
    starts_here = letter & after_other
    starts_here[:, 0] = False  # a word at position 0 may have begun before the window
    start = torch.where(starts_here, position, -1).cummax(dim=1).values  # (B, T): latest start so far
    broken = torch.where(~letter, position, -1).cummax(dim=1).values  # (B, T): latest non-letter
    inside = letter & (start > broken) & (position - start >= min_offset)
    return _one_key(torch.where(inside, start, -1))


def _check_kinds(kinds: object) -> str:
    if not isinstance(kinds, str) or not kinds or set(kinds) - set(_OPENERS + QUOTE):
        raise ValueError(f"kinds must be a non-empty string of characters from '([{{\"', got {kinds!r}")
    return kinds


def open_spans(ids: Tensor, kinds: str = "([{") -> tuple[Tensor, Tensor]:
    """The innermost span of ``kinds`` open at each position of a ``(N,)`` text, and where spans close.

    One stack holds every open bracket and quote. A closing bracket closes
    the span on top if that is its own kind (otherwise it is ignored); a quote
    closes the open quote, and with it the brackets opened inside it (so that
    the ``(`` of ``"("`` stays inside its quotes), or else opens one. A blank
    line closes everything.

    Args:
        ids: ``(N,)`` the text.
        kinds: Which spans count: any of ``([{"``.

    Returns:
        ``(openers, closes)``: two ``(N,)`` tensors. ``openers[p]`` is the
        position of the opener of the innermost span of ``kinds`` open at
        ``p`` (the character at ``p`` not yet read), ``-1`` if none;
        ``closes[p]`` is whether the character at ``p`` closes such a span.

    Examples:
        >>> from attn_ref.training import encode
        >>> openers, closes = open_spans(encode('a "b(c" d'), '"')
        >>> openers.tolist()  # the quote at 2 is open from 3 to 6
        [-1, -1, -1, 2, 2, 2, 2, -1, -1]
        >>> closes.nonzero().flatten().tolist()
        [6]
    """
    char_ids("ids", ids, 1)
    _check_kinds(kinds)
    text = decode(ids)
    keys = torch.full((len(text),), -1, dtype=torch.long)
    closes = torch.zeros(len(text), dtype=torch.bool)
    stack: list[tuple[str, int]] = []  # (opener, position), innermost last
    previous = ""
    for i, c in enumerate(text):
        if c == "\n" and previous == "\n":
            stack.clear()
        keys[i] = next((j for opener, j in reversed(stack) if opener in kinds), -1)
        if c in _OPENERS:
            stack.append((c, i))
        elif c in _CLOSERS:
            if stack and stack[-1][0] == _OPENERS[_CLOSERS.index(c)]:
                closes[i] = stack.pop()[0] in kinds
        elif c == QUOTE:
            quotes = [k for k, (opener, _) in enumerate(stack) if opener == QUOTE]
            if quotes:
                del stack[quotes[-1] :]
                closes[i] = QUOTE in kinds
            else:
                stack.append((c, i))
        previous = c
    return keys, closes


def opener_targets(ids: Tensor, length: int, kinds: str = "([{", min_offset: int = 2) -> Tensor:
    """Query $i$ targets the innermost bracket (or quote) still open at $i$, if it is in the window.

    The spans are found over the whole text, so that a window that starts
    inside a span still knows it: brackets nest, a quote ``"`` closes the open
    quote (and any bracket opened inside it) or else opens one, and a blank
    line closes everything. Only openers of ``kinds`` are targets.

    Args:
        ids: ``(N,)`` the text, cut into windows as `windows` cuts it.
        length: Window length ``T``.
        kinds: Which openers are targets: any of ``([{"``.
        min_offset: How far back the opener must be, at least.

    Returns:
        ``(n, T, T)`` booleans, one ``(T, T)`` per `windows` window.

    Examples:
        >>> from attn_ref.training import encode
        >>> text = 'f(x, "a(b") + 1'
        >>> brackets = opener_targets(encode(text), len(text), "([{", 1)[0]
        >>> def target(i):  # the key query i targets, or None
        ...     keys = brackets[i].nonzero().flatten().tolist()
        ...     return keys[0] if keys else None
        >>> [target(i) for i in (3, 8, 10, 11)]  # "," "b" ")" " "
        [1, 7, 1, None]
        >>> quotes = opener_targets(encode(text), len(text), '"', 1)[0]
        >>> quotes[6:10].int().argmax(-1).tolist()  # "a(b" and its closing quote
        [5, 5, 5, 5]
    """
    char_ids("ids", ids, 1)
    _validate.count("length", length, maximum=len(ids))
    _validate.count("min_offset", min_offset)
    keys, _ = open_spans(ids, kinds)
    n = len(ids) // length
    keys = keys[: n * length].view(n, length)  # (N,) -> (n, T), as `windows` cuts
    local = keys - (torch.arange(n) * length)[:, None]  # (n, T): the opener's place in the window
    ok = (keys >= 0) & (local >= 0) & (torch.arange(length) - local >= min_offset)
    return _one_key(torch.where(ok, local, -1))


def closing_predictions(ids: Tensor, length: int, kinds: str = "([{") -> Tensor:
    """Which predictions are of a character that closes a span whose opener is in the window.

    Prediction $i$ of a window is that of character $i + 1$. It is marked
    when that character closes a span of ``kinds`` (as `opener_targets` finds
    them) that opened in the window: a model that reads the window can know
    what to close.

    Returns:
        ``(n, T - 1)`` booleans, one row per `windows` window.

    Examples:
        >>> from attn_ref.training import encode
        >>> closing_predictions(encode('f(x) "a"'), 8, "([{").int()
        tensor([[0, 0, 1, 0, 0, 0, 0]], dtype=torch.int32)
        >>> closing_predictions(encode('f(x) "a"'), 8, '"').int()
        tensor([[0, 0, 0, 0, 0, 0, 1]], dtype=torch.int32)
    """
    char_ids("ids", ids, 1)
    _validate.count("length", length, minimum=2, maximum=len(ids))
    keys, closes = open_spans(ids, kinds)
    n = len(ids) // length
    keys = keys[: n * length].view(n, length)  # (n, T): the opener open at each position
    closes = closes[: n * length].view(n, length)  # (n, T)
    local = keys - (torch.arange(n) * length)[:, None]  # (n, T)
    return closes[:, 1:] & (local[:, 1:] >= 0)  # (n, T - 1): character i + 1 closes, opener in window


def induction_targets(batch: Tensor, k: int = 3) -> Tensor:
    r"""Query $i$ targets every key $j$ that followed an earlier copy of the query's last ``k`` characters.

    $$
    \begin{aligned}
    t_{ij} = {} & \big[\, x_{j-k} \dots x_{j-1} = x_{i-k+1} \dots x_i \,\big] \\
    & \text{and } j - 1 < i - k + 1
    \end{aligned}
    $$

    With ``k = 1`` this is the prefix matching of Olsson et al. (2022): keys
    whose previous token is the current one. On text one character matches
    too often (every ``e`` after every other ``e``), so ``k`` characters must
    match, the "current and/or recent tokens" of their definition. The
    earlier copy must end before the current one begins, so that in a run
    such as ``-----`` the previous character is not a target.

    Examples:
        >>> from attn_ref.training import encode
        >>> targets = induction_targets(encode("abcXabcY")[None], k=2)[0]
        >>> targets.nonzero().tolist()  # "ab" -> key 2 ("c"), "bc" -> key 3 ("X")
        [[5, 2], [6, 3]]
    """
    char_ids("batch", batch, 2)
    _validate.count("k", k)
    B, T = batch.shape
    match = torch.ones(B, T, T, dtype=torch.bool)  # (B, T, T): query i, key j
    for d in range(k):  # x_{i-d} == x_{j-1-d}; roll wraps, but `valid` drops those pairs
        query_side = torch.roll(batch, d, dims=1)  # (B, T): x_{i-d}
        key_side = torch.roll(batch, 1 + d, dims=1)  # (B, T): x_{j-1-d}
        match &= query_side[:, :, None] == key_side[:, None, :]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    valid = (j >= k) & (i >= k - 1) & (j - 1 < i - k + 1)  # (T, T): both copies in the window, apart
    return match & valid


def copy_predictions(batch: Tensor, k: int = 3) -> Tensor:
    """Which predictions copying could get right: ``(B, T)`` ids -> ``(B, T - 1)`` booleans.

    Prediction $i$ is marked when some key $j$ that `induction_targets`
    gives query $i$ holds the right next character, $x_j = x_{i+1}$.

    Examples:
        >>> from attn_ref.training import encode
        >>> copy_predictions(encode("abcXabcY")[None], k=2).int()
        tensor([[0, 0, 0, 0, 0, 1, 0]], dtype=torch.int32)
    """
    targets = induction_targets(batch, k)[:, :-1]  # (B, T - 1, T): queries 0 .. T - 2
    right = batch[:, None, :] == batch[:, 1:, None]  # (B, T - 1, T): x_j == x_{i+1}
    return (targets & right).any(dim=-1)

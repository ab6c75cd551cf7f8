r"""A key/value cache over budget: which entries to keep, chosen by position, by chance or by attention.

After the prompt, each head keeps ``budget`` of its ``S`` cached entries and drops the rest; the
queries that follow read only what was kept (and their own new keys). Each policy returns a
boolean *keep* mask, ``(..., S)``, true for a kept entry:

- `sink_window_keep`: the first ``num_sinks`` entries and the most recent ones (StreamingLLM);
- `random_keep`: entries drawn at random, a baseline;
- `h2o_keep`: the entries with the most attention accumulated over the prompt's queries, beside
  a window of recent ones (H2O, Zhang et al., 2023);
- `snapkv_keep`: the entries the last ``window`` queries of the prompt attend to, their votes
  smoothed by a pooling over neighbouring positions, beside that window (SnapKV, Li et al., 2024);
- `tova_keep`: the entries the last query attends to most, averaged over the layer's heads
  (TOVA, Oren et al., 2024).

`keep_top` is the choice they share: the top scores, some entries forced in. Quest (Tang et al.,
2024) drops nothing: it keeps a summary of every page of keys, the smallest and the largest value
of each channel, and each query reads only the pages whose bound on $q \cdot k$ is highest
(`quest_page_scores`, `quest_keep`). `decode_mask` turns a keep mask into the attention mask of
the whole sequence, so that one causal pass computes what decoding with the reduced cache gives.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attn_ref import _validate

__all__ = [
    "decode_mask",
    "h2o_keep",
    "keep_top",
    "quest_keep",
    "quest_page_scores",
    "random_keep",
    "sink_window_keep",
    "snapkv_keep",
    "tova_keep",
]


def keep_top(scores: Tensor, budget: int, forced: Tensor | None = None) -> Tensor:
    r"""Keep ``budget`` entries: every ``forced`` one, then the highest scores.

    Ties go to the earlier position, so the choice is the same on every machine.

    Args:
        scores: ``(..., S)`` one score per cached entry.
        budget: Entries kept, ``0 <= budget <= S``.
        forced: ``(S,)`` or ``(..., S)`` boolean, entries kept whatever their score; at most
            ``budget`` of them.

    Returns:
        ``(..., S)`` boolean, exactly ``budget`` true in each row.

    Raises:
        ValueError: ``budget`` outside ``[0, S]``, ``forced`` of another length or with more
            than ``budget`` entries.

    Examples:
        >>> scores = torch.tensor([0.5, 0.1, 0.9, 0.1, 0.3])
        >>> keep_top(scores, 2)
        tensor([ True, False,  True, False, False])
        >>> recent = torch.tensor([False, False, False, False, True])
        >>> keep_top(scores, 2, forced=recent)  # the last entry, then the best
        tensor([False, False,  True, False,  True])
    """
    _validate.tensor("scores", scores, min_ndim=1)
    S = scores.shape[-1]
    _validate.count("budget", budget, minimum=0, maximum=S)
    ranked = scores
    if forced is not None:
        _validate.boolean("forced", forced, min_ndim=1)
        if forced.shape[-1] != S:
            raise ValueError(f"forced has shape {tuple(forced.shape)}, expected (..., S={S}) like scores")
        if int(forced.sum(-1).max()) > budget:
            raise ValueError(f"forced keeps {int(forced.sum(-1).max())} entries, more than budget={budget}")
        ranked = scores.masked_fill(forced, torch.inf)  # (..., S): forced entries first
    order = torch.sort(ranked, dim=-1, descending=True, stable=True).indices  # (..., S)
    keep = torch.zeros(ranked.shape, dtype=torch.bool, device=scores.device)
    return keep.scatter(-1, order[..., :budget], True)


def sink_window_keep(length: int, budget: int, num_sinks: int = 4) -> Tensor:
    """StreamingLLM's cache: the first ``num_sinks`` entries and the ``budget - num_sinks`` last.

    Args:
        length: Entries in the cache, ``S``.
        budget: Entries kept, at most ``S``.
        num_sinks: Attention sinks kept at the start, at most ``budget``.

    Returns:
        ``(S,)`` boolean, the same for every head.

    Examples:
        >>> sink_window_keep(8, budget=4, num_sinks=1).int()
        tensor([1, 0, 0, 0, 0, 1, 1, 1], dtype=torch.int32)
    """
    S = _validate.count("length", length)
    _validate.count("budget", budget, minimum=0, maximum=S)
    _validate.count("num_sinks", num_sinks, minimum=0, maximum=budget)
    position = torch.arange(S)  # (S,)
    return (position < num_sinks) | (position >= S - (budget - num_sinks))


def random_keep(shape: tuple[int, ...], budget: int, generator: torch.Generator | None = None) -> Tensor:
    """``budget`` entries of each row drawn uniformly at random, without replacement.

    Args:
        shape: ``(..., S)``, such as ``(B, H, S)``: one draw per head.
        budget: Entries kept in each row, at most ``S``.
        generator: The random generator to draw from.

    Returns:
        ``(..., S)`` boolean.

    Examples:
        >>> keep = random_keep((2, 6), 3, torch.Generator().manual_seed(0))
        >>> keep.sum(-1).tolist()
        [3, 3]
    """
    if not shape or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in shape):
        raise ValueError(f"shape must be a tuple of positive ints (..., S), got {shape!r}")
    return keep_top(torch.rand(shape, generator=generator), budget)


def _prompt_weights(weights: Tensor) -> int:
    """The prompt's causal weights ``(..., T, T)``; returns ``T``."""
    _validate.tensor("weights", weights, min_ndim=2)
    T = weights.shape[-1]
    if weights.shape[-2] != T:
        raise ValueError(
            f"weights has shape {tuple(weights.shape)}, expected (..., T, T): every query of the prompt "
            "against every key"
        )
    return T


def h2o_keep(weights: Tensor, budget: int, recent: int | None = None) -> Tensor:
    r"""H2O: the *heavy hitters*, most attention accumulated over the prompt, and the recent entries.

    Entry $j$ scores $\sum_i a_{ij}$, the weight every query of the prompt gave it (the column
    sum of the causal weights). The last ``recent`` entries are kept whatever their score; the
    rest of the budget goes to the highest scores.

    Args:
        weights: ``(..., T, T)`` causal attention weights of the prompt, per head.
        budget: Entries kept per head, at most ``T``.
        recent: Recent entries always kept; half the budget unless given (H2O's even split).

    Returns:
        ``(..., T)`` boolean.

    Examples:
        Three queries; key 0 collects 1 + 0.9 + 0.2, key 1 collects 0.1 + 0.1:

        >>> weights = torch.tensor([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.2, 0.1, 0.7]])
        >>> weights.sum(0)
        tensor([2.1000, 0.2000, 0.7000])
        >>> h2o_keep(weights, budget=2, recent=1)
        tensor([ True, False,  True])
    """
    T = _prompt_weights(weights)
    _validate.count("budget", budget, minimum=0, maximum=T)
    recent = budget // 2 if recent is None else _validate.count("recent", recent, minimum=0, maximum=budget)
    is_recent = torch.arange(T, device=weights.device) >= T - recent  # (T,)
    return keep_top(weights.sum(-2), budget, forced=is_recent)  # (..., T, T) -> (..., T)


def snapkv_keep(weights: Tensor, budget: int, window: int, kernel_size: int = 5) -> Tensor:
    r"""SnapKV: the entries the prompt's last ``window`` queries attend to, and that window.

    Each entry before the window gets the votes of the window's queries, $\sum_i a_{ij}$ over
    the last ``window`` rows; the votes are averaged over ``kernel_size`` neighbouring positions
    (zeros past either end, as ``avg_pool1d`` pads), so that an entry next to a chosen one
    scores too. The window's own entries are kept, and the top pooled votes fill the rest of the
    budget.

    Args:
        weights: ``(..., T, T)`` causal attention weights of the prompt, per head.
        budget: Entries kept per head, at least ``window`` and at most ``T``.
        window: The observation window: the last queries of the prompt, ``1 <= window < T``.
        kernel_size: Width of the pooling, odd.

    Returns:
        ``(..., T)`` boolean.

    Examples:
        Six keys and a window of the last 2 queries. The first four rows are uniform; the
        window's rows give keys 0 to 3 the votes 0.1 + 0.2, 0, 0.1 + 0, 0.6 + 0.6:

        >>> weights = torch.ones(6, 6).tril()
        >>> weights = weights / weights.sum(-1, keepdim=True)  # uniform causal rows
        >>> weights[4] = torch.tensor([0.2, 0.0, 0.0, 0.6, 0.2, 0.0])
        >>> weights[5] = torch.tensor([0.1, 0.0, 0.1, 0.6, 0.1, 0.1])
        >>> snapkv_keep(weights, budget=4, window=2, kernel_size=1).int()
        tensor([1, 0, 0, 1, 1, 1], dtype=torch.int32)

        Pooled over 3 positions, key 0 scores (0 + 0.3 + 0) / 3 and key 2, beside key 3,
        (0 + 0.1 + 1.2) / 3: key 2 is kept instead.

        >>> snapkv_keep(weights, budget=4, window=2, kernel_size=3).int()
        tensor([0, 0, 1, 1, 1, 1], dtype=torch.int32)
    """
    T = _prompt_weights(weights)
    window = _validate.count("window", window, minimum=1, maximum=T - 1)
    _validate.count("budget", budget, minimum=window, maximum=T)
    _validate.count("kernel_size", kernel_size)
    if kernel_size % 2 == 0:
        raise ValueError(f"kernel_size must be odd (a window centred on each entry), got {kernel_size}")
    votes = weights[..., T - window :, : T - window].sum(-2)  # (..., window, T - window) -> (..., T - window)
    flat = votes.reshape(-1, 1, T - window)  # (N, 1, T - window): avg_pool1d's (batch, channels, length)
    pooled = F.avg_pool1d(flat, kernel_size, stride=1, padding=kernel_size // 2).reshape(votes.shape)
    in_window = torch.arange(T, device=weights.device) >= T - window  # (T,)
    scores = torch.cat([pooled, torch.zeros_like(weights[..., 0, T - window :])], dim=-1)  # (..., T)
    return keep_top(scores, budget, forced=in_window)


def tova_keep(weights: Tensor, budget: int) -> Tensor:
    r"""TOVA: the entries the last query attends to most, its weights averaged over the heads.

    One choice serves every head of the layer, as in TOVA's code and kvpress's ``TOVAPress``.

    Args:
        weights: ``(..., H, T, T)`` causal attention weights of the prompt, every head of a layer.
        budget: Entries kept, at most ``T``.

    Returns:
        ``(..., H, T)`` boolean, the same row for every head.

    Examples:
        Two heads; the last query's weights average to 0.3, 0.45, 0.25:

        >>> last = torch.tensor([[0.1, 0.8, 0.1], [0.5, 0.1, 0.4]])  # (H, S)
        >>> weights = torch.zeros(2, 3, 3)
        >>> weights[:, -1] = last
        >>> tova_keep(weights, budget=2).int()
        tensor([[1, 1, 0],
                [1, 1, 0]], dtype=torch.int32)
    """
    T = _prompt_weights(weights)
    if weights.ndim < 3:
        raise ValueError(
            f"weights has shape {tuple(weights.shape)}, expected (..., H, T, T): a layer's heads"
        )
    _validate.count("budget", budget, minimum=0, maximum=T)
    scores = weights[..., -1, :].mean(-2, keepdim=True)  # (..., H, T) -> (..., 1, T)
    return keep_top(scores, budget).expand(weights.shape[:-1])  # (..., H, T)


def quest_page_scores(q: Tensor, k: Tensor, page_size: int) -> Tensor:
    r"""Quest's bound on each page: the largest $q \cdot k$ its per-channel extremes allow.

    A page of keys is summarised by its smallest and largest value in each channel, $m_c$ and
    $M_c$. Whatever key of the page $k$ is, $q_c k_c \le \max(q_c m_c, q_c M_c)$ channel by
    channel, so

    $$
    U = \sum_c \max(q_c m_c,\; q_c M_c) \;\ge\; q \cdot k \quad \text{for every key of the page.}
    $$

    Args:
        q: ``(..., L, d_k)`` queries.
        k: ``(..., S, d_k)`` cached keys, ``S`` a multiple of ``page_size``.
        page_size: Keys per page.

    Returns:
        ``(..., L, S / page_size)`` one bound per query and page.

    Examples:
        >>> k = torch.tensor([[1.0, -1.0], [0.0, 2.0], [3.0, 0.0], [-1.0, 0.0]])
        >>> q = torch.tensor([[1.0, 1.0]])
        >>> quest_page_scores(q, k, page_size=2)  # max(0, 1) + max(-1, 2); 3 + 0
        tensor([[3., 3.]])
        >>> (q @ k.T).view(2, 2).amax(-1)  # the best key of each page: 2 and 3, below
        tensor([2., 3.])
    """
    _validate.tensor("q", q, min_ndim=2)
    _validate.tensor("k", k, min_ndim=2)
    S, d_k = k.shape[-2:]
    if q.shape[-1] != d_k:
        raise ValueError(f"q has shape {tuple(q.shape)} and k {tuple(k.shape)}: expected the same d_k")
    _validate.count("page_size", page_size)
    _validate.divides("page_size", page_size, "S", S, "k's entries fill whole pages")
    pages = k.unflatten(-2, (S // page_size, page_size))  # (..., S, d_k) -> (..., n, page, d_k)
    low, high = pages.amin(-2), pages.amax(-2)  # (..., n, d_k) each: the page's summary
    q_ = q.unsqueeze(-2)  # (..., L, 1, d_k)
    return torch.maximum(q_ * low.unsqueeze(-3), q_ * high.unsqueeze(-3)).sum(-1)  # (..., L, n)


def quest_keep(q: Tensor, k: Tensor, budget: int, page_size: int) -> Tensor:
    """The entries each query reads under Quest: the ``budget / page_size`` pages of highest bound.

    Args:
        q: ``(..., L, d_k)`` queries.
        k: ``(..., S, d_k)`` cached keys, ``S`` a multiple of ``page_size``.
        budget: Entries each query reads, a multiple of ``page_size``, at most ``S``.
        page_size: Keys per page.

    Returns:
        ``(..., L, S)`` boolean: one choice per query, nothing dropped from the cache.

    Examples:
        >>> k = torch.tensor([[1.0, -1.0], [0.0, 2.0], [3.0, 0.0], [-1.0, 0.0]])
        >>> quest_keep(torch.tensor([[0.0, 1.0], [1.0, 0.0]]), k, 2, 2).int()
        tensor([[1, 1, 0, 0],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    bounds = quest_page_scores(q, k, page_size)  # (..., L, n)
    _validate.count("budget", budget, minimum=0, maximum=k.shape[-2])
    _validate.divides("page_size", page_size, "budget", budget, "Quest reads whole pages")
    pages = keep_top(bounds, budget // page_size)  # (..., L, n)
    return pages.repeat_interleave(page_size, dim=-1)  # (..., L, n) -> (..., L, S)


def decode_mask(keep: Tensor, length: int, per_query: bool = False) -> Tensor:
    r"""The mask under which one causal pass over ``length`` tokens decodes with a reduced cache.

    The first ``P`` tokens are the prompt, attended causally in full; each later query sees
    the prompt's entries that ``keep`` kept, and every later token up to itself. A query's
    output then equals decoding it step by step with the kept entries, each new token appended.

    Args:
        keep: ``(..., P)`` boolean, one choice per head, or with ``per_query``
            ``(..., length - P, P)``, one per later query (`quest_keep`).
        length: Tokens in the sequence, prompt included, more than ``P``.
        per_query: ``keep`` holds a row for each later query.

    Returns:
        ``(..., length, length)`` boolean, true where a query may attend to a key.

    Examples:
        A prompt of 3 of which entry 1 is dropped, then 2 decoded tokens:

        >>> decode_mask(torch.tensor([True, False, True]), 5).int()
        tensor([[1, 0, 0, 0, 0],
                [1, 1, 0, 0, 0],
                [1, 1, 1, 0, 0],
                [1, 0, 1, 1, 0],
                [1, 0, 1, 1, 1]], dtype=torch.int32)
    """
    _validate.boolean("keep", keep, min_ndim=1)
    P = keep.shape[-1]
    T = _validate.count("length", length, minimum=P + 1)
    if per_query and (keep.ndim < 2 or keep.shape[-2] != T - P):
        raise ValueError(
            f"keep has shape {tuple(keep.shape)}, expected (..., length - P, P) = (..., {T - P}, {P}) "
            "with per_query: a row for each query after the prompt"
        )
    rows = keep if per_query else keep.unsqueeze(-2).expand(*keep.shape[:-1], T - P, P)  # (..., T - P, P)
    causal = torch.ones(T, T, dtype=torch.bool, device=keep.device).tril()  # (T, T)
    mask = causal.expand(*rows.shape[:-2], T, T).clone()  # (..., T, T)
    mask[..., P:, :P] = rows
    return mask

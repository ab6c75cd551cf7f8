r"""Softmax and attention in one pass over the keys, without the ``(L, S)`` matrix.

`online_softmax` computes a softmax while reading its input block by block,
keeping only a running maximum $m$ and a running sum $\ell$ (Milakov and
Gimelshein, 2018). `tiled_attention` extends it to attention the way
FlashAttention does (Dao et al., 2022): queries in blocks, keys and values
streamed block by block, each output row rescaled whenever its maximum grows.
No tensor larger than one ``(block_q, block_k)`` tile of scores is ever created,
and the result is exact: it equals `scaled_dot_product_attention` up to float
rounding.

Both return, beside their result, the running state a reader needs to follow
the computation, and on request a trace of it, block by block. `tiled_attention`
also counts its multiply-adds, and can apply dropout to the weights with a mask
that `dropout_mask` regenerates from a seed, tile by tile, so that a backward
pass (`attn_ref.backward`) never has to store it. The backward pass computes its
tiles with the same `tile_scores`, and reads its tile sizes with `block_sizes`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref._numerics import NEG_INF, additive_mask, compute_dtype, finite_or_zero, logsumexp

__all__ = [
    "OnlineSoftmaxState",
    "SoftmaxStep",
    "TileRule",
    "TileStep",
    "TiledAttentionState",
    "block_sizes",
    "dropout_mask",
    "online_softmax",
    "tile_scores",
    "tiled_attention",
]


@dataclass(frozen=True)
class SoftmaxStep:
    """The running state of `online_softmax` after one block of its input.

    Attributes:
        cols: Positions of the block along the softmax dimension.
        row_max: $m$ after the block: the largest entry seen so far, shape ``(...)``.
        row_sum: $\\ell$ after the block: $\\sum e^{x_j - m}$ over the entries seen so far.
        rescale: $e^{m_\\text{old} - m_\\text{new}}$, the factor the old sum was multiplied by.
    """

    cols: range
    row_max: Tensor
    row_sum: Tensor
    rescale: Tensor


@dataclass(frozen=True)
class OnlineSoftmaxState:
    """What `online_softmax` kept while it read its input.

    Attributes:
        row_max: $m = \\max_j x_j$, shape ``(...)``: the softmax dimension removed.
        row_sum: $\\ell = \\sum_j e^{x_j - m}$, same shape.
        trace: The state after each block (`SoftmaxStep`), when asked for.
    """

    row_max: Tensor
    row_sum: Tensor
    trace: list[SoftmaxStep] | None = None

    @property
    def logsumexp(self) -> Tensor:
        r"""$\log \sum_j e^{x_j} = m + \log \ell$, computed without overflow."""
        return logsumexp(self.row_max, self.row_sum)


@dataclass(frozen=True)
class TileStep:
    """The state of one block of queries after one tile of `tiled_attention`.

    Attributes:
        rows: Query positions of the tile.
        cols: Key positions of the tile.
        scores: The tile of scores, mask included, ``(..., len(rows), len(cols))``.
        row_max: $m$ of each query after this tile, ``(..., len(rows))``.
        row_sum: $\\ell$ of each query after this tile.
        rescale: $e^{m_\\text{old} - m_\\text{new}}$: what the earlier sum and output were multiplied by.
        output: The output so far, ``(..., len(rows), d_v)``: attention over the keys read so far.
        keep: With dropout, the tile's mask (``True`` = kept), ``(..., len(rows), len(cols))``;
            else ``None``.
    """

    rows: range
    cols: range
    scores: Tensor
    row_max: Tensor
    row_sum: Tensor
    rescale: Tensor
    output: Tensor
    keep: Tensor | None = None


@dataclass(frozen=True)
class TiledAttentionState:
    """What `tiled_attention` kept, instead of the ``(L, S)`` attention weights.

    Attributes:
        row_max: $m$ of each query: its largest score, ``(..., L)``, in the compute dtype.
        row_sum: $\\ell$ of each query: $\\sum_j e^{s_j - m}$ over the keys it may see, ``(..., L)``.
        tiles_computed: Tiles of scores computed.
        tiles_skipped: Tiles skipped because every key in them lies after every query
            (``is_causal=True``), or because the `TileRule` said so.
        block_size: ``(block_q, block_k)``, the tile's shape.
        trace: One `TileStep` per computed tile, in order, when asked for.
        multiply_adds: Multiply-adds of the two matrix products of every computed tile,
            $Q_i K_j^\\top$ and $P V_j$: ``len(rows) * len(cols) * (d_k + d_v)`` per tile and
            per batch entry.
        dropout_seed: The seed of the dropout mask (`dropout_mask`), or ``None`` without dropout.
    """

    row_max: Tensor
    row_sum: Tensor
    tiles_computed: int
    tiles_skipped: int
    block_size: tuple[int, int]
    trace: list[TileStep] | None = None
    multiply_adds: int = 0
    dropout_seed: int | None = None

    @property
    def logsumexp(self) -> Tensor:
        r"""$m + \log \ell$ per query: the log of the softmax's denominator, ``-inf`` where no key is allowed.

        With it, any weight can be recomputed from its score alone,
        $p_j = e^{s_j - \operatorname{logsumexp}}$: FlashAttention keeps it for the backward pass.
        """
        return logsumexp(self.row_max, self.row_sum)


def online_softmax(
    x: Tensor, dim: int = -1, block_size: int = 1, trace: bool = False
) -> tuple[Tensor, OnlineSoftmaxState]:
    r"""Softmax along ``dim``, its normalizer found in one pass over ``x``, block by block.

    The two-pass stable softmax first finds $m = \max_j x_j$, then sums
    $e^{x_j - m}$. The online form does both in one pass. It keeps the largest
    entry seen so far, $m$, and the sum $\ell$ of $e^{x_j - m}$ so far. When a
    block brings a larger maximum $m'$, every term already in the sum was
    computed against the old $m$, so the sum is rescaled first:

    $$
    m' = \max\bigl(m, \max_{j \in \text{block}} x_j\bigr), \qquad
    \ell' = \ell \, e^{m - m'} + \sum_{j \in \text{block}} e^{x_j - m'}
    $$

    Every exponent is $\le 0$, so nothing overflows, and after the last block
    $m$ and $\ell$ are exactly the two-pass values. A final elementwise pass
    gives $\operatorname{softmax}(x)_j = e^{x_j - m} / \ell$. A slice whose
    entries are all ``-inf`` gives ``nan``, as `torch.softmax` does.
    Half-precision inputs are computed in float32; the weights are cast back,
    $m$ and $\ell$ stay in float32.

    Args:
        x: Logits of any floating dtype.
        dim: The dimension that sums to one.
        block_size: Entries read per step; 1 is Milakov and Gimelshein's element-by-element form.
        trace: Also return the state after every block.

    Returns:
        ``(weights, state)``: the softmax, shaped like ``x``, and an
        `OnlineSoftmaxState` with $m$, $\ell$ (``x``'s shape without ``dim``)
        and, if asked for, the trace.

    Examples:
        >>> weights, state = online_softmax(torch.tensor([1.0, 3.0, 2.0]), trace=True)
        >>> weights
        tensor([0.0900, 0.6652, 0.2447])
        >>> [(s.row_max.item(), round(s.row_sum.item(), 4)) for s in state.trace]
        [(1.0, 1.0), (3.0, 1.1353), (3.0, 1.5032)]
        >>> online_softmax(torch.tensor([1e4, 1e4 + 1.0]))[0]  # no overflow
        tensor([0.2689, 0.7311])
    """
    _validate.tensor("x", x)
    _validate.count("block_size", block_size)
    dtype = compute_dtype(x.dtype)
    moved = x.movedim(dim, -1)  # (..., V): the softmax dimension last
    V = moved.shape[-1]
    row_max = torch.full(moved.shape[:-1], NEG_INF, dtype=dtype, device=x.device)  # (...)
    row_sum = torch.zeros_like(row_max)  # (...)
    steps = [] if trace else None
    for start in range(0, V, block_size):
        cols = range(start, min(start + block_size, V))
        block = moved[..., cols.start : cols.stop].to(dtype)  # (..., block)
        new_max = torch.maximum(row_max, block.amax(dim=-1))  # (...)
        shift = finite_or_zero(new_max)  # a slice with nothing but -inf so far: subtract 0, not -inf
        rescale = (row_max - shift).exp()
        row_sum = row_sum * rescale + (block - shift[..., None]).exp().sum(dim=-1)
        row_max = new_max
        if steps is not None:  # these tensors are new at every step, never changed in place: no copies
            steps.append(SoftmaxStep(cols, row_max, row_sum, rescale))
    shift = finite_or_zero(row_max)
    weights = (moved.to(dtype) - shift[..., None]).exp() / row_sum[..., None]  # (..., V)
    return weights.movedim(-1, dim).to(x.dtype), OnlineSoftmaxState(row_max, row_sum, steps)


def tiled_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int | tuple[int, int] = 64,
    trace: bool = False,
    dropout_p: float = 0.0,
    dropout_seed: int | None = None,
    tile_rule: TileRule | None = None,
) -> tuple[Tensor, TiledAttentionState]:
    r"""Exact attention computed tile by tile, never holding the ``(L, S)`` scores.

    The queries are cut into blocks of ``block_q`` rows. For each block, the
    keys and values are read in blocks of ``block_k``. Each tile of scores
    $S_{ij} = Q_i K_j^\top \cdot \text{scale}$ (mask added) updates the
    block's running maximum $m$, running sum $\ell$ and unnormalised output
    $O$, as in `online_softmax`:

    $$
    m' = \max\bigl(m, \operatorname{rowmax} S_{ij}\bigr), \quad
    P = e^{S_{ij} - m'}, \quad
    \ell' = \ell \, e^{m - m'} + \operatorname{rowsum} P, \quad
    O' = O \, e^{m - m'} + P V_j
    $$

    After the last tile, the block's output is $O / \ell$. This is the loop
    order of FlashAttention-2 (queries outside, keys inside); FlashAttention
    swaps the two loops and normalises at every step, with the same result.

    With ``is_causal=True`` (top-left aligned, as in PyTorch: query $i$ sees
    keys $0, \dots, i$), a tile whose first key comes after its last query is
    skipped: never computed, never read. Tiles that cross the diagonal add the
    causal mask as $0$ or $-\infty$. For finite inputs this changes nothing
    but the work. A ``nan`` or ``inf`` in a key or value inside a skipped
    tile cannot reach any query, while PyTorch's math backend, which adds
    $-\infty$ to the whole ``(L, S)`` matrix, lets it poison every row.

    Everything else follows `scaled_dot_product_attention`: a boolean
    ``attn_mask`` (``True`` = may attend) is added as $0$ or $-\infty$, a
    floating one is added as it is; ``is_causal`` and ``attn_mask`` cannot be
    combined; a query whose scores are all $-\infty$ gets an output of zero;
    ``nan`` and ``inf`` propagate as in PyTorch's math backend; half-precision
    inputs are computed in float32 and the output cast back.

    With ``dropout_p > 0``, each weight is kept with probability
    $1 - p$ and scaled by $1 / (1 - p)$, or set to zero, after the softmax, as
    PyTorch's ``dropout_p`` does; the softmax's sum $\ell$ counts every weight.
    The mask is not drawn from PyTorch's generator but computed, tile by tile,
    from ``dropout_seed`` and the positions (`dropout_mask`), so that the
    backward pass can compute it again instead of storing it.

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``, same leading dimensions as ``query``.
        value: ``(..., S, d_v)``, same leading dimensions as ``query``.
        attn_mask: Boolean or floating, broadcastable to ``(..., L, S)``. It is
            only ever sliced, one tile at a time.
        is_causal: Apply a lower-triangular (top-left aligned) mask, skipping
            the tiles above the diagonal.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.
        block_size: The tile's shape: one int for square tiles, or
            ``(block_q, block_k)``. FlashAttention sizes the two separately
            (its $B_r$ and $B_c$): a block of keys and values, a block of
            queries and outputs, and the tile between them must all fit in a
            GPU's fast on-chip memory. Any positive sizes give the same result,
            including 1 and sizes larger than ``L`` or ``S``.
        trace: Also return one `TileStep` per computed tile. For small examples:
            it keeps every tile.
        dropout_p: Probability of dropping each weight, in ``[0, 1)``.
        dropout_seed: Seed of the dropout mask, an int in ``[0, 2**32)``; by default
            drawn from PyTorch's global generator (so ``torch.manual_seed`` fixes it).
            Ignored without dropout.
        tile_rule: The tiles a caller skips (all their weights zero, like a causal
            tile above the diagonal: a block mask's empty tiles) and how it changes
            a computed tile's scores, after the scale and the mask (a score
            function, a block mask's partial tiles): see `TileRule`.

    Returns:
        ``(output, state)``: the output, ``(..., L, d_v)``, and a
        `TiledAttentionState` with each query's $m$ and $\ell$ (in the compute
        dtype), the numbers of tiles computed and skipped, the multiply-adds
        of their matrix products, the dropout seed, and the trace.

    Raises:
        TypeError: An argument is not a floating tensor, or dtypes differ.
        ValueError: A shape or block size does not fit; the message names the
            argument, what it got and what it needs.

    Examples:
        The three tokens of the worked example, one key at a time; the output is
        that of `scaled_dot_product_attention`:

        >>> from attn_ref.examples import THREE_TOKENS
        >>> X = torch.tensor(THREE_TOKENS)
        >>> output, state = tiled_attention(X, X, X, block_size=(3, 1))
        >>> output
        tensor([[0.8446, 0.7330, 0.8446, 0.7330],
                [0.1332, 1.8509, 0.1332, 1.8509],
                [0.5777, 1.2670, 0.5777, 1.2670]])
        >>> state.tiles_computed, state.tiles_skipped
        (3, 0)

        Causal, with tiles of 2 by 2 over 6 tokens: 3 of the 9 tiles lie
        entirely above the diagonal and are skipped.

        >>> x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
        >>> _, state = tiled_attention(x, x, x, is_causal=True, block_size=2)
        >>> state.tiles_computed, state.tiles_skipped
        (6, 3)

        Each computed tile multiplies a ``(2, 4)`` block of queries by a ``(2, 4)`` block
        of keys, then a ``(2, 2)`` tile of weights by a ``(2, 4)`` block of values:
        ``2 * 2 * (4 + 4)`` multiply-adds each.

        >>> state.multiply_adds == state.tiles_computed * 2 * 2 * (4 + 4)
        True
    """
    batch, L, S, d_k, d_v, dropout_p, dtype, scale, attn_mask = _validate.tiled_pass(
        query, key, value, attn_mask, is_causal, scale, dropout_p
    )
    block_q, block_k = block_sizes(block_size)
    dropout_seed = _dropout_seed(dropout_p, dropout_seed)
    rule, tally = tile_rule or TileRule(), _Tally(batch, d_k + d_v, trace)
    output = torch.empty((*batch, L, d_v), dtype=dtype, device=query.device)  # (..., L, d_v)
    all_max = torch.empty((*batch, L), dtype=dtype, device=query.device)  # (..., L)
    all_sum = torch.empty_like(all_max)  # (..., L)
    for q_start in range(0, L, block_q):
        rows = range(q_start, min(q_start + block_q, L))
        q = query[..., rows.start : rows.stop, :].to(dtype)  # (..., bq, d_k)
        row_max = torch.full((*batch, len(rows)), NEG_INF, dtype=dtype, device=query.device)
        row_sum = torch.zeros_like(row_max)  # (..., bq)
        acc = torch.zeros((*batch, len(rows), d_v), dtype=dtype, device=query.device)  # (..., bq, d_v)
        for k_start in range(0, S, block_k):
            cols = range(k_start, min(k_start + block_k, S))
            if (is_causal and cols.start > rows[-1]) or rule.skips(rows, cols):  # no weight here
                tally.skipped()
                continue
            k = key[..., cols.start : cols.stop, :].to(dtype)  # (..., bk, d_k)
            v = value[..., cols.start : cols.stop, :].to(dtype)  # (..., bk, d_v)
            scores = tile_scores(q, k, scale, attn_mask, is_causal, rows, cols)  # (..., bq, bk)
            scores = rule.modified(scores, rows, cols)  # (..., bq, bk)
            new_max = torch.maximum(row_max, scores.amax(dim=-1))  # (..., bq)
            shift = finite_or_zero(new_max)  # a query with no allowed key yet: subtract 0, not -inf
            rescale = (row_max - shift).exp()  # (..., bq): how much the old sum and output shrink
            if tally.keeps_scores or torch.is_grad_enabled():
                p = (scores - shift[..., None]).exp_()  # (..., bq, bk)
            else:  # no one reads the scores again
                p = scores.sub_(shift[..., None]).exp_()  # (..., bq, bk), in the scores' place
            row_sum = row_sum * rescale + p.sum(dim=-1)
            keep = None
            if dropout_seed is not None:  # the sum counts every weight; the output only the kept ones
                keep = dropout_mask(dropout_seed, batch, rows, cols, dropout_p, device=query.device)
                p = p.masked_fill(~keep, 0.0) / (1.0 - dropout_p)  # (..., bq, bk)
            acc = acc * rescale[..., None] + p @ v  # (..., bq, bk) @ (..., bk, d_v) -> (..., bq, d_v)
            row_max = new_max
            tally.computed(TileStep(rows, cols, scores, row_max, row_sum, rescale, acc, keep))
        output[..., rows.start : rows.stop, :] = _normalise(acc, row_max, row_sum)
        all_max[..., rows.start : rows.stop] = row_max
        all_sum[..., rows.start : rows.stop] = row_sum
    state = tally.state(all_max, all_sum, (block_q, block_k), dropout_seed)
    return output.to(query.dtype), state


@dataclass(frozen=True)
class TileRule:
    """What a caller of `tiled_attention` changes in its tiles (`attn_ref.serving.flex_attention`'s
    block masks and score functions, `attn_ref.sparse.block_sparse_attention`'s chosen blocks).

    Attributes:
        skip: ``skip(rows, cols)`` is true for a tile whose weights are all zero: it is skipped
            like a causal tile above the diagonal, never computed.
        modify: ``modify(scores, rows, cols)`` returns a computed tile's scores changed, after
            the scale and the mask.
    """

    skip: Callable[[range, range], bool] | None = None
    modify: Callable[[Tensor, range, range], Tensor] | None = None

    def skips(self, rows: range, cols: range) -> bool:
        return self.skip is not None and self.skip(rows, cols)

    def modified(self, scores: Tensor, rows: range, cols: range) -> Tensor:
        return scores if self.modify is None else self.modify(scores, rows, cols)


class _Tally:
    """What `tiled_attention` reports beside its output, kept out of its loop: the tiles computed
    and skipped, the multiply-adds of their two products, and on request a trace of every tile."""

    def __init__(self, batch: list[int], d_k_plus_d_v: int, trace: bool) -> None:
        self.per_entry = math.prod(batch)  # the products are made once per batch entry
        self.width = d_k_plus_d_v  # Q_i K_j^T, then P V_j
        self.steps: list[TileStep] | None = [] if trace else None
        self.tiles_computed = self.tiles_skipped = self.multiply_adds = 0

    @property
    def keeps_scores(self) -> bool:
        """Whether the trace reads a tile's scores after the tile is done."""
        return self.steps is not None

    def skipped(self) -> None:
        self.tiles_skipped += 1

    def computed(self, step: TileStep) -> None:
        """One computed tile; ``step.output`` is still the unnormalised accumulator."""
        self.tiles_computed += 1
        self.multiply_adds += self.per_entry * len(step.rows) * len(step.cols) * self.width
        if self.steps is not None:  # new tensors at every tile, never changed in place: no copies
            so_far = _normalise(step.output, step.row_max, step.row_sum)
            self.steps.append(dataclasses.replace(step, output=so_far))

    def state(self, row_max: Tensor, row_sum: Tensor, block_size: tuple[int, int], seed: int | None):
        counts = self.tiles_computed, self.tiles_skipped, block_size, self.steps, self.multiply_adds
        return TiledAttentionState(row_max, row_sum, *counts, seed)


def _dropout_seed(dropout_p: float, dropout_seed: int | None) -> int | None:
    """The seed of the dropout mask: none without dropout, else ``dropout_seed`` checked, or one
    drawn from PyTorch's global generator (so ``torch.manual_seed`` fixes it)."""
    if dropout_p == 0.0:
        return None
    if dropout_seed is None:
        return int(torch.randint(0, 2**32, ()))
    return _validate.count("dropout_seed", dropout_seed, minimum=0, maximum=2**32 - 1)


_LOW_32_BITS = 0xFFFFFFFF


def dropout_mask(
    seed: int,
    batch: tuple[int, ...] | list[int],
    rows: range,
    cols: range,
    dropout_p: float,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""The dropout mask of one tile, computed from ``seed`` and the positions alone.

    Entry $(b, i, j)$ (batch entry $b$ in row-major order, query $i$, key $j$) is
    kept when $h / 2^{32} \ge p$, where $h$ is a 32-bit integer hash of the seed and
    the three positions, applied one position at a time. The hash is
    ``lowbias32`` from Chris Wellons' hash prospector: xor-shift, multiply,
    xor-shift, multiply, xor-shift, in 32-bit arithmetic. So the mask does not
    depend on the tile's shape or on the order tiles are visited, and the
    backward pass gets the forward pass's mask by calling this again.
    FlashAttention does the same with the Philox generator, which maps a
    counter (here, the positions) to random bits.

    Args:
        seed: An int in ``[0, 2**32)``.
        batch: The leading dimensions ``...`` of the attention inputs.
        rows: Query positions of the tile.
        cols: Key positions of the tile.
        dropout_p: Probability of dropping each entry, in ``[0, 1)``.
        device: Where to create the mask.

    Returns:
        A boolean ``(..., len(rows), len(cols))`` tensor, ``True`` where the weight is kept.

    Examples:
        >>> keep = dropout_mask(7, (), range(0, 4), range(0, 6), 0.5)
        >>> keep.shape
        torch.Size([4, 6])
        >>> tile = dropout_mask(7, (), range(2, 4), range(3, 6), 0.5)
        >>> torch.equal(keep[2:, 3:], tile)
        True
    """
    seed = _validate.count("seed", seed, minimum=0, maximum=_LOW_32_BITS)
    dropout_p = _validate.probability("dropout_p", dropout_p)
    entries = torch.arange(math.prod(batch), device=device).reshape(*batch, 1, 1)  # (..., 1, 1)
    i = torch.arange(rows.start, rows.stop, device=device)[:, None]  # (bq, 1)
    j = torch.arange(cols.start, cols.stop, device=device)[None, :]  # (1, bk)
    h = torch.full((), seed, dtype=torch.int64, device=device)
    for position in (entries, i, j):  # (...) -> (..., 1, 1) -> (..., bq, 1) -> (..., bq, bk)
        h = _lowbias32((_lowbias32(h) + position) & _LOW_32_BITS)
    return h >= math.ceil(dropout_p * 2**32)  # kept: h / 2**32 >= p


def _lowbias32(x: Tensor) -> Tensor:
    """Chris Wellons' ``lowbias32`` hash of 32-bit integers held in int64."""
    x = x ^ (x >> 16)
    x = _times_mod_2_32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _times_mod_2_32(x, 0x846CA68B)
    return x ^ (x >> 16)


def _times_mod_2_32(x: Tensor, factor: int) -> Tensor:
    """``x * factor mod 2**32`` for ``0 <= x < 2**32``, without overflowing int64: the factor in
    16-bit halves, and of the high half's product only the 16 bits that survive the shift."""
    low = x * (factor & 0xFFFF)  # < 2**48
    high = ((x * (factor >> 16)) & 0xFFFF) << 16  # < 2**32
    return (low + high) & _LOW_32_BITS


def tile_scores(
    q: Tensor, k: Tensor, scale: float, attn_mask: Tensor | None, is_causal: bool, rows: range, cols: range
) -> Tensor:
    r"""One tile of scores, $Q_i K_j^\top \cdot \text{scale}$ with its part of the mask added.

    `tiled_attention` computes every tile with it, and the backward pass
    (`attn_ref.backward.flash_attention_backward`) computes the same tiles
    again with it, so that both see the same scores.

    Args:
        q: ``(..., len(rows), d_k)``: the queries at positions ``rows``.
        k: ``(..., len(cols), d_k)``: the keys at positions ``cols``.
        scale: Multiplier of the scores.
        attn_mask: The whole mask, boolean (``True`` = may attend) or floating,
            with a dimension for each of the scores', ``(..., L or 1, S or 1)``;
            only its tile is read. ``None`` for no mask.
        is_causal: Add the top-left aligned causal mask where the tile crosses
            the diagonal (ignored with an ``attn_mask``).
        rows: The queries' positions.
        cols: The keys' positions.

    Returns:
        ``(..., len(rows), len(cols))`` scores, ``-inf`` where masked.

    Examples:
        The tile of queries 0-1 and keys 0-1 crosses the diagonal; the tile of
        queries 2-3 and keys 0-1 lies below it and needs no mask:

        >>> q = k = torch.ones(2, 4)
        >>> tile_scores(q, k, 0.5, None, True, range(0, 2), range(0, 2))
        tensor([[2., -inf],
                [2., 2.]])
        >>> tile_scores(q, k, 0.5, None, True, range(2, 4), range(0, 2))
        tensor([[2., 2.],
                [2., 2.]])
    """
    scores = (q @ k.transpose(-2, -1)).mul_(scale)  # (..., bq, d_k) @ (..., d_k, bk) -> (..., bq, bk)
    if attn_mask is not None:
        scores = scores + additive_mask(_mask_tile(attn_mask, rows, cols), scores)
    elif is_causal and cols[-1] > rows[0]:  # the tile crosses the diagonal
        key_pos = torch.arange(cols.start, cols.stop, device=q.device)  # (bk,)
        query_pos = torch.arange(rows.start, rows.stop, device=q.device)  # (bq,)
        allowed = key_pos[None, :] <= query_pos[:, None]  # (bq, bk): key j visible to query i
        scores = scores + additive_mask(allowed, scores)
    return scores


def _normalise(acc: Tensor, row_max: Tensor, row_sum: Tensor) -> Tensor:
    """``acc / row_sum``; a query with no allowed key keeps ``acc`` (zero: every weight was 0)."""
    no_key = row_max == NEG_INF  # (..., bq)
    return acc / row_sum.masked_fill(no_key, 1.0)[..., None]  # (..., bq, d_v)


def _mask_tile(attn_mask: Tensor, rows: range, cols: range) -> Tensor:
    """The tile of ``attn_mask`` (``(..., L or 1, S or 1)``) at ``rows`` and ``cols``: a view."""
    row_slice = slice(rows.start, rows.stop) if attn_mask.shape[-2] != 1 else slice(None)
    col_slice = slice(cols.start, cols.stop) if attn_mask.shape[-1] != 1 else slice(None)
    return attn_mask[..., row_slice, col_slice]


def block_sizes(block_size: int | tuple[int, int]) -> tuple[int, int]:
    """``(block_q, block_k)`` from one int (square tiles) or a pair, checked.

    The ``block_size`` argument of `tiled_attention`, of the backward pass
    and of `attn_ref.serving.create_block_mask` is read with it.

    Raises:
        ValueError: ``block_size`` is not a positive int or a pair of them.

    Examples:
        >>> block_sizes(64), block_sizes((32, 16))
        ((64, 64), (32, 16))
    """
    if isinstance(block_size, tuple) and len(block_size) == 2:
        return _validate.count("block_size[0] (block_q)", block_size[0]), _validate.count(
            "block_size[1] (block_k)", block_size[1]
        )
    if isinstance(block_size, int) and not isinstance(block_size, bool) and block_size >= 1:
        return block_size, block_size
    raise ValueError(
        f"block_size must be a positive int or a pair (block_q, block_k) of positive ints, got {block_size!r}"
    )

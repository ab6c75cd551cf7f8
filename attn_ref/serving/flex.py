"""Masks as functions, in FlexAttention's interface, and a block mask that skips empty tiles.

`create_block_mask` evaluates a ``mask_mod(b, h, q_idx, kv_idx)`` tile by tile
and records which tiles are empty, partial or full (`BlockMask`);
`flex_attention` runs `attn_ref.tiled.tiled_attention` with the scores changed
by a ``score_mod`` and masked where a tile is partial, skipping the empty tiles.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref._numerics import additive_mask
from attn_ref.tiled import TileRule, block_sizes, tiled_attention

__all__ = ["BlockMask", "FlexState", "create_block_mask", "flex_attention"]

EMPTY, PARTIAL, FULL = 0, 1, 2  # the kinds of tile in a BlockMask


@dataclass(frozen=True)
class BlockMask:
    """Which tiles of the ``(L, S)`` scores a mask leaves empty, partial or full.

    Attributes:
        kinds: ``(B, H, ceil(L / block_q), ceil(S / block_k))`` int8: 0 empty
            (every entry masked: skip the tile), 1 partial (apply the mask),
            2 full (nothing masked: no mask needed).
        block_size: ``(block_q, block_k)``.
        shape: ``(B, H, L, S)``.
        mask_mod: The function the mask came from.
    """

    kinds: Tensor
    block_size: tuple[int, int]
    shape: tuple[int, int, int, int]
    mask_mod: Callable = field(repr=False)

    def fraction(self, kind: int) -> float:
        """Share of the tiles of kind ``EMPTY`` (0), ``PARTIAL`` (1) or ``FULL`` (2)."""
        return (self.kinds == kind).float().mean().item()


def _check_signature(name: str, fn: object, arguments: tuple[str, ...]) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be a function {name}({', '.join(arguments)}), got {type(fn).__name__}")
    try:
        inspect.signature(fn).bind(*arguments)
    except TypeError:
        raise TypeError(
            f"{name} must take {len(arguments)} positional arguments ({', '.join(arguments)}), "
            f"got a function with signature {inspect.signature(fn)}"
        ) from None
    except ValueError:  # a builtin without a signature: let the call tell
        pass


def _indices(B: int, H: int, rows: range, cols: range) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``b, h, q_idx, kv_idx`` shaped to broadcast to ``(B, H, len(rows), len(cols))``."""
    return (
        torch.arange(B).view(B, 1, 1, 1),
        torch.arange(H).view(1, H, 1, 1),
        torch.arange(rows.start, rows.stop).view(1, 1, -1, 1),
        torch.arange(cols.start, cols.stop).view(1, 1, 1, -1),
    )


def _apply_mask_mod(mask_mod: Callable, B: int, H: int, rows: range, cols: range) -> Tensor:
    allowed = mask_mod(*_indices(B, H, rows, cols))
    if not isinstance(allowed, Tensor) or allowed.dtype != torch.bool:
        got = allowed.dtype if isinstance(allowed, Tensor) else type(allowed).__name__
        raise TypeError(f"mask_mod must return a boolean tensor, got {got}")
    return _broadcast("mask_mod", allowed, (B, H, len(rows), len(cols)))  # (B, H, bq, bk)


def _broadcast(name: str, x: Tensor, shape: tuple[int, ...]) -> Tensor:
    try:
        return x.expand(shape)
    except RuntimeError:
        raise ValueError(
            f"{name} returned shape {tuple(x.shape)}, which does not broadcast to the tile's "
            f"(B, H, block_q, block_k) = {shape}: compute it from the index tensors it is given"
        ) from None


def create_block_mask(
    mask_mod: Callable, B: int, H: int, L: int, S: int, block_size: int | tuple[int, int] = 128
) -> BlockMask:
    """Evaluate ``mask_mod(b, h, q_idx, kv_idx)`` everywhere and classify every tile.

    ``mask_mod`` returns ``True`` where query ``q_idx`` may see key
    ``kv_idx`` in batch ``b``, head ``h``. It is called once per tile with
    index tensors that broadcast to ``(B, H, block_q, block_k)``, so it must
    be written with tensor operations (``&``, ``|``, ``torch.where``), as
    FlexAttention's are. A tile is empty if no entry is ``True``, full if
    every entry is, partial otherwise.

    Args:
        mask_mod: The mask as a function of four index tensors.
        B: Batch size (1 when the mask is the same for every sequence).
        H: Heads (1 when it is the same for every head).
        L: Queries.
        S: Keys.
        block_size: The tile's shape: one int, or ``(block_q, block_k)``.

    Returns:
        A `BlockMask`.

    Raises:
        TypeError: ``mask_mod`` does not take four arguments, or does not return booleans.

    Examples:
        Causal, 6 by 6 in tiles of 2 by 2: 3 tiles empty, 3 partial (the diagonal), 3 full.

        >>> causal = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
        >>> create_block_mask(causal, 1, 1, 6, 6, block_size=2).kinds[0, 0]
        tensor([[1, 0, 0],
                [2, 1, 0],
                [2, 2, 1]], dtype=torch.int8)
    """
    _check_signature("mask_mod", mask_mod, ("b", "h", "q_idx", "kv_idx"))
    _validate.counts(B=B, H=H, L=L, S=S)
    block_q, block_k = block_sizes(block_size)
    n_q, n_k = -(-L // block_q), -(-S // block_k)
    kinds = torch.empty(B, H, n_q, n_k, dtype=torch.int8)  # (B, H, n_q, n_k)
    for i in range(n_q):
        rows = range(i * block_q, min((i + 1) * block_q, L))
        for j in range(n_k):
            cols = range(j * block_k, min((j + 1) * block_k, S))
            allowed = _apply_mask_mod(mask_mod, B, H, rows, cols)  # (B, H, bq, bk)
            kinds[:, :, i, j] = torch.where(
                allowed.all(dim=(-2, -1)), FULL, torch.where(allowed.any(dim=(-2, -1)), PARTIAL, EMPTY)
            ).to(torch.int8)
    return BlockMask(kinds, (block_q, block_k), (B, H, L, S), mask_mod)


@dataclass(frozen=True)
class FlexState:
    """What `flex_attention` computed and skipped.

    Attributes:
        logsumexp: ``(B, H, L)``: $\\log \\sum_j e^{s_j}$ over the keys a query sees; ``-inf`` for none.
        tiles_computed: Tiles computed (for any sequence or head).
        tiles_skipped: Tiles skipped: empty for every sequence and head.
    """

    logsumexp: Tensor
    tiles_computed: int
    tiles_skipped: int


def flex_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    score_mod: Callable | None = None,
    block_mask: BlockMask | None = None,
    scale: float | None = None,
) -> tuple[Tensor, FlexState]:
    r"""Attention with the scores changed by a function and masked by a block mask, tile by tile.

    A CPU reference of the interface of `torch.nn.attention.flex_attention`.
    Each tile of scores $s = Q_i K_j^\top \cdot \text{scale}$ becomes
    ``score_mod(s, b, h, q_idx, kv_idx)``, is masked by the block mask's
    ``mask_mod`` where the tile is partial; `attn_ref.tiled.tiled_attention`
    runs the tiles (its `TileRule`'s ``modify``), skipping the empty ones (its
    ``skip``); full tiles need no mask. A query that sees no key gets an
    output of zero.

    Args:
        query: ``(B, H, L, d_k)``.
        key: ``(B, H, S, d_k)``.
        value: ``(B, H, S, d_v)``.
        score_mod: ``score_mod(score, b, h, q_idx, kv_idx)``, elementwise on
            index tensors that broadcast to ``(B, H, block_q, block_k)``; ``None``
            leaves the scores as they are.
        block_mask: From `create_block_mask` for ``(B or 1, H or 1, L, S)``;
            ``None`` lets every query see every key, in tiles of 128.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.

    Returns:
        ``(output, state)``: ``(B, H, L, d_v)`` and a `FlexState`.

    Examples:
        A causal mask as a function gives causal attention:

        >>> from attn_ref.functional import scaled_dot_product_attention
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v = torch.randn(3, 1, 2, 5, 4, generator=g)
        >>> causal = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
        >>> mask = create_block_mask(causal, 1, 1, 5, 5, block_size=2)
        >>> out, state = flex_attention(q, k, v, block_mask=mask)
        >>> expected, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
        >>> state.tiles_computed, state.tiles_skipped
        (6, 3)
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        _validate.tensor(name, x)
        _validate.shape(name, x, (None, None, None, None), "(B, H, T, d)")
    _validate.same_dtype(query=query, key=key, value=value)
    B, H, L, d_k = query.shape
    S = key.shape[-2]
    _validate.shape("key", key, (B, H, S, d_k), "(B, H, S, d_k) with query's B, H and d_k")
    _validate.shape("value", value, (B, H, S, None), "(B, H, S, d_v) with key's B, H and S")
    if score_mod is not None:
        _check_signature("score_mod", score_mod, ("score", "b", "h", "q_idx", "kv_idx"))
    if block_mask is None:
        block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= 0, 1, 1, L, S)
    if not isinstance(block_mask, BlockMask):
        raise TypeError(
            f"block_mask must be a BlockMask from create_block_mask, got {type(block_mask).__name__}"
        )
    mB, mH, mL, mS = block_mask.shape
    if mL != L or mS != S or mB not in (1, B) or mH not in (1, H):
        raise ValueError(
            f"block_mask was made for (B, H, L, S) = {block_mask.shape}; the inputs need "
            f"({B} or 1, {H} or 1, {L}, {S})"
        )
    block_q, block_k = block_mask.block_size
    kinds = block_mask.kinds.expand(B, H, -1, -1)  # (B, H, n_q, n_k)

    def kind(rows: range, cols: range) -> Tensor:  # (B, H): the tile's kind per sequence and head
        return kinds[:, :, rows.start // block_q, cols.start // block_k]

    def empty(rows: range, cols: range) -> bool:
        return bool((kind(rows, cols) == EMPTY).all())

    def modified(scores: Tensor, rows: range, cols: range) -> Tensor:  # (B, H, bq, bk)
        if score_mod is not None:
            scores = score_mod(scores, *_indices(B, H, rows, cols))
            if not isinstance(scores, Tensor) or not scores.dtype.is_floating_point:
                got = scores.dtype if isinstance(scores, Tensor) else type(scores).__name__
                raise TypeError(f"score_mod must return a floating tensor of scores, got {got}")
            scores = _broadcast("score_mod", scores, (B, H, len(rows), len(cols)))
        if (kind(rows, cols) != FULL).any():  # some sequence or head needs the mask here
            allowed = _apply_mask_mod(block_mask.mask_mod, B, H, rows, cols)
            scores = scores + additive_mask(allowed, scores)
        return scores

    output, state = tiled_attention(
        query,
        key,
        value,
        scale=scale,
        block_size=(block_q, block_k),
        tile_rule=TileRule(skip=empty, modify=modified),
    )
    return output, FlexState(state.logsumexp, state.tiles_computed, state.tiles_skipped)

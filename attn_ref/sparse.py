r"""Learned sparse attention: each query picks a few blocks of keys and attends only inside them.

The keys are cut into blocks of ``block_size`` positions. A query scores every block
cheaply, from one vector per block, keeps its own block and the ``top_k`` best of the
earlier ones, and runs exact attention over the keys of those blocks alone
(MoBA, Lu et al., 2025; the selection branch of NSA, Yuan et al., 2025):

$$
s_{t,i} = q_t \cdot \overline{k}_i, \qquad \overline{k}_i = \operatorname{mean}_{j \in \text{block } i} k_j .
$$

- `block_mean_keys`, `block_scores`: the score of every block, for every query.
- `select_blocks`: own block plus the ``top_k`` best earlier blocks; `window_blocks`:
  own block plus the ``num_blocks`` just before it (a sliding window at the same cost).
- `block_sparse_attention`: attention over the selected blocks, run by
  `attn_ref.tiled.tiled_attention`, which skips every tile no query selected
  (its `TileRule`'s ``skip``) and masks the rest (its ``modify``).
- `selection_density`, `captured_weight`: how much work, and how much of the dense
  attention weight, a selection keeps.
- `run_attention_only`: an `attn_ref.training.AttentionOnlyDecoder`'s forward pass with
  each layer's attention left to a function, to run a trained model sparse.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref.multihead import merge_heads, repeat_kv_heads, split_heads
from attn_ref.tiled import TileRule, tiled_attention
from attn_ref.training import AttentionOnlyDecoder

__all__ = [
    "SparseAttentionState",
    "block_mean_keys",
    "block_scores",
    "block_sparse_attention",
    "captured_weight",
    "run_attention_only",
    "select_blocks",
    "selection_density",
    "window_blocks",
]


# --- scores and selections ------------------------------------------------------------------


def block_mean_keys(key: Tensor, block_size: int) -> Tensor:
    r"""The mean key of every block of ``block_size`` positions: $\overline{k}_i$.

    Args:
        key: ``(..., S, d_k)``.
        block_size: Positions per block; the last block may be shorter (its mean is over its own keys).

    Returns:
        ``(..., ceil(S / block_size), d_k)``.

    Examples:
        >>> k = torch.arange(10.0).reshape(5, 2)  # five keys
        >>> block_mean_keys(k, 2)
        tensor([[1., 2.],
                [5., 6.],
                [8., 9.]])
    """
    _validate.tensor("key", key, min_ndim=2)
    _validate.count("block_size", block_size)
    S = key.shape[-2]
    starts = range(0, S, block_size)
    return torch.stack([key[..., s : s + block_size, :].mean(dim=-2) for s in starts], dim=-2)


def block_scores(query: Tensor, key: Tensor, block_size: int) -> Tensor:
    r"""$s_{t,i} = q_t \cdot \overline{k}_i$: every query's score of every block (MoBA's gate, equation 6).

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``.
        block_size: Positions per block.

    Returns:
        ``(..., L, n_blocks)``; ``n_blocks = ceil(S / block_size)``.

    Examples:
        >>> q = torch.tensor([[1.0, 0.0]])
        >>> k = torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.0, 3.0], [4.0, 0.0]])
        >>> block_scores(q, k, 2)  # block means (1, 0.5) and (2, 1.5)
        tensor([[1., 2.]])
    """
    _validate.tensor("query", query, min_ndim=2)
    _validate.tensor("key", key, min_ndim=2)
    _validate.shape("key", key, (*key.shape[:-1], query.shape[-1]), "(..., S, d_k) with query's d_k")
    means = block_mean_keys(key, block_size)  # (..., n_blocks, d_k)
    return query @ means.transpose(-2, -1)  # (..., L, d_k) @ (..., d_k, n_blocks)


def _own_and_earlier(L: int, n_blocks: int, block_size: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """``(own, earlier)``: ``(L, n_blocks)`` booleans, a query's own block and the blocks wholly before it."""
    own_index = (
        torch.arange(L, device=device) // block_size
    )  # (L,): query t's block (queries = keys' positions)
    blocks = torch.arange(n_blocks, device=device)  # (n_blocks,)
    return blocks[None, :] == own_index[:, None], blocks[None, :] < own_index[:, None]


def select_blocks(scores: Tensor, top_k: int, block_size: int) -> Tensor:
    r"""Each query's own block and the ``top_k`` highest-scoring blocks wholly before it.

    Query $t$ sits at position $t$ (self-attention, top-left aligned). Blocks after
    its own are never chosen: they hold only future keys. Its own block is always
    chosen, and attended with the causal mask: its mean key mixes in keys after
    $t$, so scoring it would let the future decide (MoBA's "current block"). A query
    with fewer than ``top_k`` earlier blocks takes them all. Ties go to the earlier
    block. MoBA's ``top_k`` counts the own block; here it does not.

    Args:
        scores: ``(..., L, n_blocks)``, e.g. from `block_scores`.
        top_k: Earlier blocks to keep per query, ``>= 0``.
        block_size: Positions per block (to find each query's own block).

    Returns:
        Boolean ``(..., L, n_blocks)``: ``True`` where the query attends to the block.

    Examples:
        Eight queries, blocks of 2; query 7 (block 3) keeps its block and the best
        of blocks 0-2 by score:

        >>> scores = torch.tensor([0.0, 5.0, 1.0, 9.0]).expand(8, 4)
        >>> select_blocks(scores, top_k=1, block_size=2).int()
        tensor([[1, 0, 0, 0],
                [1, 0, 0, 0],
                [1, 1, 0, 0],
                [1, 1, 0, 0],
                [0, 1, 1, 0],
                [0, 1, 1, 0],
                [0, 1, 0, 1],
                [0, 1, 0, 1]], dtype=torch.int32)
    """
    _validate.tensor("scores", scores, min_ndim=2)
    _validate.count("top_k", top_k, minimum=0)
    _validate.count("block_size", block_size)
    L, n_blocks = scores.shape[-2:]
    if n_blocks < math.ceil(L / block_size):
        raise ValueError(
            f"scores has {n_blocks} blocks, fewer than the {math.ceil(L / block_size)} that L={L} queries "
            f"in blocks of {block_size} occupy"
        )
    own, earlier = _own_and_earlier(L, n_blocks, block_size, scores.device)
    if top_k == 0:
        return own.expand(scores.shape).clone()
    ranked = scores.masked_fill(~earlier, float("-inf"))  # (..., L, n_blocks): only earlier blocks compete
    order = ranked.sort(dim=-1, descending=True, stable=True).indices  # (..., L, n_blocks): ties keep order
    best = order[..., : min(top_k, n_blocks)]  # (..., L, top_k)
    chosen = torch.zeros(scores.shape, dtype=torch.bool, device=scores.device).scatter_(-1, best, True)
    return (
        chosen & earlier
    ) | own  # a query with fewer earlier blocks than top_k picked some -inf: drop them


def window_blocks(L: int, n_blocks: int, num_blocks: int, block_size: int) -> Tensor:
    """Each query's own block and the ``num_blocks`` blocks just before it: a sliding window of blocks.

    It keeps as many blocks per query as `select_blocks` with ``top_k=num_blocks``,
    so it costs the same, but chooses by position alone.

    Args:
        L: Queries (at positions ``0 .. L - 1``).
        n_blocks: Blocks of keys.
        num_blocks: Earlier blocks to keep, ``>= 0``.
        block_size: Positions per block.

    Returns:
        Boolean ``(L, n_blocks)``.

    Examples:
        >>> window_blocks(6, 3, num_blocks=1, block_size=2).int()
        tensor([[1, 0, 0],
                [1, 0, 0],
                [1, 1, 0],
                [1, 1, 0],
                [0, 1, 1],
                [0, 1, 1]], dtype=torch.int32)
    """
    _validate.counts(L=L, n_blocks=n_blocks, block_size=block_size)
    _validate.count("num_blocks", num_blocks, minimum=0)
    own_index = torch.arange(L) // block_size  # (L,)
    gap = own_index[:, None] - torch.arange(n_blocks)[None, :]  # (L, n_blocks): how many blocks back
    return (gap >= 0) & (gap <= num_blocks)


# --- attention over the selected blocks -----------------------------------------------------


@dataclass(frozen=True)
class SparseAttentionState:
    """What `block_sparse_attention` computed.

    Attributes:
        tiles_computed: Tiles of `tiled_attention` computed (over the whole batch at once).
        tiles_skipped: Tiles skipped: above the diagonal, or selected by no query of the tile.
        multiply_adds: Multiply-adds of the computed tiles' two products.
    """

    tiles_computed: int
    tiles_skipped: int
    multiply_adds: int


def block_sparse_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    selected: Tensor,
    block_size: int,
    *,
    block_q: int = 1,
    scale: float | None = None,
) -> tuple[Tensor, SparseAttentionState]:
    r"""Causal attention of each query over the keys of its selected blocks only.

    Query $t$ sees key $j$ when $j \le t$ and ``selected[..., t, j // block_size]``.
    `attn_ref.tiled.tiled_attention` runs it in tiles of ``block_q`` queries by
    ``block_size`` keys, so a key block is one tile column: a tile that no query of
    it selected, in any sequence or head of the batch, is skipped (``skip``);
    a computed tile gets $-\infty$ where its query did not select it
    (``modify``). With ``block_q=1`` the computed tiles are exactly the
    selected blocks; with a larger ``block_q`` a tile is computed for the union of
    its queries' choices.

    Selecting every block wholly before a query, with its own, is causal attention.

    Args:
        query: ``(..., L, d_k)``, at positions ``0 .. L - 1``.
        key: ``(..., S, d_k)``, same leading dimensions.
        value: ``(..., S, d_v)``.
        selected: Boolean ``(..., L, n_blocks)`` (broadcastable over the leading dimensions),
            from `select_blocks` or `window_blocks`.
        block_size: Positions per key block.
        block_q: Queries per tile.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.

    Returns:
        ``(output, state)``: ``(..., L, d_v)`` and a `SparseAttentionState`.

    Examples:
        Every block selected: the output of causal attention.

        >>> from attn_ref.functional import scaled_dot_product_attention
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v = torch.randn(3, 2, 10, 4, generator=g)
        >>> every = select_blocks(torch.zeros(10, 4), top_k=4, block_size=3)
        >>> out, state = block_sparse_attention(q, k, v, every, block_size=3)
        >>> dense, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, dense, atol=1e-6)
        True
        >>> state.tiles_computed  # 3 * 1 + 3 * 2 + 3 * 3 + 1 * 4
        22
        >>> own = window_blocks(10, 4, num_blocks=0, block_size=3)
        >>> _, state = block_sparse_attention(q, k, v, own, block_size=3)
        >>> state.tiles_computed
        10
    """
    _validate.attention_inputs(query, key, value, None, True)
    _validate.boolean("selected", selected, min_ndim=2)
    _validate.count("block_size", block_size)
    _validate.count("block_q", block_q)
    L, S = query.shape[-2], key.shape[-2]
    n_blocks = math.ceil(S / block_size)
    if selected.shape[-2:] != (L, n_blocks):
        raise ValueError(
            f"selected must be (..., L, n_blocks) = (..., {L}, {n_blocks}) for {S} keys in blocks of "
            f"{block_size}, got {tuple(selected.shape)}"
        )
    batch = torch.broadcast_shapes(query.shape[:-2], selected.shape[:-2])
    chosen = selected.expand(*batch, L, n_blocks)  # (..., L, n_blocks)

    def column(rows: range, cols: range) -> Tensor:  # (..., bq): did each query choose this tile's block?
        return chosen[..., rows.start : rows.stop, cols.start // block_size]

    def skip(rows: range, cols: range) -> bool:
        return not bool(column(rows, cols).any())

    def mask(scores: Tensor, rows: range, cols: range) -> Tensor:  # (..., bq, bk)
        return scores.masked_fill(~column(rows, cols)[..., None], float("-inf"))

    output, state = tiled_attention(
        query,
        key,
        value,
        is_causal=True,
        scale=scale,
        block_size=(block_q, block_size),
        tile_rule=TileRule(skip=skip, modify=mask),
    )
    return output, SparseAttentionState(state.tiles_computed, state.tiles_skipped, state.multiply_adds)


# --- what a selection keeps -----------------------------------------------------------------


def selection_density(selected: Tensor, block_size: int, block_q: int = 1) -> float:
    r"""Share of the causal tiles a selection computes, per sequence and head.

    The causal tiles are those of tiles of ``block_q`` queries by ``block_size``
    keys that hold at least one allowed (query, key) pair. A tile is computed when
    any of its queries selected its block. With ``block_q=1`` this is the mean,
    over the queries, of the blocks selected, divided by the mean of the blocks
    causal attention would read.

    Args:
        selected: Boolean ``(..., L, n_blocks)``.
        block_size: Positions per key block.
        block_q: Queries per tile.

    Returns:
        Tiles computed / causal tiles, summed over the leading dimensions.

    Examples:
        >>> own = window_blocks(8, 4, num_blocks=0, block_size=2)
        >>> selection_density(own, 2)  # 8 blocks read, of 1+1+2+2+3+3+4+4 = 20
        0.4
    """
    _validate.boolean("selected", selected, min_ndim=2)
    _validate.count("block_size", block_size)
    _validate.count("block_q", block_q)
    L, n_blocks = selected.shape[-2:]
    causal = window_blocks(L, n_blocks, n_blocks, block_size).to(selected.device)  # (L, n_blocks)
    computed = _tiles(selected & causal, block_q)  # (..., n_rows, n_blocks)
    return int(computed.sum()) / int(_tiles(causal.expand(selected.shape), block_q).sum())


def _tiles(mask: Tensor, block_q: int) -> Tensor:
    """``(..., ceil(L / block_q), n_blocks)``: whether any query of each row of tiles is ``True``."""
    L = mask.shape[-2]
    return torch.stack([mask[..., s : s + block_q, :].any(dim=-2) for s in range(0, L, block_q)], dim=-2)


def captured_weight(weights: Tensor, selected: Tensor, block_size: int) -> Tensor:
    r"""Each query's share of its dense attention weight that falls inside its selected blocks.

    $\sum_{j \in \text{selected}} a_{tj}$, where $a$ are the weights of full
    (causal) attention: 1 when the selection keeps every key the query weighs.

    Args:
        weights: ``(..., L, S)`` dense attention weights, each row summing to 1.
        selected: Boolean ``(..., L, n_blocks)``.
        block_size: Positions per key block.

    Returns:
        ``(..., L)``.

    Examples:
        >>> a = torch.tensor([[0.5, 0.25, 0.25, 0.0]])  # one query, four keys
        >>> captured_weight(a, torch.tensor([[True, False]]), 2)
        tensor([0.7500])
    """
    _validate.tensor("weights", weights, min_ndim=2)
    _validate.boolean("selected", selected, min_ndim=2)
    S = weights.shape[-1]
    per_key = selected.repeat_interleave(block_size, dim=-1)[..., :S]  # (..., L, S)
    return (weights * per_key).sum(dim=-1)


# --- a trained model, run sparse ------------------------------------------------------------


Attend = Callable[[int, Tensor, Tensor, Tensor], Tensor]


def run_attention_only(model: AttentionOnlyDecoder, tokens: Tensor, attend: Attend) -> Tensor:
    """The forward pass of an `AttentionOnlyDecoder`, with each layer's attention left to ``attend``.

    ``attend(layer, q, k, v)`` gets one layer's heads, ``(B, H, T, d_k)`` each, and
    returns the heads' outputs, ``(B, H, T, d_k)``; the rest is the model's own.

    Args:
        model: The trained model.
        tokens: ``(B, T)`` token ids.
        attend: The attention of each layer.

    Returns:
        ``(B, T, vocab_size)`` logits.

    Examples:
        Causal attention gives the model's own logits:

        >>> from attn_ref.functional import scaled_dot_product_attention
        >>> _ = torch.manual_seed(0)
        >>> model = AttentionOnlyDecoder(
        ...     8, 6, embed_dim=8, num_layers=2, num_heads=2
        ... )
        >>> tokens = torch.tensor([[1, 2, 3, 1, 2]])
        >>> def causal(layer, q, k, v):
        ...     return scaled_dot_product_attention(q, k, v, is_causal=True)[0]
        >>> logits = run_attention_only(model, tokens, causal)
        >>> torch.allclose(logits, model(tokens)[0], atol=1e-6)
        True
    """
    if not isinstance(model, AttentionOnlyDecoder):
        raise TypeError(f"model must be an AttentionOnlyDecoder, got {type(model).__name__}")
    x = model.embed(tokens)  # (B, T, C)
    for number, layer in enumerate(model.layers):
        q = split_heads(layer.q_proj(x), layer.num_heads)  # (B, T, C) -> (B, H, T, d_k)
        k = split_heads(layer.k_proj(x), layer.num_kv_heads)  # (B, T, H_kv * d_k) -> (B, H_kv, T, d_k)
        v = split_heads(layer.v_proj(x), layer.num_kv_heads)  # (B, T, H_kv * d_k) -> (B, H_kv, T, d_k)
        k, v = repeat_kv_heads(k, layer.num_heads), repeat_kv_heads(v, layer.num_heads)  # -> (B, H, T, d_k)
        x = x + layer.out_proj(merge_heads(attend(number, q, k, v)))  # (B, H, T, d_k) -> (B, T, C)
    return model.unembedding(x)  # (B, T, vocab_size)

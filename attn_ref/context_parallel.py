r"""Attention across processes: one sequence split over ranks, its keys and values brought to its queries.

Context parallelism splits one long sequence over $R$ processes, the *ranks* of a
``torch.distributed`` process group. Each rank holds the queries, keys and values of its own
tokens, ``(B, H, T / R, d)``. Causal attention needs, for every query, every key before it, so
keys and values must travel between ranks. Three ways, each exact:

- `ring_attention` (Liu et al., 2023): the blocks of keys and values go round a ring, one hop per
  step; after $R$ steps every rank has met every block, and has merged its partial outputs by
  their log-sum-exp (the online softmax of `attn_ref.tiled`, across processes). Its backward pass
  sends the blocks round again, with the gradients of the keys and values gathered so far, and a
  last hop brings those gradients home to the rank that owns the block.
- `allgather_attention` (Llama 3): every rank gathers every block of keys and values at once, then
  attends. Its backward pass sends each block's gradients back to its owner.
- `ulysses_attention` (DeepSpeed-Ulysses, Jacobs et al., 2023): an all-to-all trades the sequence
  for the heads, so that each rank holds the whole sequence for $H / R$ of the heads; it attends
  there, and a second all-to-all trades back.

Which tokens a rank holds is its *layout* (`chunk_ids`): ``"contiguous"`` gives rank $r$ the
$r$-th of $R$ equal chunks; ``"zigzag"`` cuts the sequence into $2R$ chunks and gives rank $r$
chunks $r$ and $2R - 1 - r$, so that under a causal mask every rank has the same work. Every
function computes with the tokens' positions in the whole sequence, so any layout gives the same
result. Inside a rank, attention goes chunk by chunk with `attn_ref.tiled.tiled_attention` and
`attn_ref.backward.flash_attention_backward`, skipping pairs of chunks whose keys all come after
their queries.

The three work under ``torch.distributed`` (here on the gloo backend, in processes on one
machine) and, without a process group, in one process as ``world_size`` 1. `launch` starts the
ranks of a process group on this machine, runs a function in each and returns what each returned.
`forward_backward`, `cost_on_rank` and `working_set_on_rank` are such functions.
`bytes_sent_per_rank` is what each rank sends, by formula, to compare with what a run measured.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_for_any
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from attn_ref import _validate
from attn_ref.backward import flash_attention_backward
from attn_ref.measure import peak_memory_here
from attn_ref.multihead import repeat_kv_heads
from attn_ref.serving.cost import merge_partials
from attn_ref.tiled import tiled_attention

__all__ = [
    "LAYOUTS",
    "METHODS",
    "ContextParallelState",
    "RankCost",
    "RankError",
    "allgather_attention",
    "bytes_sent_per_rank",
    "chunk_ids",
    "cost_on_rank",
    "forward_backward",
    "launch",
    "num_chunks",
    "ranks_cpu_seconds",
    "ring_attention",
    "run_limit",
    "shard",
    "token_positions",
    "ulysses_attention",
    "unshard",
    "working_set_on_rank",
]

LAYOUTS = ("contiguous", "zigzag")
METHODS = ("ring", "allgather", "ulysses")


# --- layouts: which tokens a rank holds ---------------------------------------------------------


def num_chunks(layout: str, world_size: int) -> int:
    """How many equal chunks ``layout`` cuts the sequence into: $R$, or $2R$ for zigzag.

    Examples:
        >>> num_chunks("contiguous", 4), num_chunks("zigzag", 4)
        (4, 8)
    """
    _validate.one_of("layout", layout, LAYOUTS)
    world_size = _validate.count("world_size", world_size)
    return world_size if layout == "contiguous" else 2 * world_size


def chunk_ids(layout: str, world_size: int, rank: int) -> tuple[int, ...]:
    """The chunks of the sequence that ``rank`` holds, in the order it holds them.

    ``"contiguous"``: rank $r$ holds chunk $r$ of $R$. ``"zigzag"``: rank $r$ holds chunks $r$
    and $2R - 1 - r$ of $2R$, one early and one late, so that under a causal mask each rank's
    queries see as many keys as every other rank's.

    Args:
        layout: ``"contiguous"`` or ``"zigzag"``.
        world_size: $R$, the number of ranks.
        rank: A rank, in ``[0, world_size)``.

    Examples:
        >>> [chunk_ids("contiguous", 4, r) for r in range(4)]
        [(0,), (1,), (2,), (3,)]
        >>> [chunk_ids("zigzag", 4, r) for r in range(4)]
        [(0, 7), (1, 6), (2, 5), (3, 4)]
    """
    chunks = num_chunks(layout, world_size)
    rank = _validate.count("rank", rank, minimum=0, maximum=world_size - 1)
    return (rank,) if layout == "contiguous" else (rank, chunks - 1 - rank)


def _chunk_length(T: int, layout: str, world_size: int, name: str = "T") -> int:
    chunks = num_chunks(layout, world_size)
    if T % chunks:
        raise ValueError(
            f"{name}={T} must be a multiple of {chunks}: the {layout} layout cuts the sequence into "
            f"{chunks} chunks of equal length for world_size={world_size}"
        )
    return T // chunks


def token_positions(T: int, layout: str, world_size: int, rank: int) -> Tensor:
    """The positions in the whole sequence of the ``T / world_size`` tokens that ``rank`` holds.

    Positions are what a causal mask and rotary embeddings read: a rank's third token is not the
    sequence's third token unless the rank is rank 0 of a contiguous layout.

    Examples:
        >>> token_positions(16, "zigzag", 4, 1)
        tensor([ 2,  3, 12, 13])
    """
    T = _validate.count("T", T)
    n = _chunk_length(T, layout, world_size)
    return torch.cat([torch.arange(c * n, (c + 1) * n) for c in chunk_ids(layout, world_size, rank)])


def shard(x: Tensor, layout: str, world_size: int, rank: int, dim: int = -2) -> Tensor:
    """The part of ``x`` (the whole sequence along ``dim``) that ``rank`` holds: its chunks, in order.

    Examples:
        >>> x = torch.arange(8)  # 8 tokens' positions
        >>> shard(x, "zigzag", 2, 1, dim=0)  # chunks 1 and 2 of 4
        tensor([2, 3, 4, 5])
    """
    _validate.tensor("x", x, min_ndim=1, any_dtype=True)  # ids and positions are cut too
    T = x.shape[dim]
    n = _chunk_length(T, layout, world_size, name=f"x.shape[{dim}]")
    return torch.cat([x.narrow(dim, c * n, n) for c in chunk_ids(layout, world_size, rank)], dim=dim)


def unshard(shards: Sequence[Tensor], layout: str, dim: int = -2) -> Tensor:
    """The whole sequence from every rank's part (``shards[r]`` from rank ``r``): `shard` undone.

    Examples:
        >>> x = torch.arange(8.0)
        >>> parts = [shard(x, "zigzag", 2, r, dim=0) for r in range(2)]
        >>> torch.equal(unshard(parts, "zigzag", dim=0), x)
        True
    """
    world_size = _validate.count("len(shards)", len(shards))
    for r, part in enumerate(shards):
        _validate.tensor(f"shards[{r}]", part, min_ndim=1, any_dtype=True)
    per_rank = num_chunks(layout, world_size) // world_size  # chunks per rank: 1, or 2 for zigzag
    length = shards[0].shape[dim]
    if length % per_rank:
        raise ValueError(
            f"shards[0].shape[{dim}]={length} must be a multiple of {per_rank}: each rank of the "
            f"{layout} layout holds {per_rank} chunks of equal length"
        )
    n = length // per_rank
    pieces: dict[int, Tensor] = {}
    for r, part in enumerate(shards):
        if part.shape != shards[0].shape:
            raise ValueError(
                f"shards[{r}] has shape {tuple(part.shape)}, expected shards[0]'s {tuple(shards[0].shape)}"
            )
        for i, c in enumerate(chunk_ids(layout, world_size, r)):
            pieces[c] = part.narrow(dim, i * n, n)
    return torch.cat([pieces[c] for c in sorted(pieces)], dim=dim)


def _chunks_in_rank_order(layout: str, world_size: int) -> list[int]:
    """The chunk ids of the whole sequence as the ranks hold them, rank 0's first."""
    return [c for r in range(world_size) for c in chunk_ids(layout, world_size, r)]


# --- what one rank did --------------------------------------------------------------------------


@dataclass
class ContextParallelState:
    r"""What one rank did in one call of `ring_attention`, `allgather_attention` or `ulysses_attention`.

    Filled in as the call runs; the ``backward`` fields when its backward pass runs.

    Attributes:
        method: ``"ring"``, ``"allgather"`` or ``"ulysses"``.
        layout: ``"contiguous"`` or ``"zigzag"``.
        rank: This rank.
        world_size: $R$.
        chunks: The chunks of the sequence this rank holds (`chunk_ids`).
        scale: The scores' multiplier (``None``: $1/\sqrt{d_k}$).
        block_size: The tiles' size inside each pair of chunks.
        logsumexp: The log-sum-exp of each query this rank attended for, ``(B, H, T / R)``
            (``(B, H / R, T)`` for Ulysses, which attends for all queries of its heads).
        pairs: Each pair of chunks this rank attended, in order: ``(step, query chunk, key chunk)``.
            A pair whose keys all come after its queries is skipped, and not listed.
        tiles_computed: Tiles of scores the forward pass computed (`attn_ref.tiled.tiled_attention`).
        multiply_adds: Multiply-adds of those tiles, summed over batch and heads.
        bytes_sent: Bytes the forward pass handed to the process group to send to other ranks.
        bytes_sent_backward: The same for the backward pass.
        compute_seconds: CPU time of the forward pass's own attention arithmetic (this thread's),
            communication excluded.
        compute_seconds_backward: The same for the backward pass.
    """

    method: str
    layout: str
    rank: int
    world_size: int
    chunks: tuple[int, ...]
    scale: float | None = None
    block_size: int = 128
    logsumexp: Tensor | None = None
    pairs: list[tuple[int, int, int]] = field(default_factory=list)
    tiles_computed: int = 0
    multiply_adds: int = 0
    bytes_sent: int = 0
    bytes_sent_backward: int = 0
    compute_seconds: float = 0.0
    compute_seconds_backward: float = 0.0

    def _sent(self, tensors: Sequence[Tensor], backward: bool) -> None:
        sent = sum(t.numel() * t.element_size() for t in tensors)
        if backward:
            self.bytes_sent_backward += sent
        else:
            self.bytes_sent += sent


# --- the process group ---------------------------------------------------------------------------


def _rank_and_size(group: dist.ProcessGroup | None) -> tuple[int, int]:
    """This process's rank in ``group`` and the group's size; ``(0, 1)`` without a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(group), dist.get_world_size(group)
    return 0, 1


def _peer(group: dist.ProcessGroup | None, rank: int) -> int:
    """The global rank of ``group``'s rank ``rank`` (what ``isend`` and ``irecv`` address)."""
    return rank if group is None else dist.get_global_rank(group, rank)


def _start_ring_pass(
    tensors: Sequence[Tensor], group: dist.ProcessGroup | None, state: ContextParallelState, backward: bool
) -> Callable[[], list[Tensor]]:
    """Send ``tensors`` to the next rank on the ring and receive the previous rank's, without
    waiting: returns a function that waits for them and returns what arrived."""
    rank, R = state.rank, state.world_size
    if R == 1:  # the next rank is this one
        return lambda: list(tensors)
    outgoing = [t.contiguous() for t in tensors]  # kept alive until the sends complete
    received = [torch.empty_like(t) for t in outgoing]
    requests = [dist.isend(t, _peer(group, (rank + 1) % R), group=group) for t in outgoing]
    requests += [dist.irecv(t, _peer(group, (rank - 1) % R), group=group) for t in received]
    state._sent(outgoing, backward)

    def finish() -> list[Tensor]:
        for request in requests:
            request.wait()
        outgoing.clear()
        return received

    return finish


def _all_gather(x: Tensor, group: dist.ProcessGroup | None, state: ContextParallelState) -> list[Tensor]:
    """Every rank's ``x``, rank 0's first. Each rank sends its own $R - 1$ times (a ring all-gather)."""
    if state.world_size == 1:
        return [x]
    gathered = [torch.empty_like(x) for _ in range(state.world_size)]
    dist.all_gather(gathered, x.contiguous(), group=group)
    state._sent([x] * (state.world_size - 1), backward=False)
    return gathered


def _all_to_all(
    pieces: Sequence[Tensor], group: dist.ProcessGroup | None, state: ContextParallelState, backward: bool
) -> list[Tensor]:
    """``pieces[r]`` goes to rank ``r``; returns what each rank sent this one, rank 0's first."""
    if state.world_size == 1:
        return list(pieces)
    outgoing = [p.contiguous() for p in pieces]
    received = [torch.empty_like(p) for p in outgoing]
    dist.all_to_all(received, outgoing, group=group)
    state._sent([p for r, p in enumerate(outgoing) if r != state.rank], backward)
    return received


# --- attention inside one rank, chunk by chunk ---------------------------------------------------


def _attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_chunks: Sequence[int],
    k_chunks: Sequence[int],
    out: Tensor,
    lse: Tensor,
    state: ContextParallelState,
    step: int,
) -> None:
    """Causal attention of the queries ``q`` (the chunks ``q_chunks``, in order) over the keys
    ``k`` and values ``v`` (the chunks ``k_chunks``), merged into the running ``out`` and ``lse``.

    A pair of chunks whose keys all come after its queries is skipped; a chunk meets itself
    with the causal mask; an earlier chunk needs no mask. Chunks are compared by their place in
    the whole sequence, whatever rank holds them.
    """
    started = time.thread_time()
    n = q.shape[-2] // len(q_chunks)  # every chunk has the same length
    for i, a in enumerate(q_chunks):
        rows = slice(i * n, (i + 1) * n)
        for j, b in enumerate(k_chunks):
            if b > a:  # every key of chunk b comes after every query of chunk a
                continue
            cols = slice(j * n, (j + 1) * n)
            keys = repeat_kv_heads(k[..., cols, :], q.shape[1])  # (B, H, n, d_k): a head per query head
            values = repeat_kv_heads(v[..., cols, :], q.shape[1])
            part, tiles = tiled_attention(
                q[..., rows, :],
                keys,
                values,
                is_causal=a == b,
                scale=state.scale,
                block_size=state.block_size,
            )
            merged, merged_lse = merge_partials(  # the online softmax's merge, by log-sum-exp
                torch.stack([out[..., rows, :], part]), torch.stack([lse[..., rows], tiles.logsumexp])
            )
            out[..., rows, :], lse[..., rows] = merged, merged_lse
            state.pairs.append((step, a, b))
            state.tiles_computed += tiles.tiles_computed
            state.multiply_adds += tiles.multiply_adds
    state.compute_seconds += time.thread_time() - started


def _attend_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Tensor,
    grad_out: Tensor,
    q_chunks: Sequence[int],
    k_chunks: Sequence[int],
    grads: tuple[Tensor, Tensor, Tensor],
    state: ContextParallelState,
) -> None:
    """The gradients of `_attend`'s pairs of chunks, added into ``grads`` = ``(dq, dk, dv)``.

    Each pair recomputes its weights from the *final* log-sum-exp of its queries (``lse``, the
    merge of every pair) and their final output ``out``, as FlashAttention's backward pass does
    (`attn_ref.backward.flash_attention_backward`): so a pair's share of the gradients is exact,
    whichever rank computes it.
    """
    started = time.thread_time()
    dq, dk, dv = grads
    n = q.shape[-2] // len(q_chunks)
    H, H_kv = q.shape[1], k.shape[1]
    for i, a in enumerate(q_chunks):
        rows = slice(i * n, (i + 1) * n)
        for j, b in enumerate(k_chunks):
            if b > a:
                continue
            cols = slice(j * n, (j + 1) * n)
            dq_part, dk_part, dv_part, _ = flash_attention_backward(
                q[..., rows, :],
                repeat_kv_heads(k[..., cols, :], H),
                repeat_kv_heads(v[..., cols, :], H),
                out[..., rows, :],
                lse[..., rows],
                grad_out[..., rows, :],
                is_causal=a == b,
                scale=state.scale,
                block_size=state.block_size,
            )
            dq[..., rows, :] += dq_part
            # (B, H, n, d) -> (B, H_kv, H / H_kv, n, d) -> (B, H_kv, n, d): a group's heads share a key
            dk[..., cols, :] += dk_part.unflatten(1, (H_kv, H // H_kv)).sum(dim=2)
            dv[..., cols, :] += dv_part.unflatten(1, (H_kv, H // H_kv)).sum(dim=2)
    state.compute_seconds_backward += time.thread_time() - started


def _running_output(q: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """An empty running output ``(B, H, L, d_v)`` and log-sum-exp ``(B, H, L)``: no key seen yet."""
    B, H, L, _ = q.shape
    out = torch.zeros(B, H, L, v.shape[-1], dtype=q.dtype)
    return out, torch.full((B, H, L), -math.inf, dtype=q.dtype)


# --- the ring ------------------------------------------------------------------------------------


def _ring_forward(q, k, v, layout, group, state):
    rank, R = state.rank, state.world_size
    out, lse = _running_output(q, v)  # nothing merged yet
    block = [k, v]  # the keys and values held at this step: its own first
    for step in range(R):
        owner = (rank - step) % R  # the rank they came from
        if step < R - 1:  # send them on, and receive the next block
            finish = _start_ring_pass(block, group, state, backward=False)
        keys = chunk_ids(layout, R, owner)  # their chunks of the sequence
        _attend(q, *block, state.chunks, keys, out, lse, state, step)
        if step < R - 1:  # it arrived while this one was attended
            block = finish()
    state.logsumexp = lse
    return out, (q, k, v, out, lse)


def _ring_backward(q, k, v, out, lse, grad_out, layout, group, state, num_kv_heads):
    rank, R = state.rank, state.world_size
    dq = torch.zeros_like(q)
    block = [k, v, torch.zeros_like(k), torch.zeros_like(v)]  # K, V and the dK, dV gathered for them
    for step in range(R):
        owner = (rank - step) % R
        finish = _start_ring_pass(block[:2], group, state, backward=True) if step < R - 1 else None
        grads = (dq, block[2], block[3])
        keys = chunk_ids(layout, R, owner)
        _attend_backward(q, *block[:2], out, lse, grad_out, state.chunks, keys, grads, state)
        # The gradients gathered so far go on with their block; after R hops they are home.
        gathered = _start_ring_pass(block[2:], group, state, backward=True)()
        block = [*(finish() if finish is not None else (None, None)), *gathered]
    return dq, block[2], block[3]


# --- all-gather ----------------------------------------------------------------------------------


def _allgather_forward(q, k, v, layout, group, state):
    keys = torch.cat(_all_gather(k, group, state), dim=-2)  # (B, H_kv, T, d_k), rank 0's tokens first
    values = torch.cat(_all_gather(v, group, state), dim=-2)
    out, lse = _running_output(q, v)
    all_chunks = _chunks_in_rank_order(layout, state.world_size)
    _attend(q, keys, values, state.chunks, all_chunks, out, lse, state, 0)
    state.logsumexp = lse
    return out, (q, keys, values, out, lse)


def _allgather_backward(q, keys, values, out, lse, grad_out, layout, group, state, num_kv_heads):
    R = state.world_size
    dq, dk_all, dv_all = torch.zeros_like(q), torch.zeros_like(keys), torch.zeros_like(values)
    all_chunks = _chunks_in_rank_order(layout, R)
    grads = (dq, dk_all, dv_all)
    _attend_backward(q, keys, values, out, lse, grad_out, state.chunks, all_chunks, grads, state)
    # Reduce-scatter: each rank's share of every rank's dK goes to it, and it adds them up.
    dk = sum(_all_to_all(dk_all.chunk(R, dim=-2), group, state, backward=True))
    dv = sum(_all_to_all(dv_all.chunk(R, dim=-2), group, state, backward=True))
    return dq, dk, dv


# --- Ulysses -------------------------------------------------------------------------------------


def _ulysses_kv_heads(num_heads: int, num_kv_heads: int, world_size: int) -> Tensor | None:
    """Which key/value heads to send when there are fewer than ranks: one for each rank, the head
    its query heads read (``None``: split them as they are)."""
    if num_kv_heads % world_size == 0:
        return None
    return torch.tensor([r * num_kv_heads // world_size for r in range(world_size)])


def _heads_to_sequence(x: Tensor, group, state: ContextParallelState, backward: bool) -> Tensor:
    """``(B, H, T / R, d)`` on each rank -> ``(B, H / R, T, d)``: rank ``r`` gets the ``r``-th group of
    heads, for every rank's tokens (rank 0's first)."""
    pieces = x.chunk(state.world_size, dim=1)  # R pieces of (B, H / R, T / R, d), piece r for rank r
    return torch.cat(_all_to_all(pieces, group, state, backward), dim=-2)  # (B, H / R, T, d)


def _sequence_to_heads(x: Tensor, group, state: ContextParallelState, backward: bool) -> Tensor:
    """`_heads_to_sequence` undone: ``(B, H / R, T, d)`` -> ``(B, H, T / R, d)``."""
    pieces = x.chunk(state.world_size, dim=-2)  # R pieces of (B, H / R, T / R, d): rank r's tokens
    return torch.cat(_all_to_all(pieces, group, state, backward), dim=1)  # (B, H, T / R, d)


def _ulysses_forward(q, k, v, layout, group, state):
    copies = _ulysses_kv_heads(q.shape[1], k.shape[1], state.world_size)
    if copies is not None:  # fewer key/value heads than ranks: each rank gets a copy of the one it needs
        k, v = k[:, copies], v[:, copies]  # (B, R, T / R, d)
    q_heads, k_heads, v_heads = (_heads_to_sequence(x, group, state, backward=False) for x in (q, k, v))
    out_heads, lse = _running_output(q_heads, v_heads)  # (B, H / R, T, d_v): all tokens, some heads
    all_chunks = _chunks_in_rank_order(layout, state.world_size)
    _attend(q_heads, k_heads, v_heads, all_chunks, all_chunks, out_heads, lse, state, 0)
    state.logsumexp = lse
    out = _sequence_to_heads(out_heads, group, state, backward=False)  # (B, H, T / R, d_v)
    return out, (q_heads, k_heads, v_heads, out_heads, lse)


def _ulysses_backward(
    q_heads, k_heads, v_heads, out_heads, lse, grad_out, layout, group, state, num_kv_heads
):
    dout_heads = _heads_to_sequence(grad_out, group, state, backward=True)
    grads = tuple(torch.zeros_like(x) for x in (q_heads, k_heads, v_heads))
    all_chunks = _chunks_in_rank_order(layout, state.world_size)
    _attend_backward(
        q_heads, k_heads, v_heads, out_heads, lse, dout_heads, all_chunks, all_chunks, grads, state
    )
    dq, dk, dv = (_sequence_to_heads(g, group, state, backward=True) for g in grads)
    copies = _ulysses_kv_heads(dq.shape[1], num_kv_heads, state.world_size)
    if copies is not None:  # the copies' gradients add up in the head they copied
        B, _, n, _ = dk.shape
        dk = torch.zeros(B, num_kv_heads, n, dk.shape[-1], dtype=dk.dtype).index_add_(1, copies, dk)
        dv = torch.zeros(B, num_kv_heads, n, dv.shape[-1], dtype=dv.dtype).index_add_(1, copies, dv)
    return dq, dk, dv


_PASSES = {
    "ring": (_ring_forward, _ring_backward),
    "allgather": (_allgather_forward, _allgather_backward),
    "ulysses": (_ulysses_forward, _ulysses_backward),
}


class _ContextParallelAttention(torch.autograd.Function):
    """One method's forward pass, keeping what its backward pass needs; its backward pass."""

    @staticmethod
    def forward(ctx, query, key, value, method, layout, group, state):
        forward, _ = _PASSES[method]
        out, kept = forward(query, key, value, layout, group, state)
        ctx.save_for_backward(*kept)
        ctx.options = (method, layout, group, state, key.shape[1])
        return out

    @staticmethod
    def backward(ctx, grad_output):
        method, layout, group, state, num_kv_heads = ctx.options
        _, backward = _PASSES[method]
        grads = backward(*ctx.saved_tensors, grad_output.contiguous(), layout, group, state, num_kv_heads)
        return (*grads, None, None, None, None)


# --- the three methods ---------------------------------------------------------------------------


def _context_parallel(method, query, key, value, layout, group, scale, block_size):
    rank, R = _rank_and_size(group)
    _check_inputs(method, query, key, value, layout, R, block_size)
    state = ContextParallelState(method, layout, rank, R, chunk_ids(layout, R, rank), scale, block_size)
    out = _ContextParallelAttention.apply(query, key, value, method, layout, group, state)
    return out, state


def _check_inputs(method, query, key, value, layout, world_size, block_size) -> None:
    for name, x in (("query", query), ("key", key), ("value", value)):
        _validate.tensor(name, x)
        _validate.shape(name, x, (None,) * 4, "(B, H, T / R, d): this rank's tokens, heads second")
    _validate.same_dtype(query=query, key=key, value=value)
    B, H, n, d_k = query.shape
    _validate.shape("key", key, (B, None, n, d_k), "(B, H_kv, T / R, d_k), with query's B, T / R and d_k")
    H_kv = key.shape[1]
    _validate.shape("value", value, (B, H_kv, n, None), "(B, H_kv, T / R, d_v), with key's B, H_kv and T / R")
    _validate.divides("key's H_kv", H_kv, "query's H", H, "each key/value head serves a group of query heads")
    per_rank = num_chunks(_validate.one_of("layout", layout, LAYOUTS), world_size) // world_size
    if n % per_rank:
        raise ValueError(
            f"query has shape {tuple(query.shape)}: its T / R = {n} tokens must be a multiple of "
            f"{per_rank}, since each rank of the {layout} layout holds {per_rank} chunks of equal length"
        )
    _validate.count("block_size", block_size)
    if method == "ulysses":
        if H % world_size:
            raise ValueError(
                f"ulysses_attention gives each rank H / world_size of the query heads, so world_size="
                f"{world_size} must divide query's H={H} (query has shape {tuple(query.shape)}); with "
                "more ranks than heads, ring_attention and allgather_attention still split the sequence"
            )
        if H_kv % world_size and world_size % H_kv:
            raise ValueError(
                f"ulysses_attention splits key's H_kv={H_kv} heads over world_size={world_size} ranks: "
                "world_size must divide H_kv, or H_kv divide world_size (each rank then gets a copy of "
                f"the key/value head its query heads read); key has shape {tuple(key.shape)}"
            )


def ring_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    layout: str = "zigzag",
    group: dist.ProcessGroup | None = None,
    scale: float | None = None,
    block_size: int = 128,
) -> tuple[Tensor, ContextParallelState]:
    r"""Causal attention over the whole sequence, its keys and values passed round a ring of ranks.

    At step $s$ (from 0 to $R - 1$), rank $r$ holds the keys and values of rank $(r - s) \bmod R$.
    It sends them on to rank $r + 1$ while it attends its queries to them, then takes the block
    that rank $r - 1$ sent. Each step gives a partial output and its log-sum-exp $\lambda$, and
    the partials merge as the online softmax's blocks do:
    $O = \sum_s e^{\lambda_s - \lambda} O_s$ with $\lambda = \log \sum_s e^{\lambda_s}$.

    The backward pass goes round again: at each step a rank adds its queries' share of $dK$ and
    $dV$ to the block it holds, and passes the block on with them. After $R$ hops the gradients
    of each block are back with its owner; $dQ$ never moves.

    Each hop carries ``(B, H_kv, T / R, d)`` keys and values: the forward pass sends
    $R - 1$ blocks of each (`bytes_sent_per_rank`). With ``layout="zigzag"`` every rank attends
    as many pairs of tokens as every other under the causal mask.

    Args:
        query: ``(B, H, T / R, d_k)``: this rank's queries, its chunks of the sequence in order
            (`shard`).
        key: ``(B, H_kv, T / R, d_k)``: this rank's keys; ``H_kv`` divides ``H`` (grouped-query
            attention: a key/value head serves ``H / H_kv`` query heads).
        value: ``(B, H_kv, T / R, d_v)``: this rank's values.
        layout: Which chunks each rank holds: ``"contiguous"`` or ``"zigzag"`` (`chunk_ids`).
        group: The process group; by default the whole default group, or one process (rank 0
            of 1) when ``torch.distributed`` is not initialised.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.
        block_size: The tiles of `attn_ref.tiled.tiled_attention` inside each pair of chunks.

    Returns:
        ``(output, state)``: this rank's output, ``(B, H, T / R, d_v)``, differentiable with
        respect to ``query``, ``key`` and ``value``, and a `ContextParallelState` of what this rank
        computed and sent.

    Raises:
        TypeError: An input is not a floating tensor, or their dtypes differ.
        ValueError: A shape does not fit; the message names the argument, its shape and what it
            needs.

    Examples:
        In one process (no process group: rank 0 of 1) it is plain causal attention:

        >>> import torch.nn.functional as F
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v = (torch.randn(1, 2, 8, 4, generator=g) for _ in range(3))
        >>> out, state = ring_attention(q, k, v)
        >>> expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, expected, atol=1e-6)
        True

        The zigzag layout cuts the 8 tokens into chunks 0 and 1; chunk 0's queries never see
        chunk 1's keys, so that pair is skipped:

        >>> state.chunks, state.pairs  # (step, query chunk, key chunk)
        ((0, 1), [(0, 0, 0), (0, 1, 0), (0, 1, 1)])
    """
    return _context_parallel("ring", query, key, value, layout, group, scale, block_size)


def allgather_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    layout: str = "zigzag",
    group: dist.ProcessGroup | None = None,
    scale: float | None = None,
    block_size: int = 128,
) -> tuple[Tensor, ContextParallelState]:
    r"""Causal attention over the whole sequence, after every rank gathers every rank's keys and values.

    This is the context parallelism of Llama 3's training (Llama Team, 2024, section 3.3.2): an
    all-gather of $K$ and $V$, then attention of the rank's own queries over all of them. Simpler
    than the ring, with the same bytes sent, but each rank holds the whole sequence's keys and
    values at once. The backward pass sends each rank's share of every block's $dK$ and $dV$ to
    the block's owner (a reduce-scatter, written as an all-to-all), where they add up.

    Args:
        query: ``(B, H, T / R, d_k)``: this rank's queries, its chunks of the sequence in order
            (`shard`).
        key: ``(B, H_kv, T / R, d_k)``: this rank's keys; ``H_kv`` divides ``H`` (grouped-query
            attention: a key/value head serves ``H / H_kv`` query heads).
        value: ``(B, H_kv, T / R, d_v)``: this rank's values.
        layout: Which chunks each rank holds: ``"contiguous"`` or ``"zigzag"`` (`chunk_ids`).
        group: The process group; by default the whole default group, or one process (rank 0
            of 1) when ``torch.distributed`` is not initialised.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.
        block_size: The tiles of `attn_ref.tiled.tiled_attention` inside each pair of chunks.

    Returns:
        ``(output, state)``: this rank's output, ``(B, H, T / R, d_v)``, differentiable with
        respect to ``query``, ``key`` and ``value``, and a `ContextParallelState` of what this rank
        computed and sent.

    Raises:
        TypeError: An input is not a floating tensor, or their dtypes differ.
        ValueError: A shape does not fit; the message names the argument, its shape and what it
            needs.

    Examples:
        >>> import torch.nn.functional as F
        >>> g = torch.Generator().manual_seed(0)
        >>> q = torch.randn(1, 4, 8, 4, generator=g)
        >>> k, v = (torch.randn(1, 2, 8, 4, generator=g) for _ in range(2))
        >>> out, _ = allgather_attention(q, k, v)
        >>> expected = F.scaled_dot_product_attention(
        ...     q, k, v, is_causal=True, enable_gqa=True
        ... )
        >>> torch.allclose(out, expected, atol=1e-6)
        True
    """
    return _context_parallel("allgather", query, key, value, layout, group, scale, block_size)


def ulysses_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    layout: str = "zigzag",
    group: dist.ProcessGroup | None = None,
    scale: float | None = None,
    block_size: int = 128,
) -> tuple[Tensor, ContextParallelState]:
    r"""Causal attention over the whole sequence, the sequence traded for heads by an all-to-all.

    DeepSpeed-Ulysses (Jacobs et al., 2023): each rank sends rank $j$ the $j$-th group of its
    heads, so that after one all-to-all it holds the whole sequence for $H / R$ heads. It
    attends there, as one process would, and a second all-to-all trades the output back to the
    rank's own tokens and all heads. So ``world_size`` must divide $H$: with more ranks than
    heads, Ulysses runs out of heads. With fewer key/value heads than ranks (grouped-query
    attention), each rank is sent a copy of the one key/value head its query heads read. The
    backward pass trades $dO$ the same way, and $dQ$, $dK$, $dV$ back.

    Args:
        query: ``(B, H, T / R, d_k)``: this rank's queries, its chunks of the sequence in order
            (`shard`).
        key: ``(B, H_kv, T / R, d_k)``: this rank's keys; ``H_kv`` divides ``H`` (grouped-query
            attention: a key/value head serves ``H / H_kv`` query heads).
        value: ``(B, H_kv, T / R, d_v)``: this rank's values.
        layout: Which chunks each rank holds: ``"contiguous"`` or ``"zigzag"`` (`chunk_ids`).
        group: The process group; by default the whole default group, or one process (rank 0
            of 1) when ``torch.distributed`` is not initialised.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.
        block_size: The tiles of `attn_ref.tiled.tiled_attention` inside each pair of chunks.

    Returns:
        ``(output, state)``: this rank's output, ``(B, H, T / R, d_v)``, differentiable with
        respect to ``query``, ``key`` and ``value``, and a `ContextParallelState` of what this rank
        computed and sent.

    Raises:
        TypeError: An input is not a floating tensor, or their dtypes differ.
        ValueError: A shape does not fit; the message names the argument, its shape and what it
            needs.

    Examples:
        >>> import torch.nn.functional as F
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v = (torch.randn(1, 2, 8, 4, generator=g) for _ in range(3))
        >>> out, state = ulysses_attention(q, k, v)
        >>> expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
        >>> state.logsumexp.shape  # (B, H / R, T): every token, this rank's heads
        torch.Size([1, 2, 8])
    """
    return _context_parallel("ulysses", query, key, value, layout, group, scale, block_size)


_ATTENTION = {"ring": ring_attention, "allgather": allgather_attention, "ulysses": ulysses_attention}


def bytes_sent_per_rank(
    method: str,
    T: int,
    world_size: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    *,
    itemsize: int = 4,
    batch: int = 1,
    backward: bool = False,
) -> int:
    r"""Bytes one rank sends to the others in one call of ``method``: the forward pass, or the backward.

    With $n = T / R$ tokens per rank, one head of one rank's tokens is
    $b = B \, n \, d \cdot$ ``itemsize`` bytes, and $H_{kv}$ the key/value heads:

    - ring, forward: $R - 1$ hops of a key and a value block: $2 (R - 1) H_{kv} b$; backward:
      the keys and values again, $R - 1$ hops, and their gradients, $R$ hops: $2 (2R - 1) H_{kv} b$;
    - all-gather, forward: each rank's keys and values reach the $R - 1$ others (a ring
      all-gather sends each rank's block $R - 1$ times): $2 (R - 1) H_{kv} b$; backward: each
      rank's share of the others' $dK$, $dV$: $2 (R - 1) H_{kv} b$;
    - Ulysses: an all-to-all keeps $1/R$ of what a rank holds and sends the rest. Forward:
      $Q$, $K$, $V$ out, $O$ back: $\frac{R-1}{R} (2H + 2H'_{kv}) b$, where
      $H'_{kv} = \max(H_{kv}, R)$ counts the copies of key/value heads when there are fewer than
      ranks; backward, $dO$ out and $dQ$, $dK$, $dV$ back: the same.

    So the ring and the all-gather send bytes that do not shrink as $R$ grows, and Ulysses'
    shrink like $1/R$; but Ulysses sends the queries and outputs, $H$ heads, where the others send
    only $H_{kv}$.

    Examples:
        Rank $r$ holds 256 of 1024 tokens; one head of them is $256 \cdot 64 \cdot 4$ bytes:

        >>> one_head = 256 * 64 * 4
        >>> def in_heads(method, kv_heads):
        ...     sent = bytes_sent_per_rank(method, 1024, 4, 8, kv_heads, 64)
        ...     return sent // one_head
        >>> in_heads("ring", kv_heads=8), in_heads("ulysses", kv_heads=8)
        (48, 24)
        >>> in_heads("ulysses", kv_heads=2)  # 2 heads, copied to 4 ranks
        18
    """
    _validate.one_of("method", method, METHODS)
    R = _validate.count("world_size", world_size)
    _validate.counts(T=T, heads=heads, kv_heads=kv_heads, head_dim=head_dim, itemsize=itemsize, batch=batch)
    _validate.divides("world_size", R, "T", T, "each rank holds T / world_size tokens")
    b = batch * (T // R) * head_dim * itemsize  # one head of one rank's tokens
    if method == "ring":
        return 2 * (2 * R - 1 if backward else R - 1) * kv_heads * b if R > 1 else 0
    if method == "allgather":
        return 2 * (R - 1) * kv_heads * b
    _validate.divides("world_size", R, "heads", heads, "Ulysses gives each rank heads / world_size heads")
    if kv_heads % R and R % kv_heads:
        raise ValueError(
            f"Ulysses splits kv_heads={kv_heads} over world_size={R} ranks: world_size must divide "
            "kv_heads, or kv_heads divide world_size"
        )
    sent_kv_heads = max(kv_heads, R)
    return (R - 1) * (2 * heads + 2 * sent_kv_heads) * b // R


# --- ranks on this machine ---------------------------------------------------------------------


class RankError(RuntimeError):
    """A rank that `launch` started raised: the first to fail. The message names the rank and its
    error; ``rank``, ``error`` (the error's type and message) and ``traceback`` hold them apart."""

    def __init__(self, rank: int, world_size: int, error: str, traceback: str = "") -> None:
        super().__init__(f"rank {rank} of {world_size} failed: {error}")
        self.rank = rank
        self.error = error
        self.traceback = traceback


def launch(
    fn: Callable[..., Any], rank_args: Sequence[Sequence[Any]], *, timeout: float = 60.0, **kwargs: Any
) -> list[Any]:
    """Run ``fn(*rank_args[r], **kwargs)`` on ``len(rank_args)`` processes, rank ``r`` of a gloo group each.

    Each rank is a process of its own, started from a server process that has imported PyTorch
    and this module once (Python's ``forkserver``; ``spawn`` where there is none), so ``fn``
    must be importable from a module: a function of ``attn_ref``, not one defined in a notebook.
    The ranks join one process group on the gloo backend through a store at ``127.0.0.1`` on a
    port the operating system chose free, which this process holds until they finish. Each runs
    PyTorch on one thread.

    The call returns when every rank has returned, or raises as soon as one fails, after
    stopping the others. A collective that waits longer than ``timeout`` seconds for another
    rank fails in the waiting rank, naming the collective; a rank whose function is still
    running `run_limit` seconds after the start is stopped. Either way every process is stopped
    and joined before the call returns or raises.

    A script (not a notebook) that calls it needs Python's ``if __name__ == "__main__":`` guard,
    as every program that starts processes this way does: each rank imports the script first.

    Args:
        fn: The function each rank runs; what it returns must pickle (tensors do).
        rank_args: One sequence of arguments per rank; their count is the world size.
        timeout: Seconds a collective may wait; the whole run may take `run_limit` of it.
        **kwargs: Keyword arguments for every rank's call.

    Returns:
        What each rank's ``fn`` returned, rank 0's first.

    Raises:
        RankError: A rank raised; the message names the rank and its error.
        TimeoutError: Ranks were still running when the time was up; the message names them.

    Examples:
        Three processes, each asked its rank in the group:

        >>> from torch.distributed import get_rank
        >>> launch(get_rank, [(), (), ()])
        [0, 1, 2]

        A rank's error comes back with its rank: one query head cannot be split over two ranks.

        >>> x = torch.zeros(1, 1, 4, 2)  # (B, H, T / R, d): H = 1
        >>> try:
        ...     launch(ulysses_attention, [(x, x, x)] * 2)
        ... except RankError as error:  # the first rank to fail, named
        ...     print(error.error[:30])
        ValueError: ulysses_attention
    """
    world_size = _validate.count("len(rank_args)", len(rank_args))
    timeout = _validate.number("timeout", timeout, 0.0, above=True)
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if context.get_start_method() == "forkserver":
        _preload_in_forkserver()
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)  # port 0: the OS picks
    with tempfile.TemporaryDirectory() as folder:
        for rank, args in enumerate(rank_args):
            torch.save((tuple(args), kwargs), Path(folder) / f"args{rank}.pt")
        processes = [
            context.Process(
                target=_rank_main,
                args=(fn, rank, world_size, store.port, folder, timeout),
                name=f"rank {rank}",
                daemon=True,
            )
            for rank in range(world_size)
        ]
        try:
            for process in processes:
                process.start()
            _wait(processes, folder, time.monotonic() + run_limit(timeout), run_limit(timeout))
        finally:
            for process in processes:
                if process.is_alive():
                    process.kill()
                if process.pid is not None:
                    process.join()
        results = [torch.load(Path(folder) / f"result{r}.pt", weights_only=False) for r in range(world_size)]
    global _ranks_cpu_seconds
    _ranks_cpu_seconds += sum(cpu for _, cpu in results)
    return [result for result, _ in results]


_ranks_cpu_seconds = 0.0  # what every rank launch started has used, summed


def ranks_cpu_seconds() -> float:
    """CPU seconds that the ranks of every `launch` of this process have used so far, summed.

    This process's own CPU time does not include them: its ranks are children of the fork
    server, not of this process. What the fork server used to import PyTorch, once, is not
    counted either.

    Examples:
        >>> before = ranks_cpu_seconds()
        >>> _ = launch(time.process_time, [(), ()])
        >>> ranks_cpu_seconds() > before
        True
    """
    return _ranks_cpu_seconds


def _preload_in_forkserver() -> None:
    """Have the fork server import this module (and with it PyTorch) once, before it forks any
    rank, beside what it already preloads (the test suite's own helpers use the same server)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    preloaded = list(getattr(server, "_preload_modules", []))
    # Not "__main__" (the default): a script that calls launch at its top level would run again.
    wanted = [name for name in preloaded if name != "__main__"] + [__name__] * (__name__ not in preloaded)
    multiprocessing.set_forkserver_preload(wanted)


def run_limit(timeout: float) -> float:
    """Seconds `launch` lets its ranks run with a collective ``timeout``: $1.5 \times$ ``timeout`` + 1,
    so that a collective that hangs fails first, with its own message.

    Examples:
        >>> run_limit(60.0)
        91.0
    """
    return 1.5 * timeout + 1.0


def _wait(processes, folder: str, deadline: float, limit: float) -> None:
    """Until every rank has finished; raise for the first that fails, or when time is up."""
    running = {process.sentinel: rank for rank, process in enumerate(processes)}
    while running:
        left = deadline - time.monotonic()
        if left <= 0:  # ranks that kept a result are waiting for the others, not running
            busy = [r for r in sorted(running.values()) if not (Path(folder) / f"result{r}.pt").is_file()]
            names = ", ".join(str(r) for r in busy)
            raise TimeoutError(
                f"rank{'s' * (len(busy) > 1)} {names} of {len(processes)} still running its function after "
                f"{limit:g} s; every rank stopped"
            )
        for sentinel in wait_for_any(list(running), timeout=left):
            rank = running.pop(sentinel)
            processes[rank].join()
            if processes[rank].exitcode != 0:  # the first to fail: the others wait for it, or fail after
                error_file = Path(folder) / f"error{rank}.pt"
                if error_file.is_file():
                    error, trace = torch.load(error_file, weights_only=False)
                else:
                    error, trace = f"exit code {processes[rank].exitcode}", ""
                raise RankError(rank, len(processes), error, trace)


def _rank_main(fn, rank: int, world_size: int, port: int, folder: str, timeout: float) -> None:
    """One rank: join the process group, run ``fn`` on this rank's arguments, keep what it returned."""
    import traceback

    torch.set_num_threads(1)  # several ranks share the machine's cores
    with open(Path(folder) / f"output{rank}.txt", "w") as output:  # not the caller's: a notebook shows it
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
    try:
        args, kwargs = torch.load(Path(folder) / f"args{rank}.pt", weights_only=False)
        # The store waits longer than launch does, so that a collective's error, or launch's, is reported.
        store_timeout = datetime.timedelta(seconds=run_limit(timeout) + 5.0)
        store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=store_timeout)
        waiting = datetime.timedelta(seconds=timeout)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=waiting)
        dist.barrier()  # every rank connected before any runs, and perhaps fails and leaves
        result = fn(*args, **kwargs)
        torch.save((result, time.process_time()), Path(folder) / f"result{rank}.pt")  # every thread's CPU
        # Every rank done before any leaves the group. Through the store, not a collective: a
        # collective here would stand in for one that a rank's function skipped, and hide it.
        store.set(f"finished {rank}", "1")
        store.wait([f"finished {r}" for r in range(world_size)])
        dist.destroy_process_group()
    except BaseException as error:  # reported to launch, which raises RankError
        torch.save(
            (f"{type(error).__name__}: {error}", traceback.format_exc()), Path(folder) / f"error{rank}.pt"
        )
        os._exit(1)  # without waiting for the other ranks, which may never come


# --- what a rank runs ------------------------------------------------------------------------------


def forward_backward(
    attention: Callable[..., tuple[Tensor, ContextParallelState]],
    query: Tensor,
    key: Tensor,
    value: Tensor,
    grad_output: Tensor,
    **options: Any,
) -> tuple[Tensor, Tensor, Tensor, Tensor, ContextParallelState]:
    """This rank's output of ``attention`` and the gradients of ``(output * grad_output).sum()``.

    A function for `launch` to run on each rank, with that rank's shards.

    Returns:
        ``(output, grad_query, grad_key, grad_value, state)``.

    Examples:
        In one process, for `ring_attention`:

        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v, d_out = (torch.randn(1, 1, 4, 2, generator=g) for _ in range(4))
        >>> out, dq, dk, dv, state = forward_backward(ring_attention, q, k, v, d_out)
        >>> dk.shape, state.bytes_sent_backward  # one process sends nothing
        (torch.Size([1, 1, 4, 2]), 0)
    """
    leaves = [x.detach().clone().requires_grad_() for x in (query, key, value)]
    out, state = attention(*leaves, **options)
    # A scalar's backward: out.backward(grad_output) would first import SymPy, seconds in a new process.
    (out * grad_output).sum().backward()
    return (out.detach(), *(x.grad for x in leaves), state)


@dataclass(frozen=True)
class RankCost:
    """What one call of an attention function cost one rank (`cost_on_rank`), forward and backward.

    Attributes:
        wall_seconds: From the call to its return, waiting for other ranks included (the
            forward pass).
        compute_seconds: CPU time of the rank's own attention arithmetic in the forward pass,
            communication excluded (`ContextParallelState.compute_seconds`).
        bytes_written: Bytes this process wrote during the forward pass, as Linux counts them
            (``wchar`` in ``/proc/self/io``): what gloo wrote to its sockets, payload and message
            headers; ``None`` off Linux.
        bytes_counted: Bytes the forward pass handed to the process group to send
            (`ContextParallelState.bytes_sent`).
        tiles_computed: Tiles of scores the rank computed in the forward pass.
        multiply_adds: Their multiply-adds.
        bytes_written_backward: As ``bytes_written``, for the backward pass (0 without one).
        bytes_counted_backward: As ``bytes_counted``, for the backward pass (0 without one).
    """

    wall_seconds: float
    compute_seconds: float
    bytes_written: int | None
    bytes_counted: int
    tiles_computed: int
    multiply_adds: int
    bytes_written_backward: int | None = 0
    bytes_counted_backward: int = 0


def _bytes_written() -> int | None:
    """``wchar`` of ``/proc/self/io``: bytes this process (every thread) has written, sockets included."""
    path = Path("/proc/self/io")
    if not path.is_file():
        return None
    for line in path.read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return None


def _written_since(before: int | None) -> int | None:
    after = _bytes_written()
    return None if before is None or after is None else after - before


def cost_on_rank(
    method: str, query: Tensor, key: Tensor, value: Tensor, *, backward: bool = False, **options: Any
) -> RankCost:
    """The cost of one call of ``method``'s attention on this rank's shards, measured.

    A function for `launch` to run on each rank. The ranks start together (a barrier), and
    nothing else writes while the call runs, so the bytes this process writes are what it sends.
    With ``backward``, the backward pass of ``output.sum()`` is measured too.

    Examples:
        >>> q = k = v = torch.zeros(1, 1, 8, 2)
        >>> cost = cost_on_rank("ring", q, k, v)  # one process: nothing sent
        >>> cost.bytes_counted, cost.tiles_computed
        (0, 3)
    """
    attention = _ATTENTION[_validate.one_of("method", method, METHODS)]
    leaves = [x.detach().clone().requires_grad_(backward) for x in (query, key, value)]
    if dist.is_initialized():
        dist.barrier()
    written, started = _bytes_written(), time.perf_counter()
    out, state = attention(*leaves, **options)
    wall, sent = time.perf_counter() - started, _written_since(written)
    sent_backward = 0
    if backward:
        written = _bytes_written()
        out.sum().backward()
        sent_backward = _written_since(written)
    return RankCost(
        wall,
        state.compute_seconds,
        sent,
        state.bytes_sent,
        state.tiles_computed,
        state.multiply_adds,
        sent_backward,
        state.bytes_sent_backward,
    )


def working_set_on_rank(
    method: str, batch: int, heads: int, kv_heads: int, T: int, head_dim: int, **options: Any
) -> int:
    """Bytes by which this rank's memory rose, at its peak, to make its random shards and attend.

    A function for `launch` to run on each rank (Linux only): `attn_ref.measure.peak_memory_here`
    of making this rank's ``(batch, heads, T / R, head_dim)`` queries and its keys and values, in
    float32, and running ``method``'s forward pass on them.

    Examples:
        >>> (peak,) = launch(working_set_on_rank, [("ring", 1, 1, 1, 2048, 128)])
        >>> peak > 4 * 2048 * 128 * 4  # Q, K, V and the output, float32: 4 MiB
        True
    """
    attention = _ATTENTION[_validate.one_of("method", method, METHODS)]
    rank, R = _rank_and_size(None)
    _validate.divides("world_size", R, "T", T, "each rank holds T / world_size tokens")

    def shards_and_attention() -> None:
        g = torch.Generator().manual_seed(rank)
        q = torch.randn(batch, heads, T // R, head_dim, generator=g)
        k, v = (torch.randn(batch, kv_heads, T // R, head_dim, generator=g) for _ in range(2))
        with torch.no_grad():
            attention(q, k, v, **options)

    if dist.is_initialized():
        dist.barrier()
    return peak_memory_here(shards_and_attention)

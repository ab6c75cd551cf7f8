"""attn_ref.context_parallel on real processes: ranks of a gloo process group on this machine.

Every method, on 2 and 4 ranks and in both layouts, gives the output and the gradients of causal
attention over the whole sequence: checked against float64 NumPy (tests/support/reference.py and
tests/support/backward_reference.py, independent of attn_ref), against PyTorch's
``scaled_dot_product_attention`` and against ``attn_ref.functional``, with entrywise bounds derived
from the arithmetic (tests/support/context_parallel_reference.py), never a threshold read off one run.
The tiles each rank computes are counted again from the causal mask; the bytes each rank sends are
checked against the formula and against what Linux counted the process writing; bad inputs, a rank
that fails and a collective that never completes give errors that say so. Each `launch` starts its
ranks from a fork server and a port the operating system picks, so workers of pytest-xdist do not
collide; each run takes a second or less once the server runs.
"""

from __future__ import annotations

import math
import operator
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist

from attn_ref.context_parallel import (
    LAYOUTS,
    METHODS,
    RankError,
    allgather_attention,
    bytes_sent_per_rank,
    chunk_ids,
    cost_on_rank,
    forward_backward,
    launch,
    num_chunks,
    ring_attention,
    shard,
    token_positions,
    ulysses_attention,
    unshard,
)
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.multihead import repeat_kv_heads
from tests.support.backward_reference import pytorch_gradients
from tests.support.context_parallel_reference import causal_attention_and_grads, merged_bounds, visible_tiles
from tests.support.float32_attention_bounds import assert_within
from tests.support.reference import as64

ATTENTION = {"ring": ring_attention, "allgather": allgather_attention, "ulysses": ulysses_attention}
B, H, H_KV, D = 1, 4, 2, 8  # grouped-query attention: two query heads per key/value head


def inputs(T: int, dtype: torch.dtype, seed: int = 0, heads: int = H, kv_heads: int = H_KV):
    """Random (query, key, value, d_out), ``(B, H, T, D)`` and ``(B, H_kv, T, D)``."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, heads, T, D, generator=g, dtype=dtype)
    k, v = (torch.randn(B, kv_heads, T, D, generator=g, dtype=dtype) for _ in range(2))
    d_out = torch.randn(B, heads, T, D, generator=g, dtype=dtype)
    return q, k, v, d_out


def run_on_ranks(method: str, world_size: int, layout: str, tensors):
    """(output, dQ, dK, dV) of the whole sequence from ``world_size`` ranks, and each rank's state."""
    per_rank = [[shard(x, layout, world_size, r) for x in tensors] for r in range(world_size)]
    results = launch(
        forward_backward, [(ATTENTION[method], *xs) for xs in per_rank], layout=layout, timeout=60
    )
    whole = [unshard([result[i] for result in results], layout) for i in range(4)]
    return whole, [result[4] for result in results]


def attn_ref_gradients(q, k, v, d_out):
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    keys, values = (repeat_kv_heads(x, q.shape[1]) for x in leaves[1:])
    out, _ = scaled_dot_product_attention(leaves[0], keys, values, is_causal=True)
    return (out.detach(), *torch.autograd.grad((out * d_out).sum(), leaves))


# --- layouts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_token_is_held_by_one_rank(layout, world_size):
    chunks = [c for r in range(world_size) for c in chunk_ids(layout, world_size, r)]
    assert sorted(chunks) == list(range(num_chunks(layout, world_size)))
    if layout == "zigzag":  # one early chunk and its mirror: chunk r and chunk 2R - 1 - r
        assert all(
            a + b == 2 * world_size - 1
            for a, b in (chunk_ids(layout, world_size, r) for r in range(world_size))
        )
    T = 4 * num_chunks(layout, world_size)
    positions = torch.cat([token_positions(T, layout, world_size, r) for r in range(world_size)])
    assert sorted(positions.tolist()) == list(range(T))
    x = torch.arange(T * 3.0).reshape(T, 3)
    parts = [shard(x, layout, world_size, r, dim=0) for r in range(world_size)]
    for r, part in enumerate(parts):
        assert torch.equal(part, x[token_positions(T, layout, world_size, r)])
    assert torch.equal(unshard(parts, layout, dim=0), x)


# --- one process -----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_process_is_causal_attention(method, dtype):
    """Without a process group, world_size 1: exact causal attention, forward and backward."""
    q, k, v, d_out = inputs(24, dtype, seed=1)
    out, dq, dk, dv, state = forward_backward(ATTENTION[method], q, k, v, d_out, block_size=5)
    exact = causal_attention_and_grads(q, k, v, d_out)
    bounds = merged_bounds(q, k, v, d_out, torch.finfo(dtype).eps, merges=2)
    for name, computed, expected, bound in zip(
        ["O", "dQ", "dK", "dV"], (out, dq, dk, dv), exact, bounds, strict=True
    ):
        assert_within(computed, expected, bound, f"{method}, {name}")
    assert state.world_size == 1 and state.bytes_sent == state.bytes_sent_backward == 0


# --- on processes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("world_size", [2, 4])
def test_ranks_give_single_process_attention(method, layout, world_size):
    """Output and gradients gathered from the ranks are causal attention over the whole sequence:
    within the bounds of float32 from the exact result, and within twice that of PyTorch's and of
    attn_ref.functional's (each within the bound itself)."""
    q, k, v, d_out = inputs(32, torch.float32, seed=world_size)
    computed, _ = run_on_ranks(method, world_size, layout, (q, k, v, d_out))
    exact = causal_attention_and_grads(q, k, v, d_out)
    bounds = merged_bounds(q, k, v, d_out, torch.finfo(torch.float32).eps, merges=2 * world_size)
    references = {
        "float64": exact,
        "PyTorch": pytorch_gradients(q, k, v, d_out, is_causal=True, enable_gqa=True),
    }
    references["attn_ref"] = attn_ref_gradients(q, k, v, d_out)
    for who, reference in references.items():
        factor = 1 if who == "float64" else 2
        for name, got, expected, bound in zip(
            ["O", "dQ", "dK", "dV"], computed, reference, bounds, strict=True
        ):
            assert_within(
                got, as64(expected), factor * bound, f"{method}, {layout}, R={world_size}, {name} vs {who}"
            )


def test_ring_in_float64_is_exact_to_float64_rounding():
    q, k, v, d_out = inputs(48, torch.float64, seed=7, heads=2, kv_heads=1)
    computed, states = run_on_ranks("ring", 4, "zigzag", (q, k, v, d_out))
    exact = causal_attention_and_grads(q, k, v, d_out)
    bounds = merged_bounds(q, k, v, d_out, torch.finfo(torch.float64).eps, merges=8)
    for name, got, expected, bound in zip(["O", "dQ", "dK", "dV"], computed, exact, bounds, strict=True):
        assert_within(got, expected, bound, name)
        assert (
            bound.max() < 1e-11
        )  # the bound is float64's: a wrong merge or a lost gradient is far beyond it
    assert [s.rank for s in states] == [0, 1, 2, 3]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_rank_computes_the_tiles_the_causal_mask_leaves_it(layout):
    """Counted from the causal mask over the positions each rank holds: contiguous ranks get more
    tiles the later their tokens; zigzag ranks all get the same, and together the same total."""
    R, T, block = 4, 64, 4
    tensors = inputs(T, torch.float32)[:3]
    per_rank = [[shard(x, layout, R, r) for x in tensors] for r in range(R)]
    costs = launch(cost_on_rank, [("ring", *xs) for xs in per_rank], layout=layout, block_size=block)
    n = T // num_chunks(layout, R)
    expected = []
    for r in range(R):  # each pair of chunks, tile by tile
        tiles = 0
        for a in chunk_ids(layout, R, r):
            for b in range(num_chunks(layout, R)):
                tiles += visible_tiles(np.arange(a * n, (a + 1) * n), np.arange(b * n, (b + 1) * n), block)
        expected.append(tiles)
    assert [c.tiles_computed for c in costs] == expected
    assert sum(expected) == visible_tiles(np.arange(T), np.arange(T), block)
    if layout == "zigzag":
        assert len(set(expected)) == 1
    else:
        assert expected == sorted(expected) and expected[0] < expected[-1]


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 2), (8, 1)])
def test_bytes_sent_are_the_formula_and_what_the_process_wrote(world_size, heads, kv_heads):
    """Counted bytes (what each pass handed to gloo) equal the formula, forward and backward; the
    bytes Linux counted each rank's process writing are those, plus gloo's message headers (a few
    hundred bytes per message, a few dozen messages at most). Ulysses gets a copy of a key/value
    head per rank when there are fewer of them than ranks."""
    T = 32
    q, k, v = inputs(T, torch.float32, heads=heads, kv_heads=kv_heads)[:3]
    for method in METHODS:
        per_rank = [[shard(x, "zigzag", world_size, r) for x in (q, k, v)] for r in range(world_size)]
        costs = launch(cost_on_rank, [(method, *xs) for xs in per_rank], backward=True)
        for backward in (False, True):
            formula = bytes_sent_per_rank(method, T, world_size, heads, kv_heads, D, backward=backward)
            for cost in costs:
                counted = cost.bytes_counted_backward if backward else cost.bytes_counted
                written = cost.bytes_written_backward if backward else cost.bytes_written
                assert counted == formula, (method, backward)
                if written is not None:
                    assert formula <= written <= formula + 16 * 1024, (method, backward)


def test_bytes_formula_refuses_what_ulysses_refuses():
    with pytest.raises(ValueError, match="world_size=4 must divide heads=2"):
        bytes_sent_per_rank("ulysses", 64, 4, 2, 2, 8)
    with pytest.raises(ValueError, match="Ulysses splits kv_heads=3 over world_size=2 ranks"):
        bytes_sent_per_rank("ulysses", 64, 2, 6, 3, 8)


def test_bytes_formula_by_hand():
    """One head of one rank's tokens is b = T / R * d * 4 bytes: the ring and the all-gather send
    2 (R - 1) H_kv b, Ulysses (R - 1) / R (2 H + 2 max(H_kv, R)) b."""
    T, R, d = 1024, 4, 64
    b = T // R * d * 4
    assert bytes_sent_per_rank("ring", T, R, 8, 2, d) == 2 * 3 * 2 * b
    assert bytes_sent_per_rank("allgather", T, R, 8, 2, d) == 2 * 3 * 2 * b
    assert bytes_sent_per_rank("ulysses", T, R, 8, 2, d) == 3 * (16 + 8) * b // 4  # 2 heads copied to 4
    assert bytes_sent_per_rank("ulysses", T, R, 8, 8, d) == 3 * (16 + 16) * b // 4
    assert bytes_sent_per_rank("ring", T, R, 8, 2, d, backward=True) == 2 * (3 + 4) * 2 * b
    assert bytes_sent_per_rank("ring", T, 1, 8, 2, d) == 0


# --- errors ----------------------------------------------------------------------------------------


def test_ulysses_runs_out_of_heads():
    q = torch.zeros(1, 2, 4, 8)  # H = 2 heads for 4 ranks
    with pytest.raises(
        RankError, match=r"world_size=4 must divide query's H=2 \(query has shape \(1, 2, 4, 8\)\)"
    ):
        launch(ulysses_attention, [(q, q, q)] * 4)
    q, kv = torch.zeros(1, 6, 4, 8), torch.zeros(1, 3, 4, 8)  # 3 key/value heads for 2 ranks
    with pytest.raises(RankError, match=r"key's H_kv=3 heads over world_size=2 ranks"):
        launch(ulysses_attention, [(q, kv, kv)] * 2)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((torch.zeros(4, 8),) * 3, ValueError, r"query has shape \(4, 8\), expected 4 dimensions"),
        ((torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 5, 8), torch.zeros(1, 2, 5, 8)), ValueError, r"key has shape \(1, 2, 5, 8\)"),
        ((torch.zeros(1, 3, 4, 8), torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 4, 8)), ValueError, r"key's H_kv=2 must divide query's H=3"),
        ((torch.zeros(1, 2, 5, 8),) * 3, ValueError, r"query has shape \(1, 2, 5, 8\): its T / R = 5 tokens must be a multiple of 2"),
        ((torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 4, 8, dtype=torch.float64), torch.zeros(1, 2, 4, 8)), TypeError, "must share a dtype"),
    ],
)  # fmt: skip
def test_bad_input_names_the_argument_and_its_shape(args, error, message):
    for attention in ATTENTION.values():
        with pytest.raises(error, match=message):
            attention(*args)
    with pytest.raises(ValueError, match="layout must be one of 'contiguous', 'zigzag', got 'striped'"):
        ring_attention(*(torch.zeros(1, 1, 4, 2),) * 3, layout="striped")
    with pytest.raises(ValueError, match=r"x.shape\[-2\]=6 must be a multiple of 4: the zigzag layout"):
        shard(torch.zeros(6, 2), "zigzag", 2, 0)


def test_a_rank_that_raises_is_named_and_the_others_stopped():
    with pytest.raises(
        RankError, match=r"rank 1 of 2 failed: ValueError: rank must be an int in \[0, 1\], got 5"
    ):
        launch(chunk_ids, [("zigzag", 2, 0), ("zigzag", 2, 5)])


def test_a_collective_that_one_rank_skips_times_out_with_its_name():
    """Rank 1 returns without joining rank 0's barrier: rank 0 waits for a message that never
    comes, and gloo's timeout turns the hang into an error."""
    with pytest.raises(RankError, match=r"rank 0 of 2 failed: .*Timed out waiting 1000ms for recv"):
        launch(operator.call, [(dist.barrier,), (int,)], timeout=1)


def test_launch_returns_each_ranks_result_in_order_with_keywords():
    assert launch(dist.get_world_size, [(), (), ()]) == [3, 3, 3]
    assert launch(math.prod, [((2, 3),), ((4,),)], start=10) == [60, 40]


def test_a_rank_that_never_returns_is_stopped_at_the_run_limit():
    started = time.monotonic()
    with pytest.raises(
        TimeoutError, match=r"rank 0 of 2 still running its function after 2.5 s; every rank stopped"
    ):
        launch(time.sleep, [(60,), (0,)], timeout=1)
    assert time.monotonic() - started < 30  # not the 60 s of the sleep

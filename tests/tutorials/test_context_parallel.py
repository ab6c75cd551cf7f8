"""The context-parallelism tutorial, as the build executed it, checked against references computed here.

What the ranks computed is checked against causal attention in float64 NumPy
(tests/support/context_parallel_reference.py), within bounds derived from the arithmetic; the tiles
and chunks each rank computed against counts made here from the causal mask; the bytes each rank
sent against the formula written out by hand; the pitfalls' symptoms against their own
recomputation. Times and memory were measured on the building machine: the claims the page makes of
them (the arithmetic follows the tiles, memory falls as T / R, the all-gather's does not) are
checked with margins wide enough for any machine, and the calls' wall times only for being printed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributed.constants import default_pg_timeout

from attn_ref.context_parallel import chunk_ids, num_chunks
from tests.support.backward_reference import reference_gradients
from tests.support.context_parallel_reference import (
    causal_attention_and_grads,
    merged_bounds,
    repeat_heads,
    visible_tiles,
)
from tests.support.reference import EPS32, EPS64, as64, attention, causal
from tests.support.shown import assert_printed, displayed, sci_rtol

METHODS = ("ring", "allgather", "ulysses")
LAYOUTS = ("contiguous", "zigzag")


def test_the_ring_picture_is_the_schedule_of_a_real_run(tutorial, values):
    """Rank r holds the block of rank (r - step) mod 4 at each step; contiguous, causal: it computes
    the block when that rank's tokens do not all come after its own, and skips it otherwise."""
    for r, pairs in enumerate(values["picture_pairs"]):
        expected = [(step, r, (r - step) % 4) for step in range(4) if (r - step) % 4 <= r]
        assert pairs == expected
    skipped = [(step, r) for r in range(4) for step in range(4) if (r - step) % 4 > r]
    assert values["skipped"] == skipped and len(skipped) == 6  # 3 + 2 + 1 + 0
    (figure,) = [d for d in displayed(tutorial, "image/svg+xml") if "ring attention on 4 ranks" in d]
    assert ", ".join(f"({s}, {r})" for s, r in skipped) in figure


def test_contiguous_shards_are_the_quarters(tutorial):
    assert_printed(tutorial, [[r, *range(4 * r, 4 * r + 4)] for r in range(4)])


def test_walk_through_merges_rank_2s_blocks_into_attention(tutorial, values):
    """Rank 2's merged output after its own block, rank 1's and rank 0's: attention over the keys read
    so far (float64, here), far from the answer until the last; then float32 rounding."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 16, 8, generator=g) for _ in range(3))
    for name, x in (("q16", q), ("k16", k), ("v16", v)):
        assert torch.equal(values[name], x)  # the walk-through's inputs, drawn again by the pitfalls
    exact = causal_attention_and_grads(q, k, v, torch.zeros_like(q))[0][..., 8:12, :]
    shown = []
    for step, first_key in ((0, 8), (1, 4)):  # keys first_key..11 read so far
        allowed = causal(16)[8:12, first_key:12]
        so_far = attention(
            as64(q)[..., 8:12, :], as64(k)[..., first_key:12, :], as64(v)[..., first_key:12, :], allowed
        )[0]
        shown += [step, 2 - step, np.abs(so_far - exact).max()]
    assert min(shown[2::3]) > 0.1  # "far from the answer"
    assert_printed(tutorial, shown, rtol=[0, 0, 2 * sci_rtol(1)] * 2, gaps=True)
    bound = merged_bounds(q, k, v, torch.zeros_like(q), EPS32, merges=3)[0][..., 8:12, :]
    final = np.abs(as64(values["q2"]) - as64(q[..., 8:12, :])).max()
    assert final == 0  # rank 2's queries
    assert_printed(tutorial, [3, 3], gaps=True)  # "step 3: block 3 skipped"
    printed_last = [line for line in tutorial.printed().splitlines() if line.startswith("step 2: block 0")]
    (line,) = printed_last
    assert float(line.rsplit(" ", 1)[1]) <= bound.max()


def _check_errors(rows, tensors):
    """Each printed largest error (O, dQ, dK, dV) is within twice the float64 bound: the ranks' result
    and each single-process reference are each within the bound of the exact result."""
    q, k, v, d_out = tensors
    bounds = merged_bounds(q, k, v, d_out, EPS64, merges=8)
    for errors in rows.values():
        assert len(errors) == 4
        for error, bound in zip(errors, bounds, strict=True):
            assert error <= 2 * bound.max()


def test_the_ranks_give_single_process_attention_in_float64(tutorial, values):
    tensors = [values[name] for name in ("q", "k", "v", "d_out")]
    assert tensors[0].dtype == torch.float64 and tensors[0].shape == (1, 4, 64, 16)
    runs = values["runs"]
    assert sorted(runs) == sorted((R, layout) for R in (2, 4) for layout in LAYOUTS)
    assert set(values["ring_errors"]) == {
        (R, layout, who) for R, layout in runs for who in ("PyTorch", "attn_ref")
    }
    _check_errors(values["ring_errors"], tensors)
    exact = causal_attention_and_grads(*tensors)
    bounds = merged_bounds(*tensors, EPS64, merges=8)
    for name, got, expected, bound in zip(
        ("out", "dq", "dk", "dv"), ("out", "dq", "dk", "dv"), exact, bounds, strict=True
    ):
        assert (np.abs(as64(values[got]) - expected) <= bound).all(), name  # the visible cell's run: R = 4
    for (R, _, _), errors in values["ring_errors"].items():
        assert_printed(tutorial, [R, *errors], rtol=[0] + [sci_rtol(0)] * 4, gaps=True)
    gqa = values["gqa"]
    assert gqa[1].shape[1] == 2 and gqa[0].shape[1] == 4  # 4 query heads share 2 key/value heads
    for method in ("allgather", "ulysses"):
        rows = values["collective_errors"][method]
        assert set(rows) == set(values["ring_errors"])
        _check_errors(rows, gqa)


def test_zigzag_gives_every_rank_the_same_chunks(tutorial, values):
    """Chunks of queries a against chunks of keys b <= a, by the rank holding a: contiguous ranks
    r + 1 of them; zigzag ranks 2R + 1, whatever r is."""
    for layout in LAYOUTS:
        chunks = num_chunks(layout, 4)
        counts = [sum(a + 1 for a in range(chunks) if a in chunk_ids(layout, 4, r)) for r in range(4)]
        assert values["counts"][layout] == counts
    assert values["counts"]["contiguous"] == [1, 2, 3, 4] and values["counts"]["zigzag"] == [9] * 4


def test_tiles_per_rank_are_those_the_causal_mask_leaves(tutorial, values):
    T, block = 4_096, 128
    for layout in LAYOUTS:
        n = T // num_chunks(layout, 4)
        expected = [
            sum(
                visible_tiles(np.arange(a * n, (a + 1) * n), np.arange(b * n, (b + 1) * n), block)
                for a in chunk_ids(layout, 4, r)
                for b in range(num_chunks(layout, 4))
            )
            for r in range(4)
        ]
        assert values["tiles_per_rank"][layout] == expected
    tiles = values["tiles_per_rank"]
    assert (
        sum(tiles["contiguous"]) == sum(tiles["zigzag"]) == visible_tiles(np.arange(T), np.arange(T), block)
    )
    assert len(set(tiles["zigzag"])) == 1 and tiles["contiguous"] == sorted(tiles["contiguous"])
    assert max(tiles["zigzag"]) < max(tiles["contiguous"])
    assert values["busiest"] == {layout: max(t) for layout, t in tiles.items()}
    # "Each rank's arithmetic time follows its tiles": CPU time of one thread, with wide margins
    contiguous = [c.compute_seconds for c in values["balance"]["contiguous"]]
    zigzag = [c.compute_seconds for c in values["balance"]["zigzag"]]
    assert contiguous[3] > 2 * contiguous[0]  # 228 tiles against 36
    assert max(zigzag) < 2 * min(zigzag)  # the same tiles on every rank
    for r in range(4):
        c, z = values["balance"]["contiguous"][r], values["balance"]["zigzag"][r]
        assert_printed(
            tutorial,
            [r, c.tiles_computed, z.tiles_computed, c.compute_seconds, z.compute_seconds],
            atol=[0, 0, 0, 0.006, 0.006],
        )


def test_two_ranks_time_their_arithmetic_and_their_calls(tutorial, values):
    walls = values["walls"]
    tiles = {layout: [c.tiles_computed for c in costs] for layout, costs in walls.items()}
    for layout in LAYOUTS:
        n_chunk = 8_192 // num_chunks(layout, 2)
        expected = [
            sum(
                visible_tiles(
                    np.arange(a * n_chunk, (a + 1) * n_chunk), np.arange(b * n_chunk, (b + 1) * n_chunk), 256
                )
                for a in chunk_ids(layout, 2, r)
                for b in range(num_chunks(layout, 2))
            )
            for r in range(2)
        ]
        assert tiles[layout] == expected
    arithmetic = {layout: [c.compute_seconds for c in costs] for layout, costs in walls.items()}
    assert (
        arithmetic["contiguous"][1] > 1.5 * arithmetic["contiguous"][0]
    )  # "most of the arithmetic": 392 tiles to 136
    assert max(arithmetic["zigzag"]) < 1.5 * min(arithmetic["zigzag"])  # "share it": 264 each
    for costs in walls.values():
        for r, c in enumerate(costs):
            assert_printed(
                tutorial, [r, c.tiles_computed, c.compute_seconds, c.wall_seconds], atol=[0, 0, 0.006, 0.006]
            )


def test_ulysses_refuses_more_ranks_than_heads(tutorial):
    printed = " ".join(tutorial.printed().split())  # the message is wrapped to the column
    assert "ValueError: ulysses_attention gives each rank H / world_size" in printed
    assert "world_size=4 must divide query's H=2 (query has shape (1, 2, 8, 16))" in printed


def _bytes_by_hand(method, T, R, H, H_kv, d=16, itemsize=4):
    """One head of one rank's tokens is b bytes; the ring passes R - 1 blocks of K and V; the all-gather
    sends its K and V to R - 1 ranks; Ulysses sends (R - 1) / R of Q, K, V (a copy of a key/value head
    per rank when there are fewer than ranks) and O."""
    b = T // R * d * itemsize
    if method in ("ring", "allgather"):
        return 2 * (R - 1) * H_kv * b
    return (R - 1) * (2 * H + 2 * max(H_kv, R)) * b // R


def test_bytes_sent_are_the_formula_plus_message_headers(tutorial, values):
    sent = values["sent"]
    assert len(sent) == 3 * len(values["configs"])
    for (T, R, H, H_kv, method), (measured, formula) in sent.items():
        assert formula == _bytes_by_hand(method, T, R, H, H_kv)
        assert formula <= measured <= formula + 16 * 1024
        assert_printed(
            tutorial, [T, R, H, H_kv, measured / 1024, formula / 1024], atol=[0, 0, 0, 0, 0.006, 0.006]
        )
    formula = {key: f for key, (_, f) in sent.items()}
    for method in METHODS:
        assert formula[1024, 2, 8, 8, method] == 2 * formula[512, 2, 8, 8, method]  # "doubling T doubles"
    for method in ("ring", "allgather"):  # 2 -> 4 ranks: up by half; a quarter with 2 key/value heads
        assert formula[1024, 4, 8, 8, method] == 1.5 * formula[1024, 2, 8, 8, method]
        assert formula[1024, 4, 8, 2, method] == formula[1024, 4, 8, 8, method] / 4
    assert formula[1024, 4, 8, 8, "ulysses"] < formula[1024, 2, 8, 8, "ulysses"]
    for method in METHODS:  # "halving the heads halves every method's bytes"
        assert formula[1024, 4, 4, 4, method] == formula[1024, 4, 8, 8, method] / 2
    assert formula[1024, 4, 8, 2, "ulysses"] > formula[1024, 4, 8, 2, "ring"]  # still the queries and outputs


def test_the_formula_plot_says_where_ulysses_sends_less(tutorial, values):
    for H_kv in (8, 2):
        fewer = [
            R
            for R in values["R_axis"]
            if _bytes_by_hand("ulysses", 2**16, R, 64, H_kv, 128)
            < _bytes_by_hand("ring", 2**16, R, 64, H_kv, 128)
        ]
        assert values["fewer"][H_kv] == fewer
    assert values["fewer"][8] and len(values["fewer"][2]) < len(values["fewer"][8])  # "needs more of them"


def test_memory_falls_as_t_over_r_except_the_all_gathers(tutorial, values):
    """Each rank's peak rise of resident memory, measured: for the ring and Ulysses, every tensor is
    a shard, so it halves when R doubles once the blocks in transit stop growing (4 to 8 ranks); the
    all-gather keeps the whole sequence's keys and values. Margins: shards of 1 MiB and more against
    Python's arenas of up to 1 MiB (attn_ref.measure)."""
    held, shard = values["held"], values["shard_mib"]
    R_mem = values["R_mem"]
    assert R_mem == (1, 2, 4, 8)
    whole = values["T_mem"] * values["H_mem"] * values["d_mem"] * 4 / 2**20
    assert shard == {R: whole / R for R in R_mem}
    for method in ("ring", "ulysses"):
        assert held[method, 1] > held[method, 2] > held[method, 4] > held[method, 8]
        assert 0.35 < held[method, 8] / held[method, 4] < 0.65  # halves
    shards = {R: held["ring", R] / shard[R] for R in R_mem}
    assert shards[2] < shards[4] and abs(shards[8] - shards[4]) < 2.5  # one block in transit, then two
    assert shards[8] > 6  # Liu et al.'s six blocks, and a few more here
    gathered = 2 * whole  # K and V of the whole sequence
    for R in (2, 4, 8):
        assert held["allgather", R] > gathered + 2 * shard[R]  # and its own queries and output
    assert held["allgather", 8] > 1.5 * held["ring", 8]
    assert held["allgather", 8] / held["allgather", 4] > 0.65  # falls more slowly, to a floor
    for R in R_mem:
        assert_printed(tutorial, [R, shard[R], *(held[m, R] for m in METHODS)], atol=0.006)


def test_pitfalls_show_their_symptoms(tutorial, values):
    q, k, v = (values[name] for name in ("q16", "k16", "v16"))
    exact = causal_attention_and_grads(q, k, v, torch.zeros_like(q))[0]
    rank_two = exact[..., 8:12, :]
    parts = []
    for b in (0, 1, 2):  # rank 2's partial outputs, in float64
        allowed = causal(16)[8:12, 4 * b : 4 * b + 4]
        parts.append(
            attention(
                as64(q)[..., 8:12, :],
                as64(k)[..., 4 * b : 4 * b + 4, :],
                as64(v)[..., 4 * b : 4 * b + 4, :],
                allowed,
            )[0]
        )
    average_gap = np.abs(np.mean(parts, axis=0) - rank_two).max()
    assert values["merge_gaps"]["average"] == pytest.approx(average_gap, rel=1e-5, abs=1e-6)
    bound = merged_bounds(q, k, v, torch.zeros_like(q), EPS32, merges=3)[0]
    assert values["merge_gaps"]["log-sum-exp"] <= bound[..., 8:12, :].max()
    # 2: by local index, rank 0's early chunk is right and its late chunk wrong
    local, by_position = as64(values["local_gap"]), values["position_gap"]
    order = np.concatenate([np.arange(2 * c, 2 * c + 2) for r in range(4) for c in chunk_ids("zigzag", 4, r)])
    assert order[:4].tolist() == [0, 1, 14, 15]
    wrong_rows = attention(
        as64(q)[..., [14, 15], :],
        as64(k)[..., order, :],
        as64(v)[..., order, :],
        np.tri(4, 16, k=0, dtype=bool)[2:],
    )[0]
    assert (local[:2] == 0).all() and np.allclose(
        local[2:], np.abs(wrong_rows - exact[..., [14, 15], :]).max(axis=(0, 1, 3)), rtol=1e-5
    )
    assert (local[2:] > 0.1).all() and by_position <= bound[..., order[:4], :].max()
    # 3: rank 0's keys with only rank 0's queries' share of their gradient
    q64, k64, v64 = (as64(x) for x in (q, k, v))
    d_out = np.ones((1, 1, 16, 8))
    full = reference_gradients(q64, k64, v64, d_out, allowed=causal(16))[1]
    own = reference_gradients(q64[..., :4, :], k64, v64, d_out[..., :4, :], allowed=causal(16)[:4])[1]
    assert values["kept_gap"] == pytest.approx(np.abs(own - full)[..., :4, :].max(), rel=1e-4, abs=1e-5)
    assert values["size"] == pytest.approx(np.abs(full[..., :4, :]).max(), rel=1e-4)
    # 4: the rank that waited, with gloo's message, and PyTorch's default timeout for gloo
    assert f"the default timeout: {default_pg_timeout}" in tutorial.printed()
    assert values["hang_message"].startswith("rank 0 of 2 failed: RuntimeError: ")
    assert "Timed out waiting 1000ms for recv operation to complete" in values["hang_message"]


def test_exercise_solutions(tutorial, values):
    assert_printed(tutorial, [2 * 8 + 1] * 8)  # zigzag: 2R + 1 pairs on every rank
    assert_printed(tutorial, list(range(1, 9)))  # contiguous: r + 1
    for R in (8, 16):
        ring, ulysses = (
            _bytes_by_hand(m, 131_072, R, 64, 8, 128, itemsize=2) / 2**20 for m in ("ring", "ulysses")
        )
        assert_printed(tutorial, [R, ring, ulysses], atol=0.06)
    assert _bytes_by_hand("ring", 131_072, 8, 64, 8, 128) < _bytes_by_hand("ulysses", 131_072, 8, 64, 8, 128)
    assert _bytes_by_hand("ring", 131_072, 16, 64, 8, 128) > _bytes_by_hand(
        "ulysses", 131_072, 16, 64, 8, 128
    )
    q8, k2, v2 = (values[name] for name in ("q8", "k2", "v2"))
    exact = attention(as64(q8), repeat_heads(as64(k2), 8), repeat_heads(as64(v2), 8), causal(32))[0]
    bound = merged_bounds(q8, k2, v2, torch.zeros_like(q8), EPS32, merges=8)[0]
    assert (np.abs(as64(values["out8"]) - exact) <= bound).all()
    assert values["outputs"][0][1].bytes_sent == _bytes_by_hand("ulysses", 32, 4, 8, 2) == 9216
    whole = 512 * 16 * 256 * 4 / 2**20
    for R, transit in ((2, 1), (4, 2), (8, 2)):
        assert_printed(tutorial, [R, 2 * whole, 2 * whole / R * (1 + transit)], atol=0.06)
    assert math.isclose(whole, 8.0)

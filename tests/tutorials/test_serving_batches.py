"""The serving tutorial (batches), as the build executed it, against references computed here.

Every request's tokens are checked against greedy decoding written out as a loop of full forward
passes (no cache, no attn_ref attention); the chunked prefill against one forward pass; the
memory figures against a schedule recomputed by hand from the stream's arrivals and lengths; the
blocks saved by sharing against a count from the prefix's length.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from attn_ref.plotting import PLOT_MIME
from tests.support.drawings import texts
from tests.support.reference import causal
from tests.support.serving_reference import greedy
from tests.support.shown import assert_printed, displayed, half_unit, sci_rtol, verdicts

# Each request decoded once per test session, however many tests ask
kept_greedy = functools.cache(greedy)


@torch.no_grad()
def chunked(model, prompt, chunk, lower_right):
    """The prompt in chunks, each attending to the keys so far with PyTorch's SDPA and a NumPy mask."""
    keys, values, logits = [[] for _ in model.blocks], [[] for _ in model.blocks], []
    for start in range(0, prompt.shape[1], chunk):
        piece = prompt[:, start : start + chunk]
        L, S = piece.shape[1], start + piece.shape[1]
        allowed = torch.tensor(causal(L, S, lower_right=lower_right))
        x = model.token_embedding(piece) + model.position_embedding(torch.arange(start, S))
        for layer, block in enumerate(model.blocks):
            a, h = block.attn, block.norm1(x)
            q, k, v = (
                p(h).view(1, L, -1, a.head_dim).transpose(1, 2) for p in (a.q_proj, a.k_proj, a.v_proj)
            )
            keys[layer].append(k)
            values[layer].append(v)
            k, v = torch.cat(keys[layer], dim=2), torch.cat(values[layer], dim=2)
            heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
            x = x + a.out_proj(heads.transpose(1, 2).reshape(1, L, -1))
            x = x + block.mlp(block.norm2(x))
        logits.append(model.head(model.norm(x)))
    return torch.cat(logits, dim=1)


def test_every_engine_gives_each_request_its_own_tokens(values):
    model, batch = values["model"], values["batch"]
    expected = [kept_greedy(model, r)[0] for r in batch]
    assert [t.tolist() for t in values["expected"]] == expected
    for name in ("padded", "packed"):
        assert [t.tolist() for t in values[name]] == expected, name
    assert [values["paged"].tokens[i].tolist() for i in range(len(batch))] == expected
    assert values["logit_gap"].item() < 1e-5  # float rounding of the same sums


def test_chunked_prefill_needs_the_bottom_right_mask(tutorial, values):
    assert_printed(tutorial, causal(8, 16, lower_right=True).astype(int))
    model, prompt = values["model"], values["prompt"]
    with torch.no_grad():
        one_pass = model(prompt)
    assert torch.allclose(values["one_pass"], one_pass)
    gaps = values["chunk_gaps"]  # exercise 1: chunks of 1, 3, 7, 20, bottom-right
    assert set(gaps) == {1, 3, 7, 20} and max(gaps.values()) < 1e-5
    right = (chunked(model, prompt, 8, lower_right=True) - one_pass).abs().max().item()
    wrong = (chunked(model, prompt, 8, lower_right=False) - one_pass).abs().max().item()
    assert right < 1e-5 and wrong > 0.05
    # what the tutorial computed and printed: float rounding one way, far off the other
    kept = {corner: gap.item() for corner, gap in values["corner_gaps"].items()}
    assert kept[True] < 1e-5 and kept[False] > 0.05
    assert_printed(tutorial, [kept[True]], rtol=sci_rtol(1))
    assert_printed(tutorial, [kept[False]], rtol=sci_rtol(1))


def test_padding_costs_positions_that_packing_does_not(tutorial, values):
    batch = values["batch"]
    steps = max(r.max_new_tokens for r in batch)
    computed = len(batch) * (max(len(r.prompt) for r in batch) + steps - 1)
    useful = sum(len(r.prompt) + r.max_new_tokens - 1 for r in batch)
    assert (values["computed"], values["useful"]) == (computed, useful) and computed > useful
    assert_printed(tutorial, [computed, useful])
    seq = np.repeat(np.arange(3), [3, 2, 4])
    pos = np.concatenate([np.arange(n) for n in (3, 2, 4)])
    mask = (seq[:, None] == seq[None, :]) & (pos[None, :] <= pos[:, None])
    np.testing.assert_array_equal(values["doc_mask"].numpy(), mask)  # the picture's document mask


def test_block_tables_and_free_list(tutorial, values):
    pool = values["pool"]
    # By hand: blocks are handed out 0, 1, 2, ...; a requests 6 (2 blocks), b 3 (1), a grows to 9
    # (a third block); b's block returns to the free list and is the first c gets; d shares c's
    # first block (its 4 positions are the shared prompt) and takes the next free block for its own.
    tables = {"a": [0, 1, 3], "c": [2, 4], "d": [2, 5]}
    assert pool.tables == tables and pool.free == [7, 6]
    assert pool.ref_counts == [1, 1, 2, 1, 1, 1, 0, 0]
    assert_printed(tutorial, [0, 1, 3, 2, 4, 2, 5, 7, 6])
    assert_printed(tutorial, [1, 1, 2, 1, 1, 1, 0, 0])
    assert_printed(tutorial, [6, 1, 2], gaps=True)  # position 6 of a: block table[6 // 4] = 1, slot 2
    assert_printed(tutorial, [2 * 2 * 4 * 4 * 8 * 4])  # K and V, 2 layers, H_kv 4, 4 slots, d_k 8, float32


def test_the_opening_picture_is_the_pool(tutorial):
    """The picture draws the pool above, by hand: each block's id and users, the owners written in
    the blocks they own (6 and 7 free, unnamed), then each block table and its request's length.
    Read from the words drawn in the light SVG, in the order they are drawn."""
    (first, *_) = displayed(tutorial, PLOT_MIME)
    words = texts(first[: first.index("</svg>")])
    users = [1, 1, 2, 1, 1, 1, 0, 0]
    assert words[:16] == [str(n) for b in range(8) for n in (b, users[b])]
    assert words[16:21] == ["block", "pool", "users", "block", "tables"]
    assert words[21:27] == ["a", "a", "c+d", "a", "c", "d"]
    assert words[27:] == [
        "0",
        "1",
        "3",
        "a: 9 positions",
        "2",
        "4",
        "c: 5 positions",
        "2",
        "5",
        "d: 7 positions",
    ]
    assert "blocks [6, 7] are free" in first and "block 2 is shared by c and d" in first


def test_memory_waste_against_a_schedule_recomputed_by_hand(tutorial, values):
    stream, model = values["stream"], values["model"]
    # With a pool that never turns a request away, request i runs from its arrival a for
    # max_new_tokens steps, holding len(prompt) + (s - a) positions at step s.
    last = max(r.arrival + r.max_new_tokens for r in stream)
    schedule = [
        {
            i: len(r.prompt) + s - r.arrival
            for i, r in enumerate(stream)
            if 0 <= s - r.arrival < r.max_new_tokens
        }
        for s in range(last)
    ]
    schedule = [held for held in schedule if held]  # steps where nothing runs are not logged
    assert values["lengths_log"] == schedule
    stored = sum(sum(h.values()) for h in schedule)
    held = {
        "reserve the context": sum(model.context_length * len(h) for h in schedule),
        "reserve own maximum": sum(
            len(stream[i].prompt) + stream[i].max_new_tokens - 1 for h in schedule for i in h
        ),
    }
    for block in (4, 8, 16):
        held[f"paged, blocks of {block:>2}"] = sum(
            -(-n // block) * block for h in schedule for n in h.values()
        )
    waste = {policy: 1 - stored / slots for policy, slots in held.items()}
    assert values["waste"] == waste
    assert waste["reserve the context"] > 0.5 > waste["reserve own maximum"]  # "most", then less
    assert waste["paged, blocks of  4"] < waste["paged, blocks of  8"] < waste["paged, blocks of 16"]
    assert waste["paged, blocks of 16"] < waste["reserve own maximum"]
    for policy in waste:
        assert_printed(tutorial, [held[policy], 100 * waste[policy]], atol=[0, half_unit(1)])
    expected = [kept_greedy(model, r)[0] for r in stream]
    assert [t.tolist() for t in values["stream_alone"]] == expected
    assert [values["streamed"].tokens[i].tolist() for i in range(len(stream))] == expected


def test_a_shared_prefix_saves_its_full_blocks(tutorial, values):
    runs, shared_stream, model = values["runs"], values["shared_stream"], values["model"]
    for run in runs.values():
        assert [run.tokens[i].tolist() for i in range(6)] == [kept_greedy(model, r)[0] for r in shared_stream]
    # By hand, without sharing: request 0 arrives at step 0, the others at step 1; all hold
    # 8 new tokens, so at step 7 all six run, each holding its prompt + 7 - arrival positions.
    at_step_7 = [len(r.prompt) + 7 - r.arrival for r in shared_stream]
    peak = sum(-(-n // 4) for n in at_step_7)
    assert values["peak_blocks"][0] == peak
    # With sharing, each of the five later requests keeps sharing the prefix's 7 full blocks.
    assert values["saved"] == peak - values["peak_blocks"][30] == 5 * (30 // 4)
    assert_printed(tutorial, [peak, peak - 35, 35, 7, 35], gaps=True)


def test_continuous_batching(tutorial, values):
    stream, schedules, model = values["stream"], values["schedules"], values["model"]
    expected = [t.tolist() for t in values["stream_alone"]]
    for run in (*schedules.values(), values["tight"]):
        assert [run.tokens[i].tolist() for i in range(len(stream))] == expected
    continuous, static = schedules[False], schedules[True]
    for run, pool in ((continuous, 48), (static, 48), (values["tight"], 24)):
        assert max(s["blocks"] for s in run.steps) <= pool
    # static: a request is admitted only into an empty batch
    for before, after in zip(static.steps, static.steps[1:], strict=False):
        assert not after["admitted"] or not set(before["running"]) - set(before["finished"])
    # in both modes the blocks in use are those of the requests running (blocks of 4, no sharing):
    # a request that finished holds none, even while its static batch drains
    for run in (continuous, static):
        for step in run.steps:
            assert step["blocks"] == sum(-(-n // 4) for n in step["lengths"].values())
            assert set(step["lengths"]) == set(step["running"])
    mean_wait = [
        np.mean([run.finished_at[i] - r.arrival for i, r in enumerate(stream)])
        for run in (continuous, static)
    ]
    mean_blocks = [np.mean([s["blocks"] for s in run.steps]) for run in (continuous, static)]
    mean_running = [np.mean([len(s["running"]) for s in run.steps]) for run in (continuous, static)]
    assert len(continuous.steps) < len(static.steps) and mean_wait[0] < mean_wait[1]
    assert mean_blocks[1] < mean_blocks[0]  # "the freed blocks sit unused"
    for k, run in enumerate((continuous, static)):
        preempted = sum(len(s["preempted"]) for s in run.steps)
        assert_printed(
            tutorial,
            [len(run.steps), mean_running[k], mean_blocks[k], mean_wait[k], preempted],
            atol=[0, half_unit(1), half_unit(1), half_unit(1), 0],
        )
    assert model.context_length == 96


def test_batching_moves_the_logits_far_less_than_the_gap_between_the_best_two(tutorial, values):
    """The Going deeper block's two numbers, recomputed from greedy decoding written out here: on
    the page's requests the layouts move the logits by float rounding, and the smallest gap between
    the two best logits is larger, so no token changes (which the other tests check directly)."""
    model = values["model"]
    runs = [
        (values["batch"], values["paged"]),
        (values["stream"], values["streamed"]),
        (values["stream"], values["schedules"][False]),
    ]
    moved, margin = 0.0, float("inf")
    for requests, run in runs:
        for i, r in enumerate(requests):
            _, logits = kept_greedy(model, r)
            moved = max(moved, (run.logits[i] - logits).abs().max().item())
            top2 = logits.topk(2, dim=-1).values
            margin = min(margin, (top2[:, 0] - top2[:, 1]).min().item())
    assert moved < 1e-5 and 10 * moved < margin
    # what the page computed from its own decoding alone: the same up to float32 rounding
    assert values["moved"] < 1e-5 and abs(values["margin"] - margin) < 1e-5
    assert_printed(tutorial, [values["moved"]], rtol=sci_rtol(1))
    assert_printed(tutorial, [values["margin"]], rtol=sci_rtol(1))


def test_exercises(tutorial, values):
    final = [len(r.prompt) + r.max_new_tokens - 1 for r in values["stream"]]
    blocks = [-(-n // 16) for n in final]
    assert values["blocks_16"] == blocks
    assert_printed(tutorial, blocks)
    assert_printed(tutorial, [sum(16 * b for b in blocks) - sum(final), 16 * sum(blocks)])


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial):
    """The True/False the page prints, in order, are what the tests above establish."""
    per_request = [True] * 4 * 3  # padded, packed, paged
    alone = [True] * 3  # the stream, the shared prompt, continuous batching
    pitfall = [True, False]  # the child's keys overwritten: by the mistake, not by release
    assert verdicts(tutorial) == per_request + alone + pitfall + [True]  # exercise 4


def test_giving_back_shared_blocks_lets_a_new_request_overwrite_them(tutorial, values):
    """By hand: a pool of 4 hands out blocks from the end of its free list [3, 2, 1, 0]. The
    parent's 8 positions take blocks 0 and 1, and the child shares both. The mistake appends them
    to the free list, [3, 2, 0, 1], so the new request takes 1, then 0: the child's. release keeps
    them (the child still uses them), so the new request takes 2, then 3."""
    from attn_ref.serving import PagedKVCache

    for wrong in (True, False):
        pool = PagedKVCache(num_layers=1, num_blocks=4, block_size=4, num_kv_heads=1, head_dim=1)
        pool.reserve("parent", 8)
        pool.fork("parent", "child")
        if wrong:
            pool.free.extend(pool.tables.pop("parent"))
        else:
            pool.release("parent")
        pool.reserve("new", 8)
        assert pool.tables["new"] == ([1, 0] if wrong else [2, 3])
        assert pool.tables["child"] == [0, 1]
    assert verdicts(tutorial)[-3:-1] == [True, False]  # as printed, before exercise 4's verdict


def test_exercise_a_request_too_long_for_the_pool(tutorial, values):
    from attn_ref.serving import PagedKVCache, Request, serve

    pool = values["tiny_pool"]
    assert (pool.num_blocks, pool.block_size) == (4, 4) and not pool.tables
    # By hand: a prompt of 12 and 8 new tokens hold 12 + 8 - 1 = 19 positions (the last token
    # generated is never fed back), more than 4 blocks of 4 = 16.
    assert_printed(tutorial, [0, 19, 4, 4, 16])
    with pytest.raises(ValueError, match="19 positions"):
        fresh = PagedKVCache(pool.num_layers, 4, 4, pool.num_kv_heads, pool.head_dim)
        serve(values["model"], [Request(tuple(range(12)), 8)], fresh)

"""The serving tutorial (batches), as the build executed it, against references computed here.

Every request's tokens are checked against greedy decoding written out as a loop of full forward
passes (no cache, no attn_ref attention); the chunked prefill against one forward pass; the
memory figures against a schedule recomputed by hand from the stream's arrivals and lengths; the
blocks saved by sharing against a count from the prefix's length.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.reference import causal
from tests.support.shown import assert_printed, half_unit, sci_rtol, verdicts


@torch.no_grad()
def greedy(model, request) -> list[int]:
    tokens = list(request.prompt)
    for _ in range(request.max_new_tokens):
        tokens.append(int(model(torch.tensor([tokens]))[0, -1].argmax()))
    return tokens[len(request.prompt) :]


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
    expected = [greedy(model, r) for r in batch]
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
    assert_printed(tutorial, mask.astype(int))


def test_block_tables_and_free_list(tutorial, values):
    pool = values["pool"]
    # By hand: blocks are handed out 0, 1, 2, ...; a requests 6 (2 blocks), b 3 (1), a grows to 9
    # (a third block); b's block returns to the free list and is the first c gets.
    assert pool.tables == {"a": [0, 1, 3], "c": [2, 4]} and pool.free == [7, 6, 5]
    assert pool.block_nbytes == 2 * 2 * 4 * 4 * 8 * 4  # K and V, 2 layers, H_kv 4, 4 slots, d_k 8, float32
    assert_printed(tutorial, [pool.block_nbytes])


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
    expected = [greedy(model, r) for r in stream]
    assert [t.tolist() for t in values["stream_alone"]] == expected
    assert [values["streamed"].tokens[i].tolist() for i in range(len(stream))] == expected


def test_a_shared_prefix_saves_its_full_blocks(tutorial, values):
    runs, shared_stream, model = values["runs"], values["shared_stream"], values["model"]
    for run in runs.values():
        assert [run.tokens[i].tolist() for i in range(6)] == [greedy(model, r) for r in shared_stream]
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
    mean_wait = [
        np.mean([run.finished_at[i] - r.arrival for i, r in enumerate(stream)])
        for run in (continuous, static)
    ]
    assert len(continuous.steps) < len(static.steps) and mean_wait[0] < mean_wait[1]
    assert_printed(tutorial, [len(continuous.steps), mean_wait[0]], atol=[0, half_unit(1)], gaps=True)
    assert_printed(tutorial, [len(static.steps), mean_wait[1]], atol=[0, half_unit(1)], gaps=True)
    assert model.context_length == 96


def test_exercises(tutorial, values):
    final = [len(r.prompt) + r.max_new_tokens - 1 for r in values["stream"]]
    blocks = [-(-n // 16) for n in final]
    assert values["blocks_16"] == blocks
    assert_printed(tutorial, blocks)
    assert_printed(tutorial, [sum(16 * b for b in blocks) - sum(final), 16 * sum(blocks)])


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial):
    """The True/False the page prints, in order, are what the tests above establish."""
    assert verdicts(tutorial) == [True] * 4 + [True] * 4 + [True] * 4 + [True] * 4  # per request, then all


def test_a_released_request_gives_back_only_the_blocks_no_one_shares(tutorial, values):
    demo = values["demo"]
    # By hand: a pool of 4 hands out blocks 0, 1, ... from the end of its free list [3, 2, 1, 0];
    # the parent's 6 positions take blocks 0 and 1, the child shares both, the parent leaves.
    assert demo.tables == {"child": [0, 1]} and demo.free == [3, 2]
    assert [demo.ref_counts[b] for b in (0, 1)] == [1, 1]
    assert sorted(demo.free + demo.tables["child"]) == list(range(demo.num_blocks))
    assert_printed(tutorial, [3, 2, 0, 1])
    assert_printed(tutorial, [1, 1])


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

"""The prefix-caching tutorial, as the build executed it, against references computed here.

The picture's tree and the eviction it shows against the steps worked out by hand; the two indexes
against a brute-force search of the stored prompts; the served tokens against greedy decoding written
out here in float64; "the same bits with and without the cache" outright (it holds by construction with
the batch-invariant engine); the traces' numbers against what their runs kept, and the pitfall of the
counter that never counts against LRU, bit for bit (it is LRU); the shared-prefix attention against
float64 attention within float32 rounding; the byte counts against their formula.
"""

from __future__ import annotations

import copy
import functools

import torch

from attn_ref.plotting import PLOT_MIME
from attn_ref.training import ALPHABET
from tests.support.drawings import texts
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.shown import assert_printed, displayed, half_unit, sci_rtol, verdicts


def test_the_keys_of_a_shared_prefix_are_the_same_bits(values):
    first, second = values["first"], values["second"]
    assert len(first) == len(second) == 2  # one (1, H_kv, T, d_k) per layer
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a[:, :, :24], b[:, :, :24])  # by construction: causal, row by row, fixed order
    assert values["shared"] == [True, True]


def test_the_picture_is_the_tree_worked_out_by_hand(tutorial, values):
    """Blocks of 4. "You are kind. Hi!" takes blocks 0-4 and leaves 0-3 in a single node (its fifth
    block, "!", is partial and goes back to the free list, first in line). "You are kind. Why?" finds
    0-2, splitting the node after "kind"; it writes ". Wh" and "y?" in blocks 4 and 5 and stores block 4.
    "You are terse. Go" finds 0-1, splitting again; it writes blocks 6-8 and stores 6 and 7. Request 1
    still runs: it holds 0, 1, 2, 4, 5. Hits: "You are " was stored once and found twice, "kind" found
    once, the leaves stored once."""
    printed = tutorial.printed()
    for line in (
        "'You are '       blocks [0, 1], hits 3",
        "'terse. G'       blocks [6, 7], hits 1",
        "'kind'           blocks [2], hits 2",
        "'. Wh'           blocks [4], hits 1",
        "'. Hi'           blocks [3], hits 1",
    ):
        assert line in printed
    users = [2, 2, 2, 1, 2, 1, 1, 1, 0, 0, 0, 0]
    assert values["users"] == users
    (picture, *_) = displayed(tutorial, PLOT_MIME)
    assert ", ".join(f"block {b}: {n}" for b, n in enumerate(users)) in picture
    for b in (0, 1, 2, 3, 4, 6, 7):
        assert f"block {b}" in texts(picture)  # each cached block named under its cell
    assert "'You are kind. Bye' finds blocks [0, 1, 2]" in printed


def test_eviction_leaves_what_the_running_request_reads(tutorial, values):
    """By hand: the leaves no request reads are "terse. G" (2 blocks) and ". Hi" (1); ". Wh" is read by
    request 1, "kind" leads to it, "You are " to both. Giving back 12 blocks frees those 3, and the pool
    then has the 4 it had free (8-11) plus 3, 6, 7."""
    printed = tutorial.printed()
    assert "evictable now: ['terse. G', '. Hi']" in printed
    assert "blocks given back: 3 of 12 asked" in printed
    assert "still cached: ['You are ', 'kind', '. Wh'] - free blocks: 7" in printed
    assert values["pic_pool"].num_free == 7 and set(values["pic_pool"].free) == {3, 6, 7, 8, 9, 10, 11}


def brute_force_blocks(stored, tokens, block_size=4):
    """Whole blocks of ``tokens`` that some stored prompt starts with, found by trying every prompt."""
    best = 0
    for s in stored:
        n = 0
        while (n + 1) * block_size <= min(len(s), len(tokens)) and s[: (n + 1) * block_size] == tokens[
            : (n + 1) * block_size
        ]:
            n += 1
        best = max(best, n)
    return best


def test_the_tree_and_the_table_find_what_a_brute_force_search_finds(tutorial, values):
    stored, lookups = values["stored"], values["lookups"]
    distinct = {tuple(s[: 4 * (i + 1)]) for s in stored for i in range(len(s) // 4)}
    assert values["tree"].num_blocks == values["table"].num_blocks == len(distinct)
    assert_printed(tutorial, [len(distinct), len(distinct)])
    for p in lookups:
        expected = brute_force_blocks(stored, p[:-1])
        assert len(values["tree"].match(p[:-1], record=False)) == expected
        assert len(values["table"].match(p[:-1], record=False)) == expected
    assert values["same"] is True


@functools.cache
def greedy64(model, prompt, new):
    """Greedy decoding by full forward passes of the model in float64: the new tokens, and for each step
    the gap between its best two logits."""
    model64 = copy.deepcopy(model).double()
    tokens, gaps = list(prompt), []
    with torch.no_grad():
        for _ in range(new):
            last = model64(torch.tensor([tokens]))[0, -1]
            top = last.topk(2).values
            gaps.append((top[0] - top[1]).item())
            tokens.append(int(last.argmax()))
    return tokens[len(prompt) :], gaps


def test_serving_with_the_cache_gives_the_same_bits_and_the_models_tokens(tutorial, values):
    stream, cached, without = values["stream"], values["with_cache"], values["without"]
    assert values["same_bits"] is True  # by construction; recomputed from what was kept:
    for i, r in enumerate(stream):
        assert torch.equal(cached.logits[i], without.logits[i])
        hit = cached.cached[i]
        assert hit % 4 == 0 and hit <= len(r.prompt) - 1  # whole blocks, the last token fed
    assert cached.cached[0] == 0  # nothing was cached before the first request
    prompt_tokens = sum(len(r.prompt) for r in stream)
    saved = sum(cached.cached.values())
    assert_printed(tutorial, [prompt_tokens, saved, 100 * saved / prompt_tokens], atol=[0, 0, half_unit(0)])
    # the engine computes the model: its tokens are greedy decoding's, where no two logits are close to a tie
    model = values["model"]
    for i, r in enumerate(stream):
        tokens, gaps = greedy64(model, r.prompt, r.max_new_tokens)
        for step, (ours, theirs) in enumerate(zip(without.tokens[i].tolist(), tokens, strict=True)):
            if gaps[step] < 1e-4:
                break  # a near-tie: float32 may choose either; the rest of the text may differ
            assert ours == theirs


def test_the_plain_model_moves_the_logits_by_rounding(tutorial, values):
    stream, cached, plain = values["stream"], values["plain_cached"], values["plain"]
    moved = max((cached.logits[i] - plain.logits[i]).abs().max().item() for i in range(len(stream)))
    assert moved == values["moved"] < 1e-4  # rounding of the same sums, in another order
    assert_printed(tutorial, [moved], rtol=sci_rtol(1))
    same = all(torch.equal(cached.tokens[i], plain.tokens[i]) for i in range(len(stream)))
    assert same == values["same_tokens"]


def test_the_traces_numbers_and_the_counter_that_never_counts(tutorial, values):
    results, traces = values["results"], values["traces"]
    rows = []
    for (trace, _setup), r in results.items():
        assert r["prompt"] == sum(len(q.prompt) for q in traces[trace])
        assert r["hit rate"] == r["saved"] / r["prompt"] and 0 <= r["saved"] < r["prompt"]
        assert max(r["running"]) <= 128 and all(
            a + b <= 128 for a, b in zip(r["running"], r["cache only"], strict=True)
        )
        rows.append([100 * r["hit rate"], r["saved"], r["prompt"], max(r["running"]), 128])
    assert_printed(tutorial, rows, atol=[half_unit(1), 0, 0, 0, 0])
    for trace in traces:
        # a policy that never counts a hit sorts by time alone: it is LRU, decision for decision
        assert values["never_counts"][trace] == results[trace, "tree, LRU"]["hit rate"]
    assert len(traces["multi-turn chat"]) == 24 and len(traces["system prompts"]) == 72
    # what the page says of the table: on every trace the frequency-aware policies find more
    for trace in traces:
        lru = results[trace, "tree, LRU"]["hit rate"]
        assert min(results[trace, "tree, LFU"]["hit rate"], results[trace, "tree, SLRU"]["hit rate"]) > lru
    # and most of the system-prompt trace's prompt tokens are the one-off documents'
    documents = [
        q.prompt for q in traces["system prompts"] if _prompt_text(q.prompt).startswith("Summarise: ")
    ]
    assert sum(map(len, documents)) > results["system prompts", "tree, LRU"]["prompt"] / 2


def _prompt_text(tokens) -> str:
    return "".join(ALPHABET[i] for i in tokens)


def test_exercise_1_the_most_a_cache_could_find(tutorial, values):
    """Exercise 1's answer, counted here: the most each prompt of the system-prompt trace can find
    (its longest common prefix with an earlier prompt, but its last token, in whole blocks) never
    grows with the block size, and the page printed it beside each hit rate."""
    prompts = [q.prompt for q in values["traces"]["system prompts"]]
    total = sum(map(len, prompts))

    def findable(size):
        most = 0
        for i, prompt in enumerate(prompts):
            shared = 0
            for earlier in prompts[:i]:
                n = 0
                while n < min(len(prompt) - 1, len(earlier)) and prompt[n] == earlier[n]:
                    n += 1
                shared = max(shared, n)
            most += shared // size * size
        return most / total

    ceilings = [findable(size) for size in (2, 4, 8, 16)]
    assert ceilings == sorted(ceilings, reverse=True)
    for size, most in zip((2, 4, 8, 16), ceilings, strict=True):
        assert_printed(tutorial, [size, most * 100], atol=[0, half_unit(1)], gaps=True)


def test_shared_prefix_attention_is_attention_within_float32_rounding(tutorial, values):
    q, pk, pv = values["queries"], values["prefix_k"], values["prefix_v"]
    worst = 0.0
    for b in range(q.shape[0]):
        k = torch.cat([pk, values["suffix_k"][b]], dim=1)
        v = torch.cat([pv, values["suffix_v"][b]], dim=1)
        reference = float32_attention(q[b].numpy(), k.numpy(), v.numpy())
        assert_within(values["cascade"][b].numpy(), reference.output, 2 * reference.output_error, "cascade")
        exact = torch.softmax(q[b].double() @ k.double().mT / 8, dim=-1) @ v.double()
        worst = max(worst, (values["cascade"][b].double() - exact).abs().max().item())
    assert worst == values["worst"]
    assert_printed(tutorial, [worst], rtol=sci_rtol(1))


def test_the_bytes_a_step_reads_for_the_prefix(tutorial):
    """By hand: keys and values of 4,096 tokens, 8 heads of 128, 2 bytes each: 16 MiB per copy."""
    per_copy = 2 * 4096 * 8 * 128 * 2 / 2**20
    assert per_copy == 16
    for B in (1, 8, 64, 256):
        assert_printed(tutorial, [B, B * per_copy, per_copy])
    assert_printed(
        tutorial, [256 * 2 * 32768 * 32 * 128 * 2 / 2**30, 2 * 32768 * 32 * 128 * 2 / 2**30], atol=[0.5, 0.05]
    )


def test_keying_a_block_by_its_own_tokens_serves_another_context(tutorial, values):
    """By hand: "are kind. Hi" starts with the second block of "You are kind. Hi". Chained hashes know
    its first block only after "You ", so nothing is found; keyed by their own tokens, "are " and
    "kind" are found (8 tokens), with keys computed at positions 4-11 after "You "."""
    keyed, fresh = values["keyed"], values["fresh"]
    found, logits = keyed["BlockHashCache"]
    assert found == 0 and torch.equal(logits, fresh.logits[0])
    found, logits = keyed["OwnTokensOnly"]
    assert found == 8 and not torch.equal(logits, fresh.logits[0])
    assert_printed(tutorial, [0, 0], gaps=True)
    assert_printed(tutorial, [16, 0, 12, 4], gaps=True)  # pitfall 3: the whole prompt, and the capped hit


def test_every_verdict_is_the_truth(tutorial, values):
    expected = [
        all(values["shared"]),
        torch.equal(values["first"][0][:, :, 24], values["second"][0][:, :, 24]),
        values["same"],
        values["same_bits"],
        values["same_tokens"],
    ]
    assert verdicts(tutorial) == expected

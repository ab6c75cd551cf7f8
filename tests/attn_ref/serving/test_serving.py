"""attn_ref.serving against independent references.

Every engine's tokens are checked against greedy decoding written out here as a loop of full
forward passes of the model (no cache, no attn_ref attention); the rolling window against a
forward pass written here with PyTorch's scaled_dot_product_attention and a NumPy mask;
flex_attention against PyTorch's own flex_attention and float64 NumPy (tests/support/reference.py);
split-K against PyTorch's scaled_dot_product_attention; the paged cache against a dict of what
was written. Several seeds and request mixes each.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch.nn.attention import flex_attention as torch_flex

from attn_ref.decoder import TinyDecoder
from attn_ref.masks import document_causal_mask, sliding_window_mask
from attn_ref.serving import (
    PagedKVCache,
    Request,
    attention_intensity,
    create_block_mask,
    flex_attention,
    generate_packed,
    generate_padded,
    generate_windowed,
    merge_partials,
    serve,
    split_k_attention,
)
from tests.support.reference import EPS32
from tests.support.serving_reference import greedy, masked_greedy

# PyTorch's flex_attention run eagerly warns that it is unfused: as a reference, that is what we want.
pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
FEW = settings(max_examples=5, deadline=None)
SOME = settings(max_examples=25, deadline=None)


def make_model(seed: int, context: int = 64, kv_heads: int | None = None) -> TinyDecoder:
    torch.manual_seed(seed)
    return TinyDecoder(24, context, embed_dim=16, num_layers=2, num_heads=4, num_kv_heads=kv_heads).eval()


def random_requests(seed: int, n: int, max_prompt: int = 12, max_new: int = 10, spread: int = 0):
    g = np.random.default_rng(seed)
    return [
        Request(
            tuple(int(t) for t in g.integers(0, 24, g.integers(1, max_prompt + 1))),
            int(g.integers(1, max_new + 1)),
            arrival=int(g.integers(0, spread + 1)),
        )
        for _ in range(n)
    ]


def assert_robust(logits: torch.Tensor) -> None:
    """The greedy choice is far from a tie, so float rounding of the logits cannot flip it: a random
    model can tie two tokens within rounding, and such an example is discarded, not failed."""
    best_two = logits.topk(2, dim=-1).values
    assume((best_two[:, 0] - best_two[:, 1]).min() > 1e-4)


# --- masks ----------------------------------------------------------------------------------------


@SOME
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_document_mask_is_causal_within_each_request(lengths, seed):
    seq = np.concatenate([np.full(n, i) for i, n in enumerate(lengths)])
    pos = np.concatenate([np.arange(n) for n in lengths])
    perm = np.random.default_rng(seed).permutation(len(seq))  # any order of the packed tokens
    seq, pos = seq[perm], pos[perm]
    expected = np.array(
        [
            [sq == sk and pk <= pq for sk, pk in zip(seq, pos, strict=True)]
            for sq, pq in zip(seq, pos, strict=True)
        ]
    )
    got = document_causal_mask(torch.tensor(seq), torch.tensor(pos))
    np.testing.assert_array_equal(got.numpy(), expected)


@SOME
@given(st.integers(1, 12), st.integers(1, 6), st.integers(0, 4))
def test_sliding_window_mask_by_hand(T, window, sinks):
    p = torch.arange(T)
    expected = [[0 <= i - j < window or (j < sinks and j <= i) for j in range(T)] for i in range(T)]
    np.testing.assert_array_equal(sliding_window_mask(p, p, window, sinks).numpy(), expected)


def test_masks_refuse_bad_positions():
    with pytest.raises(ValueError, match="q_seq must be a 1-D integer tensor"):
        document_causal_mask(torch.zeros(2, 2, dtype=torch.long), torch.arange(2))
    with pytest.raises(ValueError, match="q_seq and q_pos must have the same length"):
        document_causal_mask(torch.arange(3), torch.arange(2))
    with pytest.raises(ValueError, match="window must be an int of at least 1"):
        sliding_window_mask(torch.arange(3), torch.arange(3), 0)


# --- batches: padded, packed, paged, continuous -------------------------------------------------


@FEW
@given(st.integers(0, 2**31 - 1), st.integers(1, 5), st.sampled_from([None, 2]))
def test_padded_and_packed_batches_give_each_request_its_own_tokens(seed, n, kv_heads):
    model, requests = make_model(seed % 7, kv_heads=kv_heads), random_requests(seed, n)
    expected = [greedy(model, r) for r in requests]
    for _, logits in expected:  # before the engines run: a discarded example costs only its reference
        assert_robust(logits)
    for engine in (generate_padded, generate_packed):
        for got, (tokens, _) in zip(engine(model, requests), expected, strict=True):
            assert got.tolist() == tokens


@FEW
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 6),
    st.sampled_from([None, 1, 3]),
    st.sampled_from([1, 3, 8]),
    st.booleans(),
)
def test_continuous_batching_on_a_paged_cache_gives_each_request_its_own_tokens(
    seed, n, chunk, block_size, static
):
    model = make_model(seed % 5)
    requests = random_requests(seed, n, spread=6)
    expected = [greedy(model, r) for r in requests]
    for _, logits in expected:  # before serve runs: a discarded example costs only its reference
        assert_robust(logits)
    # A pool that fits the longest request, and often not two: admission waits and preempts.
    longest = max(r.max_length for r in requests)
    num_blocks = -(-longest // block_size) + int(seed % 3)
    cache = PagedKVCache(2, num_blocks, block_size, num_kv_heads=4, head_dim=4)
    result = serve(model, requests, cache, chunk_size=chunk, static=static)
    for i, (r, (tokens, logits)) in enumerate(zip(requests, expected, strict=True)):
        assert result.tokens[i].tolist() == tokens
        # float rounding only: logits from the same sums in another order
        torch.testing.assert_close(result.logits[i], logits, atol=1e-5, rtol=0)
        assert result.finished_at[i] >= r.arrival
    assert all(s["blocks"] <= num_blocks for s in result.steps)
    assert cache.num_free == num_blocks and not cache.tables  # every block back on the free list


def test_a_shared_prefix_saves_its_full_blocks_and_changes_no_token():
    model = make_model(3)
    g = np.random.default_rng(0)
    prefix = tuple(int(t) for t in g.integers(0, 24, 10))
    requests = [
        Request(prefix + tuple(int(t) for t in g.integers(0, 24, 3 + i)), 4, arrival=int(i > 0))
        for i in range(4)
    ]
    peaks = {}
    for share in (0, 10):
        cache = PagedKVCache(2, 64, 4, num_kv_heads=4, head_dim=4)
        result = serve(model, requests, cache, share_prefix=share)
        for i, r in enumerate(requests):
            assert result.tokens[i].tolist() == greedy(model, r)[0]
        peaks[share] = max(s["blocks"] for s in result.steps)
    # By hand: 10 prefix positions fill 2 blocks of 4 and half a third; the third is copied on
    # write, so each of the 3 later requests shares 2 blocks. At the peak all 4 run.
    assert peaks[0] - peaks[10] == 3 * 2


def test_preemption_recomputes_and_keeps_the_tokens():
    model = make_model(1)
    requests = [Request(tuple(range(1, 9)), 12), Request(tuple(range(2, 10)), 12)]
    cache = PagedKVCache(2, 6, 4, num_kv_heads=4, head_dim=4)  # 24 positions: 19 + 19 do not fit
    result = serve(model, requests, cache)
    assert sum(len(s["preempted"]) for s in result.steps) >= 1  # both admitted, then out of blocks
    for i, r in enumerate(requests):
        assert result.tokens[i].tolist() == greedy(model, r)[0]


# --- the paged cache ------------------------------------------------------------------------------


@SOME
@given(st.integers(0, 2**31 - 1), st.integers(1, 5))
def test_paged_cache_reads_back_what_was_written(seed, block_size):
    g = torch.Generator().manual_seed(seed)
    cache = PagedKVCache(1, 16, block_size, num_kv_heads=2, head_dim=3)
    written: dict[str, list[torch.Tensor]] = {}
    rng = np.random.default_rng(seed)
    for _ in range(12):  # interleaved growth of three requests, one released midway
        name = str(rng.integers(0, 3))
        n = int(rng.integers(1, 4))
        if cache.blocks_needed(name, n) > cache.num_free:
            continue
        positions = cache.reserve(name, n)
        k, v = torch.randn(2, 2, n, 3, generator=g)
        cache.write(0, name, positions, k, v)
        written.setdefault(name, []).append(k)
        if name == "1" and len(written[name]) == 2:
            cache.release(name)
            del written[name]
    for name, parts in written.items():
        keys, _ = cache.gather(0, name)
        torch.testing.assert_close(keys, torch.cat(parts, dim=1), atol=0, rtol=0)
    used = {b for table in cache.tables.values() for b in table}
    assert used.isdisjoint(cache.free) and len(used) + cache.num_free == 16


def test_fork_shares_blocks_and_copies_on_write():
    cache = PagedKVCache(1, 8, 4, num_kv_heads=1, head_dim=2)
    cache.write(0, "a", cache.reserve("a", 6), torch.ones(1, 6, 2), torch.ones(1, 6, 2))
    cache.fork("a", "b")
    assert cache.tables["b"] == cache.tables["a"] and cache.num_free == 6
    cache.write(0, "b", cache.reserve("b", 1), torch.zeros(1, 1, 2), torch.zeros(1, 1, 2))
    assert cache.tables["b"][0] == cache.tables["a"][0] and cache.tables["b"][1] != cache.tables["a"][1]
    a_keys, _ = cache.gather(0, "a")
    b_keys, _ = cache.gather(0, "b")
    torch.testing.assert_close(a_keys, torch.ones(1, 6, 2))  # the parent is untouched
    torch.testing.assert_close(b_keys, torch.cat([torch.ones(1, 6, 2), torch.zeros(1, 1, 2)], dim=1))
    cache.release("a")
    cache.release("b")
    assert cache.num_free == 8 and cache.ref_counts == [0] * 8


def test_truncate_gives_back_only_the_blocks_no_request_uses():
    cache = PagedKVCache(1, 8, 2, num_kv_heads=1, head_dim=2)
    cache.reserve("a", 7)  # blocks 0, 1, 2, 3
    cache.fork("a", "b")
    cache.truncate("a", 3)  # a keeps blocks 0 and 1; b still uses 2 and 3
    assert (cache.tables["a"], cache.lengths["a"], cache.num_free) == ([0, 1], 3, 4)
    cache.truncate("b", 2)  # b keeps block 0; nobody uses 2 and 3 any more
    assert (cache.tables["b"], cache.ref_counts[:4], cache.num_free) == ([0], [2, 1, 0, 0], 6)
    assert cache.free[-2:] == [3, 2]  # block 2 is the next handed out, as release orders them
    with pytest.raises(ValueError, match=r"length must be an int in \[0, 2\], got 3"):
        cache.truncate("b", 3)


def test_paged_cache_refuses_bad_input():
    cache = PagedKVCache(1, 4, 4, num_kv_heads=1, head_dim=2)
    cache.reserve("a", 5)
    freed = cache.free[-1]
    cache.tables["a"][1] = freed  # a stale block table
    with pytest.raises(ValueError, match=rf"points at block {freed} \(entry 1\), which is free"):
        cache.gather(0, "a")
    cache.tables["a"][1] = 99
    with pytest.raises(ValueError, match=r"entry 1 = 99, not a block of the pool \[0, 4\)"):
        cache.gather(0, "a")
    with pytest.raises(ValueError, match="needs 17 positions, more than the whole cache holds"):
        cache.reserve("b", 17)
    with pytest.raises(ValueError, match="holds no blocks"):
        cache.gather(0, "never")
    with pytest.raises(ValueError, match=r"key has shape \(1, 2, 2\), expected \(1, 3, 2\)"):
        cache.write(0, "b", cache.reserve("b", 3), torch.zeros(1, 2, 2), torch.zeros(1, 2, 2))


def test_serve_refuses_requests_that_cannot_fit():
    model = make_model(0, context=32)
    with pytest.raises(ValueError, match="request 1 needs 20 positions, more than the whole cache"):
        serve(model, [Request((1,), 2), Request(tuple(range(10)), 11)], PagedKVCache(2, 4, 4, 4, 4))
    with pytest.raises(ValueError, match="more than the model's context_length=32"):
        serve(model, [Request(tuple(range(30)), 5)], PagedKVCache(2, 64, 4, 4, 4))
    with pytest.raises(ValueError, match=r"cache has \(num_layers, num_kv_heads, head_dim\)"):
        serve(model, [Request((1,), 2)], PagedKVCache(3, 4, 4, 4, 4))
    with pytest.raises(ValueError, match="max_new_tokens must be an int of at least 1"):
        Request((1, 2), 0)


# --- the rolling window ---------------------------------------------------------------------------


@FEW
@given(st.integers(0, 2**31 - 1), st.integers(1, 8), st.integers(0, 3), st.integers(1, 9))
def test_rolling_buffer_equals_the_window_mask(seed, window, sinks, chunk):
    model = make_model(seed % 5, kv_heads=2)
    (request,) = random_requests(seed, 1, max_prompt=14, max_new=14)
    expected, expected_logits = masked_greedy(model, request, window, sinks)
    assert_robust(expected_logits)  # before the engine runs: a discarded example costs only its reference
    tokens, _, slots = generate_windowed(model, request, window, sinks, chunk_size=chunk)
    assert tokens.tolist() == expected
    assert slots == window + sinks


# --- masks as functions ---------------------------------------------------------------------------


def causal_mask_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def window_4(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 4)


def prefix_5(b, h, q_idx, kv_idx):
    return (kv_idx < 5) | (q_idx >= kv_idx)


def head_odd(b, h, q_idx, kv_idx):  # differs by head: odd heads see nothing but key 0
    return (h % 2 == 0) | (kv_idx == 0)


def nothing_for_query_2(b, h, q_idx, kv_idx):  # query 2 sees no key
    return q_idx != 2


MASKS = [causal_mask_mod, window_4, prefix_5, head_odd, nothing_for_query_2]


def alibi(score, b, h, q_idx, kv_idx):
    return score + 2.0 ** (-(h + 1.0)) * (kv_idx - q_idx)


def cap(score, b, h, q_idx, kv_idx):
    return 1.5 * torch.tanh(score / 1.5)


def grid(fn, B, H, L, S):
    """fn evaluated at every (b, h, q_idx, kv_idx), one scalar at a time: (B, H, L, S)."""
    return np.array(
        [
            [
                [[bool(fn(*(torch.tensor(x) for x in (b, h, i, j)))) for j in range(S)] for i in range(L)]
                for h in range(H)
            ]
            for b in range(B)
        ]
    )


@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from(MASKS),
    st.sampled_from([None, alibi, cap]),
    st.integers(1, 13),
    st.integers(1, 13),
    st.integers(1, 5),
    st.integers(1, 5),
    st.integers(0, 2**31 - 1),
)
def test_flex_attention_against_float64_and_pytorch(mask_mod, score_mod, L, S, bq, bk, seed):
    B, H, d = 2, 2, 4
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, n, d, generator=g) for n in (L, S, S))
    block_mask = create_block_mask(mask_mod, 1, H, L, S, block_size=(bq, bk))
    out, state = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
    allowed = grid(mask_mod, 1, H, L, S)
    # float64 reference: scores, score_mod applied elementwise, masked softmax (tests/support/reference.py)
    q64, k64, v64 = (x.double().numpy() for x in (q, k, v))
    scores = q64 @ k64.swapaxes(-1, -2) / math.sqrt(d)
    if score_mod is not None:
        b, h, i, j = np.meshgrid(np.arange(B), np.arange(H), np.arange(L), np.arange(S), indexing="ij")
        scores = score_mod(torch.tensor(scores), *(torch.tensor(x) for x in (b, h, i, j))).numpy()
    row_max = np.where(allowed, scores, -np.inf).max(-1, keepdims=True)
    with np.errstate(invalid="ignore"):  # a query that sees no key: weights of zero
        weights = np.where(allowed, np.exp(scores - row_max), 0.0)
        weights = np.nan_to_num(weights / weights.sum(-1, keepdims=True))
    expected = weights @ v64
    bound = 16 * EPS32 * (S + d) * np.abs(v64).max() * max(1.0, np.abs(scores).max())
    np.testing.assert_allclose(out.double().numpy(), expected, atol=bound, rtol=0)
    # tiles: empty, partial and full as counted from the grid
    n_q, n_k = -(-L // bq), -(-S // bk)
    for i in range(n_q):
        for j in range(n_k):
            tile = allowed[:, :, i * bq : (i + 1) * bq, j * bk : (j + 1) * bk]
            kind = np.where(tile.all((-2, -1)), 2, np.where(tile.any((-2, -1)), 1, 0))
            np.testing.assert_array_equal(block_mask.kinds[:, :, i, j].numpy(), kind)
    empty_everywhere = (block_mask.kinds == 0).all(dim=(0, 1)).sum().item()
    assert state.tiles_skipped == empty_everywhere and state.tiles_computed == n_q * n_k - empty_everywhere
    # and PyTorch's own flex_attention, run eagerly
    theirs_mask = torch_flex.create_block_mask(mask_mod, 1, H, L, S, device="cpu", BLOCK_SIZE=(bq, bk))
    theirs = torch_flex.flex_attention(q, k, v, score_mod=score_mod, block_mask=theirs_mask)
    torch.testing.assert_close(out, theirs, atol=bound, rtol=0)


def test_block_masks_agree_with_pytorchs():
    for mask_mod in MASKS:
        ours = create_block_mask(mask_mod, 1, 2, 20, 24, block_size=4)
        theirs = torch_flex.create_block_mask(mask_mod, 1, 2, 20, 24, device="cpu", BLOCK_SIZE=4)
        torch.testing.assert_close((ours.kinds == 1).sum(-1).int(), theirs.kv_num_blocks.int())
        torch.testing.assert_close((ours.kinds == 2).sum(-1).int(), theirs.full_kv_num_blocks.int())


def test_mask_functions_of_the_wrong_kind_are_refused():
    with pytest.raises(TypeError, match=r"mask_mod must take 4 positional arguments .* signature \(q, k\)"):
        create_block_mask(lambda q, k: q >= k, 1, 1, 4, 4)
    with pytest.raises(TypeError, match=r"mask_mod must return a boolean tensor, got torch\.int64"):
        create_block_mask(lambda b, h, q, k: q - k, 1, 1, 4, 4)
    with pytest.raises(ValueError, match="mask_mod returned shape"):
        create_block_mask(lambda b, h, q, k: torch.ones(3, dtype=torch.bool), 1, 1, 4, 4)
    q = torch.zeros(1, 1, 4, 2)
    with pytest.raises(TypeError, match=r"score_mod must take 5 positional arguments"):
        flex_attention(q, q, q, score_mod=lambda s, q_idx, kv_idx: s)
    with pytest.raises(TypeError, match="score_mod must return a floating tensor"):
        flex_attention(q, q, q, score_mod=lambda s, b, h, i, j: i > j)
    with pytest.raises(ValueError, match=r"block_mask was made for \(B, H, L, S\) = \(1, 1, 5, 5\)"):
        flex_attention(q, q, q, block_mask=create_block_mask(causal_mask_mod, 1, 1, 5, 5))


# --- decoding's cost and split-K ------------------------------------------------------------------


@SOME
@given(
    st.integers(1, 64), st.integers(1, 4096), st.sampled_from([(8, 8), (8, 2), (32, 8)]), st.integers(1, 4)
)
def test_arithmetic_intensity_by_hand(L, S, heads, b):
    H, H_kv = heads
    d = 64
    macs = H * L * S * d + H * L * S * d  # Q K^T, then A V
    read = b * (H * L * d + H_kv * S * d + H_kv * S * d)  # Q, K, V
    assert attention_intensity(L, S, H, H_kv, d, b) == pytest.approx(macs / read, rel=1e-12)


@SOME
@given(st.integers(1, 200), st.integers(0, 200), st.sampled_from([(8, 8), (32, 8)]))
def test_causal_intensity_counts_the_pairs_a_bottom_right_mask_lets_through(L, extra, heads):
    H, H_kv = heads
    S, d = L + extra, 64
    pairs = int(np.tril(np.ones((L, S), dtype=bool), k=S - L).sum())  # query i sees keys j <= S - L + i
    read = 2 * (H * L * d + 2 * H_kv * S * d)
    assert attention_intensity(L, S, H, H_kv, d, causal=True) == pytest.approx(
        2 * H * pairs * d / read, rel=1e-12
    )
    if L == 1:  # one decoding step sees every key: the mask changes nothing
        assert attention_intensity(1, S, H, H_kv, d, causal=True) == attention_intensity(1, S, H, H_kv, d)
    with pytest.raises(ValueError, match=rf"a causal mask needs L <= S .*, got L={S + 1}, S={S}"):
        attention_intensity(S + 1, S, H, H_kv, d, causal=True)


@SOME
@given(st.integers(1, 40), st.integers(1, 3), st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_split_k_equals_sdpa(S, L, splits, seed):
    splits = min(splits, S)
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g) for n in (L, S, S))
    out, partial = split_k_attention(q, k, v, splits)
    bound = 16 * EPS32 * (S + 8) * v.abs().max().item()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=bound, rtol=0)
    assert partial.shape == (splits, 2, 3, L, 8)


def test_merge_ignores_a_part_with_no_key():
    outputs = torch.stack([torch.ones(1, 2), torch.full((1, 2), 7.0)])  # (parts, L, d_v)
    lses = torch.tensor([[0.5], [float("-inf")]])  # the second part saw no key
    merged, total = merge_partials(outputs, lses)
    torch.testing.assert_close(merged, torch.ones(1, 2))
    torch.testing.assert_close(total, torch.tensor([0.5]))
    with pytest.raises(ValueError, match="logsumexps has shape"):
        merge_partials(outputs, torch.zeros(2, 3))


def test_a_request_that_fills_the_whole_pool_is_admitted_to_an_empty_batch():
    """Its blocks and no spare: required a block to spare, it would wait forever for an empty pool."""
    import signal

    model = make_model(0)
    # By hand: 8 prompt tokens and 1 new token hold 8 positions, 2 blocks of 4: the whole pool.
    request = Request(tuple(range(8)), 1)
    cache = PagedKVCache(2, 2, 4, num_kv_heads=4, head_dim=4)

    def stuck(signum, frame):
        raise TimeoutError("serve did not return: the request was never admitted")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(60)
    try:
        result = serve(model, [request], cache)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert result.tokens[0].tolist() == greedy(model, request)[0]
    assert cache.num_free == 2 and not cache.tables

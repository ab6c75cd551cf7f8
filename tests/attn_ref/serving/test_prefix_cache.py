"""attn_ref.serving.prefix_cache and serve's prefix cache, against references written here.

The radix tree and the hash table are checked against a brute-force index (every inserted sequence's
whole-block prefixes, searched one by one); eviction against the rules worked out by hand (leaves only,
blocks no request holds, the policy's order); the pool's reference counts against a count of holders;
serve with a cache against serve without one, bit for bit with the batch-invariant engine; the shared-
prefix attention against PyTorch's attention over the whole sequence, in float64 and within float32
rounding.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_ref.decoder import TinyDecoder
from attn_ref.serving import (
    POLICIES,
    BlockHashCache,
    PagedKVCache,
    RadixCache,
    Request,
    batch_invariant,
    serve,
    shared_prefix_attention,
)
from tests.support.float32_attention_bounds import assert_within, float32_attention

SOME = settings(max_examples=30, deadline=None)
BS = 3  # block size of the index tests


def new_pool(blocks=200, block_size=BS, layers=1, heads=1, head_dim=2):
    return PagedKVCache(layers, blocks, block_size, heads, head_dim)


def store(index, pool, name, tokens):
    """A request writes ``tokens``, its full blocks go into ``index``, and it finishes."""
    pool.reserve(name, len(tokens))
    full = len(tokens) // pool.block_size
    index.insert(tokens[: full * pool.block_size], pool.tables[name][:full])
    pool.release(name)


def brute_force_hit(stored, tokens, block_size):
    """Whole blocks of ``tokens`` that some stored sequence starts with, searched exhaustively."""
    best = 0
    for s in stored:
        n = 0
        while (n + 1) * block_size <= min(len(s) // block_size * block_size, len(tokens)) and list(
            s[: (n + 1) * block_size]
        ) == list(tokens[: (n + 1) * block_size]):
            n += 1
        best = max(best, n)
    return best


sequences = st.lists(st.integers(0, 2), min_size=0, max_size=14)  # 3 tokens: many shared prefixes


@SOME
@given(
    stored=st.lists(sequences, min_size=1, max_size=8), queries=st.lists(sequences, min_size=1, max_size=8)
)
def test_both_indexes_find_the_longest_cached_prefix_in_whole_blocks(stored, queries):
    found = {}
    for index_type in (RadixCache, BlockHashCache):
        pool = new_pool()
        index = index_type(pool)
        for name, tokens in enumerate(stored):
            store(index, pool, name, tokens)
        # every distinct full block is held once, by the index alone
        distinct = {tuple(s[: (i + 1) * BS]) for s in stored for i in range(len(s) // BS)}
        assert index.num_blocks == len(distinct) == pool.num_blocks - pool.num_free
        assert all(pool.ref_counts[b] == 1 for e in index.entries() for b in e.blocks)
        found[index_type] = []
        for tokens in queries:
            blocks = index.match(tokens)
            assert len(blocks) == brute_force_hit(stored, tokens, BS)
            found[index_type].append(blocks)
    assert found[RadixCache] == found[BlockHashCache]  # the same physical blocks, too


def test_the_radix_tree_splits_where_prompts_part_by_hand():
    pool = new_pool(block_size=2)
    tree = RadixCache(pool)
    store(tree, pool, "a", [1, 2, 3, 4, 5, 6])  # blocks 0, 1, 2
    assert [(e.tokens, e.blocks) for e in tree.entries()] == [((1, 2, 3, 4, 5, 6), [0, 1, 2])]
    # b writes its 7 tokens in blocks 3 to 6: its first two duplicate cached ones, (9, 9) in block 5 is
    # new, and (7,) is a partial block, not cached
    store(tree, pool, "b", [1, 2, 3, 4, 9, 9, 7])
    shape = sorted((e.tokens, e.blocks, e.parent.tokens) for e in tree.entries())
    assert shape == [((1, 2, 3, 4), [0, 1], ()), ((5, 6), [2], (1, 2, 3, 4)), ((9, 9), [5], (1, 2, 3, 4))]
    assert tree.match([1, 2, 3, 4, 9, 9, 1]) == [0, 1, 5]
    head = next(e for e in tree.entries() if e.tokens == (1, 2, 3, 4))
    assert head.hits == 2  # stored by a (1); b's insert walks it (no hit); this match finds it (2)


def test_hits_count_storing_and_finding_not_walking():
    pool = new_pool(block_size=2)
    tree = RadixCache(pool)
    store(tree, pool, "a", [1, 2, 3, 4])
    store(tree, pool, "b", [1, 2, 3, 4])  # the same blocks again: an insert is not a hit
    (entry,) = tree.entries()
    assert entry.hits == 1
    tree.match([1, 2, 3, 4, 5])
    tree.match([1, 2, 3, 4, 5], record=False)
    assert entry.hits == 2 and entry.last_access == tree.clock - 1


def scan_scenario(policy, index_type=RadixCache):
    """A prompt stored and found again (2 hits), then three one-off documents stored after it; then room
    is asked for one block. Returns which stored sequence lost a block."""
    pool = new_pool(block_size=2)
    index = index_type(pool, policy)
    store(index, pool, "popular", [1, 1])
    index.match([1, 1, 5])  # found again: 2 hits, and the oldest access after this
    for n in range(3):
        store(index, pool, f"doc{n}", [2 + n, 7])  # one-off: 1 hit each, used more recently
    before = {e.tokens for e in index.entries()}
    index.evict(1)
    (gone,) = before - {e.tokens for e in index.entries()}
    return gone


@pytest.mark.parametrize("index_type", [RadixCache, BlockHashCache])
def test_policies_choose_their_victim_as_defined(index_type):
    assert scan_scenario("lru", index_type) == (1, 1)  # least recently used, however popular
    assert scan_scenario("lfu", index_type) == (2, 7)  # fewest hits, then least recently used
    assert scan_scenario("slru", index_type) == (2, 7)  # probation (1 hit) goes before protected (2)
    assert set(POLICIES) == {"lru", "lfu", "slru"}


def test_eviction_takes_only_unused_leaves_and_frees_their_blocks():
    pool = new_pool(blocks=12, block_size=2)
    tree = RadixCache(pool)
    store(tree, pool, "a", [1, 2, 3, 4])
    store(tree, pool, "b", [1, 2, 5, 6])  # tree: (1, 2) -> (3, 4), (5, 6)
    pool.share("reader", tree.match([1, 2, 5, 6, 0]))  # a running request holds (1, 2) and (5, 6)
    assert [e.tokens for e in tree.evictable()] == [(3, 4)]
    assert tree.evict(5) == 1  # only (3, 4) can go: (5, 6) is read, (1, 2) leads to it
    assert {e.tokens for e in tree.entries()} == {(1, 2), (5, 6)}
    pool.release("reader")
    assert tree.evict(5) == 2 and pool.num_free == 12 and not list(tree.entries())


def test_the_hash_table_forgets_evicted_blocks():
    pool = new_pool(block_size=2)
    table = BlockHashCache(pool)
    store(table, pool, "a", [1, 2, 3, 4])
    assert len(table.table) == 2
    assert table.evict(1) == 1 and len(table.table) == 1 and table.match([1, 2, 3, 4, 5]) == [0]
    # b takes the free list's last two blocks, 1 (given back by the eviction) then 2; its first block
    # duplicates cached block 0 and goes back when b finishes, its second is stored
    store(table, pool, "b", [1, 2, 3, 4])
    assert table.match([1, 2, 3, 4, 0]) == [0, 2] and pool.num_blocks - pool.num_free == 2


def test_pool_references_for_holders_that_are_not_requests():
    pool = new_pool(blocks=4, block_size=2)
    pool.reserve("a", 4)  # blocks 0, 1
    pool.retain([0, 1])
    pool.release("a")
    assert pool.ref_counts == [1, 1, 0, 0] and pool.num_free == 2
    pool.share("b", [0])
    assert pool.tables["b"] == [0] and pool.lengths["b"] == 2 and pool.ref_counts[0] == 2
    pool.reserve("b", 1)  # a new block after the shared one: no copy
    assert pool.tables["b"][0] == 0
    pool.drop([0, 1])
    assert pool.ref_counts[:2] == [1, 0] and 1 in pool.free
    for call, message in (
        (lambda: pool.retain([3]), r"blocks\[0\] = block 3 is free"),
        (lambda: pool.drop([7]), r"blocks\[0\] = 7 is not a block of the pool \[0, 4\)"),
        (lambda: pool.share("b", [0]), "already holds blocks"),
        (lambda: pool.share("c", [2, 3]), "is free"),
    ):
        with pytest.raises(ValueError, match=message):
            call()


def test_indexes_refuse_bad_input():
    pool = new_pool()
    with pytest.raises(TypeError, match="pool must be a PagedKVCache"):
        RadixCache("pool")
    with pytest.raises(ValueError, match="policy must be one of"):
        RadixCache(pool, "fifo")
    with pytest.raises(ValueError, match="2 blocks of 3 need 6 tokens, got 4"):
        RadixCache(pool).insert([1, 2, 3, 4], [0, 1])
    with pytest.raises(ValueError, match="num_blocks must be an int"):
        RadixCache(pool).evict(-1)


def decoder(seed, layers=2):
    torch.manual_seed(seed)
    return TinyDecoder(
        vocab_size=12, context_length=64, embed_dim=16, num_layers=layers, num_heads=4, num_kv_heads=2
    )


def shared_stream(seed, n=5, new=5):
    """Requests over two system prompts, some arriving after others have finished."""
    g = torch.Generator().manual_seed(seed)
    systems = [torch.randint(0, 12, (n_sys,), generator=g).tolist() for n_sys in (13, 9)]
    return [
        Request(
            tuple(
                systems[i % 2]
                + torch.randint(0, 12, (int(torch.randint(1, 6, (), generator=g)),), generator=g).tolist()
            ),
            new,
            arrival=4 * i,
        )
        for i in range(n)
    ]


def kv_pool(model, blocks=100, block_size=4):
    attn = model.blocks[0].attn
    return PagedKVCache(model.num_layers, blocks, block_size, attn.num_kv_heads, attn.head_dim)


@pytest.mark.parametrize(
    ("seed", "index_type", "blocks"), [(0, RadixCache, 100), (1, BlockHashCache, 100), (2, RadixCache, 16)]
)
def test_serving_with_a_prefix_cache_changes_no_bit_of_any_logit(seed, index_type, blocks):
    """With the batch-invariant engine, every logit is the same bits with and without the cache; on a pool
    of 16 blocks of 4 the cache must evict, and requests may be preempted, and still nothing changes."""
    model = decoder(seed)
    engine = batch_invariant(model)
    stream = shared_stream(seed)
    pool = kv_pool(model, blocks)
    cache = index_type(pool)
    cached = serve(engine, stream, pool, chunk_size=6, split_size=4, prefix_cache=cache)
    plain = serve(engine, stream, kv_pool(model), chunk_size=6, split_size=4)
    for i in range(len(stream)):
        assert torch.equal(cached.logits[i], plain.logits[i])
    assert sum(cached.cached.values()) > 0  # the later requests found the system prompts
    assert all(s["blocks"] <= blocks for s in cached.steps)
    # afterwards the pool holds the cache's blocks and nothing else, each once
    assert not pool.tables and pool.num_free + cache.num_blocks == pool.num_blocks
    assert all(pool.ref_counts[b] == 1 for e in cache.entries() for b in e.blocks)


def test_a_request_starts_from_its_cached_prefix_but_its_last_token():
    """By hand, blocks of 4, each prompt served twice, the second time after the first finished. A prompt
    of 13 tokens: at most 12 may hit (the last must be fed for its logits), and they fill 3 whole blocks.
    A prompt of 12: at most 11 may hit, 2 whole blocks, 8 tokens; its last block is computed again."""
    model = decoder(3, layers=1)
    prompt = (*range(12), 3)
    pool = kv_pool(model)
    cache = RadixCache(pool)
    run = serve(model, [Request(prompt, 3), Request(prompt, 3, arrival=10)], pool, prefix_cache=cache)
    assert run.cached == {0: 0, 1: 12}  # 13 - 1 = 12 tokens may hit: 3 whole blocks
    exact = tuple(range(12))  # 12 tokens: the hit stops one block short of the whole prompt
    pool2 = kv_pool(model)
    cache2 = RadixCache(pool2)
    run2 = serve(model, [Request(exact, 2), Request(exact, 2, arrival=10)], pool2, prefix_cache=cache2)
    assert run2.cached == {0: 0, 1: 8}


def test_the_cache_outlives_serve_and_serves_the_next_call():
    model = decoder(4, layers=1)
    engine = batch_invariant(model)
    pool = kv_pool(model)
    cache = RadixCache(pool)
    stream = shared_stream(4, n=2)
    serve(engine, stream, pool, split_size=4, prefix_cache=cache)
    again = serve(engine, stream, pool, split_size=4, prefix_cache=cache)
    assert all(again.cached[i] >= (len(r.prompt) - 1) // 4 * 4 for i, r in enumerate(stream))
    fresh = serve(engine, stream, kv_pool(model), split_size=4)
    assert all(torch.equal(again.logits[i], fresh.logits[i]) for i in range(2))


def test_serve_refuses_a_cache_it_cannot_use():
    model = decoder(5, layers=1)
    stream = shared_stream(5, n=1)
    pool = kv_pool(model)
    with pytest.raises(ValueError, match="share_prefix or prefix_cache, not both"):
        serve(model, stream, pool, share_prefix=4, prefix_cache=RadixCache(pool))
    with pytest.raises(ValueError, match="same PagedKVCache"):
        serve(model, stream, pool, prefix_cache=RadixCache(kv_pool(model)))
    pool.reserve("x", 4)
    pool.retain(pool.tables["x"])
    pool.release("x")  # a block held by no request and by no cache given
    with pytest.raises(ValueError, match="holds 1 blocks of no request"):
        serve(model, stream, pool)


@st.composite
def shared_prefix_cases(draw):
    B, H_kv = draw(st.integers(1, 5)), draw(st.sampled_from([1, 2]))
    H = H_kv * draw(st.sampled_from([1, 2]))
    d_k, d_v, P = draw(st.sampled_from([2, 8])), draw(st.sampled_from([1, 4])), draw(st.integers(1, 40))
    g = torch.Generator().manual_seed(draw(st.integers(0, 10_000)))
    q = torch.randn(B, H, 1, d_k, generator=g) * draw(st.sampled_from([0.5, 3.0]))
    pk, pv = torch.randn(H_kv, P, d_k, generator=g), torch.randn(H_kv, P, d_v, generator=g)
    own = [draw(st.integers(1, 12)) for _ in range(B)]
    sk = [torch.randn(H_kv, n, d_k, generator=g) for n in own]
    sv = [torch.randn(H_kv, n, d_v, generator=g) for n in own]
    return q, pk, pv, sk, sv


@SOME
@given(case=shared_prefix_cases())
def test_shared_prefix_attention_is_attention_over_prefix_and_suffix(case):
    q, pk, pv, sk, sv = case
    H = q.shape[1]
    out = shared_prefix_attention(q, pk, pv, sk, sv)
    out64 = shared_prefix_attention(
        q.double(), pk.double(), pv.double(), [k.double() for k in sk], [v.double() for v in sv]
    )
    for b in range(q.shape[0]):
        k = torch.cat([pk, sk[b]], dim=1).repeat_interleave(H // pk.shape[0], dim=0)  # (H, S, d_k)
        v = torch.cat([pv, sv[b]], dim=1).repeat_interleave(H // pk.shape[0], dim=0)
        expected = F.scaled_dot_product_attention(q[b].double(), k.double(), v.double())
        torch.testing.assert_close(out64[b], expected, rtol=1e-10, atol=1e-12)
        reference = float32_attention(q[b].numpy(), k.numpy(), v.numpy())
        # the merge adds, per query, two exponentials, a sum of two and a division: a few roundings more
        assert_within(out[b].numpy(), reference.output, 2 * reference.output_error, "shared prefix")


def test_shared_prefix_attention_refuses_bad_input():
    q = torch.zeros(2, 2, 1, 4)
    pk = pv = torch.zeros(1, 3, 4)
    sk = sv = [torch.zeros(1, 2, 4)] * 2
    for call, message in (
        (lambda: shared_prefix_attention(q[:, :, :0], pk, pv, sk, sv), "query has shape"),
        (lambda: shared_prefix_attention(q, pk[..., :3], pv, sk, sv), "prefix_key has shape"),
        (lambda: shared_prefix_attention(q, pk, pv[:, :2], sk, sv), "prefix_value has shape"),
        (lambda: shared_prefix_attention(q, pk, pv, sk[:1], sv), "one tensor per request, B=2"),
        (
            lambda: shared_prefix_attention(q, pk, pv, [sk[0], torch.zeros(1, 2, 5)], sv),
            r"suffix_keys\[1\] has shape",
        ),
    ):
        with pytest.raises(ValueError, match=message):
            call()

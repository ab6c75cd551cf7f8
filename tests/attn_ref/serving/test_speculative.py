"""attn_ref.serving.speculative against independent references (tests/support/speculative_reference.py).

Verification passes against full forward passes of the model with no cache (in float64, where a
top-2 gap below MARGIN64 counts as a tie and is excluded, and counted); trees against each branch
run alone and against ancestors found by walking up the parents; the sampling rule against the
exact distribution of the first tokens on small Markov chains, and by a chi-square test on
samples whose power is computed, which a rule drawing its replacement from p must fail; the
drafter's cache against the text it must hold after every round; bad input against its message.
"""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_ref.decoder import TinyDecoder
from attn_ref.serving import (
    ModelDrafter,
    NGramDrafter,
    PagedKVCache,
    accept_greedy,
    accept_sampled,
    accept_tree_greedy,
    draft_tree,
    keep_path,
    speculative_generate,
    tree_ancestor_mask,
    tree_depths,
    verify_forward,
)
from tests.support.speculative_reference import (
    MARGIN64,
    agree_but_for_ties,
    ancestors,
    chain_distribution,
    chi2_p_value,
    greedy_by_full_passes,
    power,
    residual,
    sampled_distribution,
    top2_gaps,
)

VOCAB_SIZE = 12
FEW = settings(max_examples=5, deadline=None)


def model64(seed: int, layers: int = 2) -> TinyDecoder:
    torch.manual_seed(seed)
    return TinyDecoder(VOCAB_SIZE, 48, embed_dim=16, num_layers=layers, num_heads=4).eval().double()


def pool_for(model, blocks: int = 16, dtype=torch.float64) -> PagedKVCache:
    attn = model.blocks[0].attn
    return PagedKVCache(len(model.blocks), blocks, 4, attn.num_kv_heads, attn.head_dim, dtype=dtype)


def random_text(seed: int, n: int) -> torch.Tensor:
    return torch.randint(0, VOCAB_SIZE, (n,), generator=torch.Generator().manual_seed(seed))


trees = st.lists(st.integers(0, 1000), min_size=1, max_size=8).map(
    lambda draws: [-1] + [d % (i + 1) for i, d in enumerate(draws[1:])]  # parent of node i+1 in [0, i]
)


@FEW
@given(trees)
def test_the_ancestor_mask_marks_each_nodes_path_to_the_root(parents):
    np.testing.assert_array_equal(tree_ancestor_mask(parents).numpy(), ancestors(parents))
    depths = ancestors(parents).sum(axis=1) - 1  # a node's ancestors, itself left out
    np.testing.assert_array_equal(tree_depths(parents).numpy(), depths)


def test_a_chain_is_the_causal_mask():
    chain = list(range(-1, 7))
    assert torch.equal(tree_ancestor_mask(chain), torch.ones(8, 8, dtype=torch.bool).tril())


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("split", [1, 5, 9])
def test_a_chunk_over_the_cache_gives_the_full_passes_logits(seed, split):
    model, text = model64(seed), random_text(seed, 14)
    pool = pool_for(model)
    with torch.no_grad():
        verify_forward(model, pool, "r", text[:split])
        chunk = verify_forward(model, pool, "r", text[split:])
        whole = model(text[None])[0, split:]
    assert pool.lengths["r"] == len(text)
    assert (chunk - whole).abs().max() < 1e-12  # float64: the same sums in another order


@FEW
@given(trees, st.integers(0, 3))
def test_one_pass_over_a_tree_gives_every_branch_its_own_logits(parents, seed):
    model, prefix = model64(seed), random_text(seed, 6)
    tokens = random_text(seed + 10, len(parents))
    pool = pool_for(model)
    with torch.no_grad():
        verify_forward(model, pool, "r", prefix)
        tree = verify_forward(model, pool, "r", tokens, parents)
        for leaf in range(len(parents)):
            branch = np.flatnonzero(ancestors(parents)[leaf]).tolist()  # root .. leaf, in order
            alone = model(torch.cat([prefix, tokens[branch]])[None])[0, len(prefix) :]
            assert (tree[branch] - alone).abs().max() < 1e-12


@pytest.mark.parametrize("seed", [0, 1])
def test_keep_path_leaves_the_cache_a_chain_would_have(seed):
    model, prefix = model64(seed), random_text(seed, 5)
    parents = [-1, 0, 0, 1, 2, 2, 4]
    tokens = random_text(seed + 3, len(parents))
    path = [0, 2, 4, 6]
    pool, chain = pool_for(model), pool_for(model)
    with torch.no_grad():
        verify_forward(model, pool, "r", prefix)
        verify_forward(model, pool, "r", tokens, parents)
        keep_path(pool, "r", len(prefix), path)
        verify_forward(model, chain, "r", torch.cat([prefix, tokens[path]]))
    assert pool.lengths["r"] == chain.lengths["r"] == len(prefix) + len(path)
    for layer in range(len(model.blocks)):
        for mine, theirs in zip(pool.gather(layer, "r"), chain.gather(layer, "r"), strict=True):
            assert (mine - theirs).abs().max() < 1e-12
    assert pool.num_free == pool.num_blocks - pool.blocks_for(len(prefix) + len(path))


def test_greedy_acceptance_keeps_the_matching_prefix():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        k = int(torch.randint(0, 5, (), generator=g))
        logits = torch.randn(k + 1, 5, generator=g)
        best = logits.argmax(-1).tolist()
        draft = torch.tensor([b if torch.rand((), generator=g) < 0.7 else (b + 1) % 5 for b in best[:k]])
        a = 0
        while a < k and int(draft[a]) == best[a]:
            a += 1
        assert accept_greedy(logits, draft.long()) == (a, best[a])


def test_greedy_tree_acceptance_finds_the_branch_the_target_would_write():
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        N = int(torch.randint(1, 10, (), generator=g))
        parents = [-1] + [int(torch.randint(0, i, (), generator=g)) for i in range(1, N)]
        tokens = torch.randint(0, 3, (N,), generator=g)
        logits = torch.randn(N, 3, generator=g)
        best = logits.argmax(-1).tolist()
        # brute force: the longest path from the root on which every child is its parent's argmax
        good = [i == 0 or (int(tokens[i]) == best[parents[i]]) for i in range(N)]
        paths = []
        for leaf in range(N):
            path = np.flatnonzero(ancestors(parents)[leaf]).tolist()
            if all(good[i] for i in path):
                paths.append(path)
        longest = max(len(p) for p in paths)
        path, token = accept_tree_greedy(logits, tokens, parents)
        assert len(path) == longest and path in paths and token == best[path[-1]]


def test_the_ngram_drafter_counts_the_text():
    text = random_text(5, 400) % 4
    drafter = NGramDrafter(text, vocab_size=4, order=3, alpha=0.5)
    counts = np.full((4, 4, 4), 0.5)
    for a, b, c in zip(text[:-2].tolist(), text[1:-1].tolist(), text[2:].tolist(), strict=True):
        counts[a, b, c] += 1
    np.testing.assert_allclose(drafter.counts.numpy(), counts, rtol=1e-6)
    draft, q = drafter.propose(torch.tensor([1, 2]), k=3)
    context = [1, 2]
    for x in draft.tolist():  # each guess: the most frequent continuation of the last two
        assert x == int(np.argmax(counts[context[-2], context[-1]]))
        context.append(x)
    assert torch.equal(q.argmax(-1), draft) and torch.equal(q.sum(-1), torch.ones(3, dtype=q.dtype))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_drafters_cache_holds_the_text_after_every_round(seed):
    """The rewind that mlxcel #994 got wrong: after a round with a kept guesses of k, the drafter's
    cache holds the text that both models share, n + min(a, k - 1) positions, and their keys are
    those of the text run from scratch."""
    small = model64(seed + 7, layers=1)
    drafter = ModelDrafter(small, pool_for(small))
    text = random_text(seed, 6)
    g = torch.Generator().manual_seed(seed)
    for _ in range(5):
        k = int(torch.randint(1, 5, (), generator=g))
        draft, _ = drafter.propose(text, k)
        assert drafter.length == len(text) + k - 1  # the last guess is never run
        a = int(torch.randint(0, k + 1, (), generator=g))  # what the target kept
        drafter.rollback(len(text) + a)
        assert drafter.length == len(text) + min(a, k - 1)
        fresh = pool_for(small)
        with torch.no_grad():
            verify_forward(small, fresh, "draft", torch.cat([text, draft])[: drafter.length])
        for mine, theirs in zip(drafter.pool.gather(0, "draft"), fresh.gather(0, "draft"), strict=True):
            assert (mine - theirs).abs().max() < 1e-12
        text = torch.cat([text, draft[:a], random_text(seed + a, 1)])


@functools.cache
def greedy_reference(seed: int, n: int = 16):
    return greedy_by_full_passes(model64(seed), random_text(seed, 5), n)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("k", [1, 4])
def test_greedy_speculative_text_is_the_greedy_text(seed, k):
    target, small = model64(seed), model64(seed + 100, layers=1)
    prompt, n = random_text(seed, 5), 16
    expected, reference_logits = greedy_reference(seed, n)
    gaps = top2_gaps(reference_logits)
    assert int((gaps < MARGIN64).sum()) == 0  # no tie on these seeds: the comparison below is whole
    ngram = NGramDrafter(torch.cat([random_text(seed + 1, 200), torch.tensor(expected)]), VOCAB_SIZE, order=2)
    for drafter in (ngram, ModelDrafter(small, pool_for(small))):
        result = speculative_generate(target, drafter, pool_for(target), prompt, n, k)
        assert agree_but_for_ties(result.tokens.tolist(), expected, gaps, MARGIN64)
        assert result.tokens.tolist() == expected
        assert (result.logits - reference_logits).abs().max() < 1e-12
        assert len(result.tokens) == n == sum(result.accepted) + result.target_forwards
        assert all(a <= d <= k for a, d in zip(result.accepted, result.drafted, strict=True))


def test_a_drafter_that_is_the_target_is_always_right():
    target = model64(3)
    result = speculative_generate(
        target, ModelDrafter(target, pool_for(target)), pool_for(target), random_text(3, 4), 20, k=4
    )
    assert result.accepted == result.drafted and result.acceptance_rate == 1.0
    assert result.target_forwards == 4  # rounds of 5 tokens


# --- sampling --------------------------------------------------------------------------------------

P = np.array([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.3, 0.2, 0.5]])
Q = np.array([[0.4, 0.4, 0.2], [0.2, 0.4, 0.4], [0.4, 0.2, 0.4]])


@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_rule_leaves_the_targets_distribution_exactly(k):
    """Enumerated exactly (no sampling): the right rule gives the chain's distribution, the wrong one
    does not."""
    right = sampled_distribution(P, Q, k, 3, start=0)
    wrong = sampled_distribution(P, Q, k, 3, start=0, replacement=lambda p, q: p)
    own = chain_distribution(P, 3, start=0)
    assert np.abs(right - own).sum() < 1e-12
    assert np.abs(wrong - own).sum() > 0.05


def test_accept_sampled_draws_each_token_with_the_rules_probabilities():
    """One position, enumerated: a guess drawn from q is kept with min(1, p/q), else replaced from the
    residual; the first token then has probability p. Checked on the rule's own draws by a chi-square
    test whose power against the residual-less rule is computed first."""
    p, q = P[0], Q[0]
    wrong = q * np.minimum(1, p / q) + (1 - np.minimum(p, q).sum()) * p
    n, alpha = 6000, 1e-3
    assert power(wrong, p, n, alpha, runs=400, seed=0) > 0.99  # the test can see the wrong rule
    g = torch.Generator().manual_seed(0)
    pt, qt = torch.from_numpy(np.stack([p, p])), torch.from_numpy(q[None])
    counts = np.zeros(3, dtype=np.int64)
    for _ in range(n):
        x = int(torch.multinomial(qt[0], 1, generator=g))
        a, token = accept_sampled(pt, qt, torch.tensor([x]), g)
        counts[x if a == 1 else token] += 1
    # df = 2: even, as chi2_sf_even needs
    assert chi2_p_value(counts, p) > alpha
    assert np.allclose(residual(p, q), np.maximum(p - q, 0) / np.maximum(p - q, 0).sum())


# --- bad input -------------------------------------------------------------------------------------


def test_bad_input_is_refused_with_its_name_and_shape():
    model = model64(0)
    pool = pool_for(model)
    with pytest.raises(
        ValueError, match=r"parents has 2 entries, expected one per token: tokens has shape \(3,\)"
    ):
        verify_forward(model, pool, "r", torch.tensor([1, 2, 3]), parents=[-1, 0])
    with pytest.raises(ValueError, match=r"parents\[2\] = 2 must be in \[-1, 1\]"):
        tree_ancestor_mask([-1, 0, 2])
    with pytest.raises(ValueError, match="tokens must be a 1-D integer tensor"):
        verify_forward(model, pool, "r", torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"logits has shape \(2, 5\), expected \(3, 5\): \(k \+ 1, V\)"):
        accept_greedy(torch.zeros(2, 5), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"q has shape \(2, 4\), expected \(2, 5\): \(k, V\) with p's V"):
        accept_sampled(torch.zeros(3, 5), torch.zeros(2, 4), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"context must lie in \[0, 3\]"):
        NGramDrafter(torch.tensor([0, 1, 2, 3]), vocab_size=4, order=2).propose(torch.tensor([7]), 1)
    drafter = ModelDrafter(model, pool_for(model))
    drafter.propose(random_text(0, 5), 3)
    with pytest.raises(ValueError, match="the drafter's cache holds 7 positions, but context has 5 tokens"):
        drafter.propose(random_text(0, 5), 3)
    verify_forward(model, pool, "taken", torch.tensor([1]))
    with pytest.raises(ValueError, match="request 'taken' already holds 1 positions"):
        speculative_generate(model, drafter, pool, torch.tensor([1, 2]), 3, 2, request="taken")
    with pytest.raises(
        ValueError, match=r"path must list distinct nodes in increasing order, each in \[0, 0\]"
    ):
        keep_path(pool, "taken", 0, [0, 1])
    with pytest.raises(TypeError, match=r"dtype must be a floating torch\.dtype"):
        PagedKVCache(1, 1, 1, 1, 1, dtype=torch.int64)
    tokens, parents = draft_tree(lambda t: torch.ones(3) / 3, torch.tensor([0]), [2])
    assert parents == [-1, 0, 0] and len(tokens) == 3
    with pytest.raises(ValueError, match=r"widths\[0\] must be an int of at least 1"):
        draft_tree(lambda t: torch.ones(3) / 3, torch.tensor([0]), [0])
    assert copy.deepcopy(pool).lengths == pool.lengths

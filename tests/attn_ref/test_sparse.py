"""attn_ref.sparse against independent references.

- Block means, scores and selections against NumPy written out in tests/support/sparse_reference.py
  (a sort per query, not a top-k).
- Block-sparse attention against a float64 NumPy softmax over the allowed keys; with every block
  selected, against PyTorch's own causal attention (torch.nn.functional.scaled_dot_product_attention).
- Tile counts and densities against counts by hand; captured weight against NumPy sums.
- Causality: a change to a later token never changes an earlier query's output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_ref.sparse import (
    block_mean_keys,
    block_scores,
    block_sparse_attention,
    captured_weight,
    run_attention_only,
    select_blocks,
    selection_density,
    window_blocks,
)
from attn_ref.training import AttentionOnlyDecoder
from tests.support.reference import EPS32, EPS64
from tests.support.sparse_reference import block_means_np, selection_np, sparse_attention_np, window_np

SETTINGS = settings(max_examples=40, deadline=None)

cases = st.tuples(
    st.integers(0, 10_000),  # seed
    st.integers(1, 2),  # B
    st.integers(1, 2),  # H
    st.integers(1, 30),  # T
    st.integers(1, 6),  # d
    st.integers(1, 7),  # block_size
    st.integers(0, 6),  # top_k
    st.integers(1, 5),  # block_q
)


def qkv(seed, B, H, T, d, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, B, H, T, d, generator=g, dtype=dtype).unbind(0)


# --- scores and selections ------------------------------------------------------------------------


@SETTINGS
@given(cases)
def test_scores_are_queries_times_block_means(case):
    seed, B, H, T, d, bs, _, _ = case
    q, k, _ = qkv(seed, B, H, T, d)
    means = block_means_np(k.numpy(), bs)
    np.testing.assert_allclose(block_mean_keys(k, bs).numpy(), means, rtol=0, atol=8 * bs * EPS64 * 10)
    expected = q.numpy() @ np.swapaxes(means, -1, -2)
    np.testing.assert_allclose(block_scores(q, k, bs).numpy(), expected, rtol=0, atol=160 * d * bs * EPS64)


@SETTINGS
@given(cases)
def test_selection_is_own_block_and_the_best_earlier_ones(case):
    seed, B, H, T, d, bs, top_k, _ = case
    q, k, _ = qkv(seed, B, H, T, d)
    scores = block_scores(q, k, bs)
    chosen = select_blocks(scores, top_k, bs)
    for b, h in np.ndindex(B, H):
        np.testing.assert_array_equal(chosen[b, h].numpy(), selection_np(scores[b, h].numpy(), top_k, bs))
    n_earlier = torch.arange(T) // bs  # blocks wholly before each query
    assert torch.equal(chosen.sum(-1), 1 + n_earlier.clamp(max=top_k).expand(B, H, T))


def test_ties_go_to_the_earlier_block_and_top_k_zero_is_own_block():
    scores = torch.zeros(6, 3)
    assert select_blocks(scores, 1, 2)[4].tolist() == [True, False, True]
    equal = torch.tensor([0.7, 0.7, 0.7, 0.7]).expand(8, 4)
    assert select_blocks(equal, 2, 2)[7].tolist() == [True, True, False, True]
    assert torch.equal(select_blocks(scores, 0, 2), window_blocks(6, 3, 0, 2))


@pytest.mark.parametrize(("L", "n", "w", "bs"), [(6, 3, 1, 2), (10, 4, 2, 3), (5, 5, 0, 1), (7, 2, 9, 4)])
def test_window_is_the_last_blocks_by_hand(L, n, w, bs):
    assert window_blocks(L, n, w, bs).tolist() == window_np(L, n, w, bs).tolist()


# --- attention over the selected blocks -----------------------------------------------------------


@SETTINGS
@given(cases)
def test_block_sparse_attention_is_softmax_over_the_chosen_keys(case):
    seed, B, H, T, d, bs, top_k, block_q = case
    q, k, v = qkv(seed, B, H, T, d)
    chosen = select_blocks(block_scores(q, k, bs), top_k, bs)
    out, _ = block_sparse_attention(q, k, v, chosen, bs, block_q=block_q)
    for b, h in np.ndindex(B, H):
        expected = sparse_attention_np(
            q[b, h].numpy(), k[b, h].numpy(), v[b, h].numpy(), chosen[b, h].numpy(), bs
        )
        np.testing.assert_allclose(out[b, h].numpy(), expected, rtol=0, atol=64 * T * d * EPS64)


@SETTINGS
@given(cases)
def test_every_block_selected_is_pytorchs_causal_attention(case):
    seed, B, H, T, d, bs, _, block_q = case
    q, k, v = (x.float() for x in qkv(seed, B, H, T, d))
    n = math.ceil(T / bs)
    every = select_blocks(block_scores(q, k, bs), n, bs)
    assert torch.equal(every, window_blocks(T, n, n, bs).expand(B, H, T, n))
    out, state = block_sparse_attention(q, k, v, every, bs, block_q=block_q)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (out - expected).abs().max() <= 64 * T * EPS32 * float(v.abs().max())
    assert state.tiles_computed + state.tiles_skipped == math.ceil(T / block_q) * n


def test_tiles_computed_are_the_selected_blocks():
    q, k, v = qkv(0, 1, 1, 24, 4)
    chosen = select_blocks(block_scores(q, k, 4), 2, 4)  # 6 blocks; own + up to 2 earlier
    _, state = block_sparse_attention(q, k, v, chosen, 4, block_q=1)
    by_hand = sum(1 + min(2, t // 4) for t in range(24))
    assert state.tiles_computed == by_hand == int(chosen.sum())
    assert state.multiply_adds == by_hand * 4 * (4 + 4)  # a tile: 1 query, 4 keys, d_k = d_v = 4
    assert selection_density(chosen, 4) == by_hand / sum(1 + t // 4 for t in range(24))
    _, rows_of_4 = block_sparse_attention(q, k, v, chosen, 4, block_q=4)
    union = sum(int(chosen[0, 0, s : s + 4].any(0).sum()) for s in range(0, 24, 4))
    assert rows_of_4.tiles_computed == union
    assert selection_density(chosen, 4, block_q=4) == union / sum(i + 1 for i in range(6))


def test_a_batch_computes_the_union_of_its_tiles():
    q, k, v = qkv(1, 4, 2, 24, 4)
    chosen = select_blocks(block_scores(q, k, 4), 1, 4)
    _, batched = block_sparse_attention(q, k, v, chosen, 4)
    union = int(chosen.any(dim=(0, 1)).sum())  # a tile is computed if any sequence or head chose it
    assert batched.tiles_computed == union
    alone = [block_sparse_attention(q[b, h], k[b, h], v[b, h], chosen[b, h], 4)[1].tiles_computed
             for b, h in np.ndindex(4, 2)]  # fmt: skip
    assert alone == [int(chosen[b, h].sum()) for b, h in np.ndindex(4, 2)]


def test_a_later_token_never_changes_an_earlier_output():
    q, k, v = qkv(7, 1, 2, 20, 4)
    k2, v2 = k.clone(), v.clone()
    k2[..., 13, :] += 5.0  # token 13, inside block 3 (blocks of 4)
    v2[..., 13, :] -= 5.0
    outs = []
    for keys, values in ((k, v), (k2, v2)):
        chosen = select_blocks(block_scores(q, keys, 4), 2, 4)
        outs.append(block_sparse_attention(q, keys, values, chosen, 4)[0])
    assert torch.equal(outs[0][..., :13, :], outs[1][..., :13, :])


# --- what a selection keeps -----------------------------------------------------------------------


@SETTINGS
@given(cases)
def test_captured_weight_sums_the_dense_weights_inside_the_chosen_blocks(case):
    seed, B, H, T, d, bs, top_k, _ = case
    q, k, _ = qkv(seed, B, H, T, d)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    weights = torch.softmax((q @ k.mT / math.sqrt(d)).masked_fill(~causal, float("-inf")), dim=-1)
    chosen = select_blocks(block_scores(q, k, bs), top_k, bs)
    w, c = weights.numpy(), chosen.numpy()
    expected = np.zeros((B, H, T))
    for b, h, t in np.ndindex(B, H, T):
        expected[b, h, t] = sum(w[b, h, t, j] for j in range(T) if c[b, h, t, j // bs])
    np.testing.assert_allclose(
        captured_weight(weights, chosen, bs).numpy(), expected, rtol=0, atol=4 * T * EPS64
    )


def test_run_attention_only_with_causal_attention_is_the_model():
    torch.manual_seed(0)
    model = AttentionOnlyDecoder(16, 12, embed_dim=8, num_layers=2, num_heads=2)
    tokens = torch.randint(0, 16, (3, 12), generator=torch.Generator().manual_seed(1))

    def every_block(layer, q, k, v):
        chosen = select_blocks(block_scores(q, k, 4), 3, 4)
        return block_sparse_attention(q, k, v, chosen, 4, block_q=4)[0]

    def pytorch(layer, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    with torch.no_grad():
        theirs, _ = model(tokens)
        for attend in (every_block, pytorch):
            assert (run_attention_only(model, tokens, attend) - theirs).abs().max() <= 1e-5


# --- bad input ------------------------------------------------------------------------------------


def test_bad_inputs_are_refused_by_name():
    q, k, v = qkv(0, 1, 1, 8, 4)
    chosen = select_blocks(block_scores(q, k, 2), 1, 2)
    with pytest.raises(ValueError, match="block_size must be an int of at least 1, got 0"):
        block_mean_keys(k, 0)
    with pytest.raises(TypeError, match=r"key must be a torch\.Tensor, got ndarray"):
        block_mean_keys(k.numpy(), 2)
    with pytest.raises(ValueError, match=r"key has shape \(1, 1, 8, 3\), expected \(1, 1, 8, 4\)"):
        block_scores(q, k[..., :3], 2)
    with pytest.raises(ValueError, match="top_k must be an int of at least 0, got -1"):
        select_blocks(block_scores(q, k, 2), -1, 2)
    with pytest.raises(ValueError, match="scores has 2 blocks, fewer than the 4"):
        select_blocks(torch.zeros(8, 2), 1, 2)
    with pytest.raises(TypeError, match=r"selected must be a boolean torch\.Tensor, got dtype torch\.int32"):
        block_sparse_attention(q, k, v, chosen.int(), 2)
    with pytest.raises(ValueError, match=r"selected must be \(\.\.\., L, n_blocks\) = \(\.\.\., 8, 4\)"):
        block_sparse_attention(q, k, v, chosen[..., :3], 2)
    with pytest.raises(ValueError, match="block_q must be an int of at least 1, got 0"):
        block_sparse_attention(q, k, v, chosen, 2, block_q=0)
    with pytest.raises(ValueError, match="num_blocks must be an int of at least 0, got -2"):
        window_blocks(8, 4, -2, 2)
    with pytest.raises(TypeError, match="model must be an AttentionOnlyDecoder, got Linear"):
        run_attention_only(torch.nn.Linear(2, 2), torch.zeros(1, 2, dtype=torch.long), lambda *a: a[1])

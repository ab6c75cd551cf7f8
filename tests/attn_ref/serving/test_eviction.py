"""attn_ref.serving.eviction against policies written out here in float64 NumPy, one row at a time.

The scores are made of multiples of 1/64 below 1, so that every sum and every pooled mean the
policies take is exact in float32 as in float64 (a sum of a few such numbers, divided by an odd
kernel size, rounds the same way for equal sums): the kept sets must then be equal, ties broken
toward the earlier entry by both. `decode_mask` is checked against decoding written out step by
step with a compacted cache, in float64, on a `RotaryDecoder`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_ref.serving import (
    decode_mask,
    h2o_keep,
    keep_top,
    quest_keep,
    quest_page_scores,
    random_keep,
    sink_window_keep,
    snapkv_keep,
    tova_keep,
)
from attn_ref.training import RotaryDecoder
from tests.support import reference
from tests.support.eviction_reference import top_np
from tests.support.positions_reference import rotate
from tests.support.reference import EPS32, as64


def grid_weights(g: np.random.Generator, shape) -> np.ndarray:
    """Causal 'weights' of multiples of 1/64: sums of them are exact in float32."""
    T = shape[-1]
    return g.integers(0, 64, size=shape) / 64.0 * np.tril(np.ones((T, T)))


@pytest.mark.parametrize("seed", range(5))
def test_policies_match_rows_written_out(seed: int) -> None:
    g = np.random.default_rng(seed)
    T = int(g.integers(8, 20))
    w = grid_weights(g, (2, 3, T, T))  # (B, H, T, T)
    wt = torch.tensor(w, dtype=torch.float32)
    budget = int(g.integers(3, T))
    recent = int(g.integers(0, budget + 1))
    window = int(g.integers(1, budget + 1))
    kernel = int(g.choice([1, 3, 5]))
    h2o = h2o_keep(wt, budget, recent).numpy()
    snap = snapkv_keep(wt, budget, window, kernel).numpy()
    tova = tova_keep(wt, budget).numpy()
    for b, h in np.ndindex(2, 3):
        is_recent = np.arange(T) >= T - recent
        np.testing.assert_array_equal(h2o[b, h], top_np(w[b, h].sum(0), budget, is_recent))
        votes = np.concatenate([w[b, h, T - window :, : T - window].sum(0), np.zeros(kernel // 2)])
        votes = np.concatenate([np.zeros(kernel // 2), votes])  # zeros past both ends
        pooled = np.array([votes[j : j + kernel].sum() / kernel for j in range(T - window)])
        in_window = np.arange(T) >= T - window
        pooled = np.concatenate([pooled, np.zeros(window)])
        np.testing.assert_array_equal(snap[b, h], top_np(pooled, budget, in_window))
        np.testing.assert_array_equal(tova[b, h], top_np(w[b, :, -1].mean(0), budget))


def test_sink_window_and_random() -> None:
    for S, budget, sinks in ((10, 4, 1), (10, 10, 4), (6, 4, 4), (7, 0, 0)):
        expected = np.array([j < sinks or j >= S - (budget - sinks) for j in range(S)])
        np.testing.assert_array_equal(sink_window_keep(S, budget, sinks).numpy(), expected)
    keep = random_keep((500, 12), 5, torch.Generator().manual_seed(0))
    assert (keep.sum(-1) == 5).all()
    share = keep.float().mean(0)  # each entry kept 5/12 of the time, up to chance
    assert (share - 5 / 12).abs().max() < 0.1  # 4.5 standard deviations of 500 draws


def test_keep_top_forced_and_ties() -> None:
    scores = torch.tensor([[1.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    forced = torch.tensor([False, False, True, False])
    np.testing.assert_array_equal(keep_top(scores, 2).numpy(), [[1, 1, 0, 0], [1, 1, 0, 0]])
    np.testing.assert_array_equal(keep_top(scores, 2, forced).numpy(), [[1, 0, 1, 0], [1, 0, 1, 0]])


@pytest.mark.parametrize("seed", range(4))
def test_quest_bound_and_pages(seed: int) -> None:
    g = np.random.default_rng(seed)
    page, n, d = 4, 5, 6
    q, k = g.normal(size=(3, 7, d)), g.normal(size=(3, page * n, d))
    bounds = quest_page_scores(torch.tensor(q), torch.tensor(k), page).numpy()
    for b, i, p in np.ndindex(3, 7, n):
        keys = k[b, p * page : (p + 1) * page]
        written = np.maximum(q[b, i] * keys.min(0), q[b, i] * keys.max(0)).sum()
        np.testing.assert_allclose(bounds[b, i, p], written, rtol=1e-12, atol=1e-12)
        assert (keys @ q[b, i] <= written + 1e-12).all()  # a bound on every key of the page
    read = quest_keep(torch.tensor(q), torch.tensor(k), 8, page).numpy()
    for b, i in np.ndindex(3, 7):
        pages = np.repeat(top_np(bounds[b, i], 2), page)
        np.testing.assert_array_equal(read[b, i], pages)


def test_decode_mask_is_decoding_with_a_compacted_cache() -> None:
    """Logits of one masked pass = decoding token by token, each layer's cache cut to the kept."""
    torch.manual_seed(0)
    model = RotaryDecoder(16, 12, embed_dim=8, num_layers=2, num_heads=2)
    g = torch.Generator().manual_seed(1)
    B, P, T, budget = 2, 7, 11, 3
    tokens = torch.randint(0, 16, (B, T), generator=g)
    keeps = [random_keep((B, 2, P), budget, g) for _ in model.layers]
    with torch.no_grad():
        logits, _ = model(tokens, [decode_mask(keep, T) for keep in keeps])
    theta = as64(model.frequencies)

    def qkv(layer, x, positions):  # (B, t, C) -> three (B, H, t, d_k), q and k rotated
        heads = [
            np.moveaxis(reference.linear(x, p).reshape(B, x.shape[1], 2, -1), 2, 1)
            for p in (layer.q_proj, layer.k_proj, layer.v_proj)
        ]
        return rotate(heads[0], positions, theta=theta), rotate(heads[1], positions, theta=theta), heads[2]

    def out(layer, heads):  # (B, H, t, d_k) -> (B, t, C)
        return reference.linear(np.moveaxis(heads, 1, 2).reshape(B, heads.shape[2], -1), layer.out_proj)

    x = as64(model.token_embedding.weight)[tokens.numpy()[:, :P]]  # the prompt, in full
    caches = []
    for layer, keep in zip(model.layers, keeps, strict=True):
        q, k, v = qkv(layer, x, np.arange(P))
        heads, _ = reference.attention(q, k, v, reference.causal(P))
        kept = keep.numpy()
        caches.append([[(k[b, h, kept[b, h]], v[b, h, kept[b, h]]) for h in range(2)] for b in range(B)])
        x = x + out(layer, heads)
    for t in range(P, T):  # one token at a time, at its own position t
        x = as64(model.token_embedding.weight)[tokens.numpy()[:, t : t + 1]]  # (B, 1, C)
        for layer, cache in zip(model.layers, caches, strict=True):
            q, k, v = qkv(layer, x, np.array([t]))
            heads = np.zeros_like(q)
            for b, h in np.ndindex(B, 2):
                keys = np.concatenate([cache[b][h][0], k[b, h]])
                values = np.concatenate([cache[b][h][1], v[b, h]])
                cache[b][h] = (keys, values)
                heads[b, h] = reference.softmax(q[b, h] @ keys.T / np.sqrt(k.shape[-1])) @ values
            x = x + out(layer, heads)
        step = x[:, 0] @ as64(model.unembedding.weight).T  # (B, V)
        scale = np.abs(step).max()
        np.testing.assert_allclose(logits[:, t].numpy(), step, rtol=0, atol=1e3 * EPS32 * scale)


def test_errors_name_the_argument() -> None:
    w = torch.ones(4, 4).tril()
    with pytest.raises(ValueError, match=r"weights has shape \(4, 3\), expected \(\.\.\., T, T\)"):
        h2o_keep(torch.ones(4, 3), 2)
    with pytest.raises(ValueError, match="budget must be an int in"):
        h2o_keep(w, 5)
    with pytest.raises(ValueError, match="budget must be an int of at least 2"):
        snapkv_keep(w, 1, window=2)
    with pytest.raises(ValueError, match="kernel_size must be odd"):
        snapkv_keep(w, 3, window=2, kernel_size=2)
    with pytest.raises(ValueError, match=r"expected \(\.\.\., H, T, T\)"):
        tova_keep(w, 2)
    with pytest.raises(ValueError, match="forced keeps 3 entries, more than budget=2"):
        keep_top(torch.zeros(4), 2, forced=torch.tensor([True, True, True, False]))
    with pytest.raises(ValueError, match="page_size=3 must divide S=4"):
        quest_page_scores(torch.zeros(1, 2), torch.zeros(4, 2), 3)
    with pytest.raises(ValueError, match=r"keep has shape \(2, 3\), expected \(\.\.\., length - P, P\)"):
        decode_mask(torch.ones(2, 3, dtype=torch.bool), 6, per_query=True)
    with pytest.raises(TypeError, match="keep must be a boolean"):
        decode_mask(torch.ones(3), 6)

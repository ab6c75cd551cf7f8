"""The serving tutorial (long contexts), as the build executed it, against references computed here.

The rolling buffer's tokens against greedy decoding written out with PyTorch's SDPA under a NumPy
window mask; the six masks against float64 NumPy attention and tiles counted from the mask's
grid; the cache sizes, the intensities and the split-K outputs against formulas and PyTorch's
scaled_dot_product_attention.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch.nn.functional as F

from attn_ref.plotting import PLOT_MIME
from tests.support.reference import EPS32
from tests.support.serving_reference import masked_greedy, window_mask
from tests.support.shown import assert_printed, displayed, half_unit, verdicts


def test_rolling_buffer_and_sinks_give_the_masks_tokens(tutorial, values):
    model, request, W = values["model"], values["request"], values["W"]
    assert values["rolled"].tolist() == masked_greedy(model, request, W)[0]
    assert values["reference"].tolist() == masked_greedy(model, request, W)[0]
    assert values["slots"] == W < request.max_length
    full = masked_greedy(model, request, request.max_length)[0]  # no window at all
    assert values["rolled"].tolist() != full  # the window matters
    assert values["sunk"].tolist() == masked_greedy(model, request, 12, sinks=4)[0]
    assert values["sink_slots"] == 16
    assert values["only_sinks"].tolist() == masked_greedy(model, request, 1, sinks=4)[0]  # exercise 1


def test_the_opening_picture_is_the_mask_and_the_buffer_of_its_last_query(tutorial, values):
    # The picture's mask: 11 positions, a window of 4, 2 sinks, written out in NumPy above.
    np.testing.assert_array_equal(values["sink_mask"].numpy(), window_mask(11, 4, 2))
    # By hand: slots 0 and 1 hold the sinks; position p >= 2 goes to slot 2 + (p - 2) % 4, so
    # after position 10 the window's slots 2, 3, 4, 5 hold 10, 7, 8, 9 (10 overwrote 6).
    assert values["held"] == [0, 1, 10, 7, 8, 9]
    # and they are exactly the keys the last row of the mask lets query 10 see
    assert sorted(values["held"]) == np.flatnonzero(window_mask(11, 4, 2)[10]).tolist()
    (first, *_) = displayed(tutorial, PLOT_MIME)
    assert "it holds positions [0, 1, 10, 7, 8, 9]" in first


def test_mistral_cache_sizes_by_hand(tutorial, values):
    for tokens in (4096, 32768, 131072):
        per_token = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 heads of 128, 16-bit
        assert_printed(tutorial, [tokens, per_token * tokens / 2**30, per_token * 4096 / 2**30], gaps=True)


def float64_attention(q, k, v, allowed, scores_mod=None):
    q, k, v = (x.double().numpy() for x in (q, k, v))
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    if scores_mod is not None:
        scores = scores_mod(scores)
    row_max = np.where(allowed, scores, -np.inf).max(-1, keepdims=True)
    weights = np.where(allowed, np.exp(scores - row_max), 0.0)
    return (weights / weights.sum(-1, keepdims=True)) @ v, np.abs(scores).max()


def test_masks_as_functions(tutorial, values):
    q, k, v, doc, slopes = (values[n] for n in ("q", "k", "v", "doc", "slopes"))
    L = values["L"]
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    d = doc.numpy()
    causal = j <= i
    allowed = {
        "causal": causal,
        "sliding window": causal & (i - j < 48),
        "document": causal & (d[:, None] == d[None, :]),
        "prefix-LM": causal | (j < 64),
        "ALiBi": causal,
        "soft-capping": causal,
    }
    h = np.arange(4)[:, None, None]
    mods = {
        "ALiBi": lambda s: s + slopes.double().numpy()[h] * (j - i),
        "soft-capping": lambda s: 2.0 * np.tanh(s / 2.0),
    }
    results = values["flex_results"]
    assert list(results) == list(allowed)
    for name, mask in allowed.items():
        expected, largest_score = float64_attention(q, k, v, mask, mods.get(name))
        tiles = mask.reshape(8, 32, 8, 32).transpose(0, 2, 1, 3)  # (block_q, block_k, 32, 32)
        empty = (~tiles.any(axis=(-2, -1))).mean()
        full = tiles.all(axis=(-2, -1)).mean()
        # the kinds the picture draws: 0 empty, 2 full, 1 partial
        kinds = np.where(~tiles.any(axis=(-2, -1)), 0, np.where(tiles.all(axis=(-2, -1)), 2, 1))
        np.testing.assert_array_equal(results[name]["kinds"].numpy(), kinds)
        assert results[name]["skipped"] == empty
        assert results[name]["agree"]
        # both implementations are float32 sums of 256 terms: a few ulps per term, times the values
        bound = 4 * EPS32 * 256 * max(1.0, largest_score) * v.abs().max().item()
        assert results[name]["error"] < 2 * bound
        np.testing.assert_allclose(results[name]["output"].double().numpy(), expected, atol=bound)
        assert_printed(
            tutorial,
            [empty, 1 - empty - full, full, 100 * empty, results[name]["error"]],
            atol=[half_unit(2)] * 3 + [half_unit(1), 0],
            rtol=[0, 0, 0, 0, 0.051],
        )
    skipped = {name: r["skipped"] for name, r in results.items()}
    assert skipped["sliding window"] > skipped["causal"] > skipped["prefix-LM"]
    assert skipped["document"] > skipped["causal"] and 0.4 < skipped["causal"] < 0.5
    assert min(skipped["sliding window"], skipped["document"]) > 0.5  # "most of them"
    assert skipped["ALiBi"] == skipped["soft-capping"] == skipped["causal"]
    assert values["largest"] == max(r["error"] for r in results.values())


def intensity(L, S, H_kv, pairs=None):
    """Multiply-adds over bytes read (Q, K, V in 16 bits), 32 query heads of 128: each (query, key)
    pair costs d_k for its score and d_k for its share of the output, per head."""
    pairs = L * S if pairs is None else pairs
    return (2 * 32 * pairs * 128) / (2 * (32 * L * 128 + 2 * H_kv * S * 128))


def test_intensity_by_hand(tutorial, values):
    rows = []
    for T in (512, 4096, 32768):
        causal_pairs = int(np.tril(np.ones((T, T), dtype=bool)).sum()) if T <= 4096 else T * (T + 1) // 2
        assert causal_pairs == T * (T + 1) // 2
        row = (
            intensity(T, T, 32),
            intensity(T, T, 32, causal_pairs),
            intensity(1, T, 32),
            intensity(1, T, 8),
        )
        assert values["intensities"][T] == pytest.approx(row, rel=1e-12)
        assert 0.49 < row[1] / row[0] <= 0.51  # "about half"
        rows.append([T, *row])
    assert_printed(tutorial, rows, atol=[0] + [half_unit(2)] * 4)
    exercise = [intensity(n, 4096, 8) for n in (1, 4, 16, 64)]
    assert_printed(
        tutorial,
        [x for n, e in zip((1, 4, 16, 64), exercise, strict=True) for x in (n, e)],
        atol=[0, half_unit(2)] * 4,
    )


def test_split_k_equals_sdpa(tutorial, values):
    q1, keys, vals = values["q1"], values["keys"], values["values"]
    expected = F.scaled_dot_product_attention(q1.double(), keys.double(), vals.double())
    # Each output is a convex combination of 1000 values: float32 rounding of the weights and of
    # the sum moves it by at most about 1000 eps max|v| (the worst case; typical errors are far less).
    bound = 1000 * EPS32 * vals.abs().max().item()
    for splits, error in values["split_errors"].items():
        assert error < bound, splits
    naive = values["naive"].double()
    assert (naive - expected).abs().max().item() > 10 * bound  # averaging the parts is wrong
    assert (values["sdpa"].double() - expected).abs().max().item() < bound
    assert values["two_rounds"].sub(values["one_round"]).abs().max().item() < bound


def test_the_split_k_picture_draws_each_parts_share_of_the_softmax(tutorial, values):
    """The shares of the 8 parts of the first head's query, from its 1,000 scores in float64: the
    exponentials summed over each part's 125 keys, over their sum over all keys."""
    q, k = values["q1"][0, 0, 0].double().numpy(), values["keys"][0, 0].double().numpy()
    scores = k @ q / math.sqrt(64)
    weights = np.exp(scores - scores.max())
    shares = np.array([weights[125 * i : 125 * (i + 1)].sum() for i in range(8)]) / weights.sum()
    np.testing.assert_allclose(values["first"].double().numpy(), shares, rtol=0, atol=1e-5)
    assert abs(values["first"].sum().item() - 1) < 1e-5 and shares.max() > 1.2 / 8  # not a plain 1/8
    (*_, last) = displayed(tutorial, PLOT_MIME)
    assert f"from {shares.min():.2f} to {shares.max():.2f}" in last


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial):
    expected = [True, True, True] + [True] * 6 + [True]  # buffer, full differs, sinks; 6 masks; exercise 1
    assert verdicts(tutorial) == expected


def test_a_window_written_with_less_or_equal_has_one_key_too_many(tutorial, values):
    W = values["W"]
    # By hand: query 40 against keys 0..40; 40 - j <= W for j = 40 - W, ..., 40.
    assert values["keys_seen"] == {"<=": W + 1, "<": W} and values["slots"] == W
    assert_printed(tutorial, [W + 1, W], gaps=True)
    assert_printed(tutorial, [W, W], gaps=True)


def test_exercise_dilated_mask(tutorial, values):
    q, k, v, L = values["q"], values["k"], values["v"], values["L"]
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    allowed = (j <= i) & ((i - j) % 2 == 0)
    tiles = allowed.reshape(8, 32, 8, 32).transpose(0, 2, 1, 3)  # (block_q, block_k, 32, 32)
    empty = (~tiles.any(axis=(-2, -1))).mean()
    result = values["dilated_result"]
    assert result["skipped"] == empty and result["agree"]
    expected, largest_score = float64_attention(q, k, v, allowed)
    bound = 4 * EPS32 * 256 * max(1.0, largest_score) * v.abs().max().item()
    assert result["error"] < 2 * bound
    np.testing.assert_allclose(result["output"].double().numpy(), expected, atol=bound)
    assert_printed(tutorial, [100 * empty, result["error"]], atol=[half_unit(1), 0], rtol=[0, 0.051])

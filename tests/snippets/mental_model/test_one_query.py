"""mental_model/one_query.py: the page's first two pictures and their code, one query meeting five
keys and then every query at once, against float64 NumPy and PyTorch's own attention."""

from __future__ import annotations

import numpy as np
import torch

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES
from tests.support.float32_attention_bounds import SAFETY, assert_within, float32_attention
from tests.support.printed import assert_shown, flag, line_after
from tests.support.reference import EPS32, as64

q, K, V = (as64(x) for x in (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES))
d_k = K.shape[-1]
ONE = float32_attention(q, K, V)  # softmax(q K^T / sqrt(d_k)) V in float64, with float32's bounds


def _scores(Q):
    """Q K^T / sqrt(d_k) in float64, and how far float32 may be from it: a dot product of d_k terms,
    then a division (tests/support/float32_attention_bounds.py)."""
    error = SAFETY * (d_k + 2) * EPS32 * (np.abs(Q) @ np.abs(K).T) / np.sqrt(d_k)
    return Q @ K.T / np.sqrt(d_k), error


def _every(values):
    Q = as64(values["Q"])
    return Q, float32_attention(Q, K, V)


# ---- One query: the steps and the first picture ----


def test_the_steps_print_the_scores_the_weights_and_the_output(printed):
    scores, _ = _scores(q)
    assert_shown(line_after(printed, "scores: "), scores[0], decimals=2)
    assert_shown(line_after(printed, "weights:"), ONE.weights[0], 1.0, decimals=[3, 4])
    assert_shown(line_after(printed, "output: "), ONE.output[0], decimals=3)
    sdpa = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(x) for x in (q, K, V)))
    np.testing.assert_allclose(ONE.output, sdpa.numpy(), rtol=1e-12)


def test_what_the_page_says_of_the_first_picture():
    """Key 0 points most nearly along q and gets over half of the weight; keys 0 and 1 take
    nearly all of it (over nine tenths)."""
    cosines = (K @ q[0]) / np.linalg.norm(K, axis=1) / np.linalg.norm(q[0])
    w = ONE.weights[0]
    assert cosines.argmax() == 0 and w.argmax() == 0
    assert w[0] - ONE.weights_error[0, 0] > 0.5
    assert w[:2].sum() - ONE.weights_error[0, :2].sum() > 0.9


def test_the_first_picture_draws_the_same_numbers(grids):
    """Seven grids: the query, the keys, the scores, the weights, the values, the weighted values
    and the output, each coloured and written as float64 gives them (one or two decimals)."""
    cells = grids("lookup_fig")
    w = ONE.weights[0]
    scores, scores_error = _scores(q)
    expected = [
        (q, 0, 1, "RdBu_r"),
        (K, 0, 1, "RdBu_r"),
        (scores.T, scores_error.T, 2, "RdBu_r"),
        (w[:, None], ONE.weights_error.T, 2, "viridis"),
        (V, 0, 1, "RdBu_r"),
        (w[:, None] * V, ONE.weights_error.T * np.abs(V) + 2 * EPS32 * w[:, None] * np.abs(V), 2, "RdBu_r"),
        (ONE.output, ONE.output_error, 2, "RdBu_r"),
    ]
    assert len(cells) == len(expected)
    for grid, (drawn, allowed, places, cmap) in zip(cells, expected, strict=True):
        assert grid.cmap == cmap
        assert_within(grid.values, drawn, allowed, cmap)
        assert_within(grid.numbers(), drawn, 0.5 * 10.0**-places + np.asarray(allowed), "written")
    assert cells[3].clim == (0.0, 1.0)  # weights: dark purple for 0, yellow for 1
    # One colour scale for the query and the keys, one for the values, their weighted rows and the output.
    assert cells[0].clim == cells[1].clim == (-2.0, 2.0)
    assert cells[4].clim == cells[5].clim == cells[6].clim == (-3.0, 3.0)


# ---- Every query at once: the code and the second picture ----


def test_every_query_one_row_per_token_the_first_the_pictured_one(values):
    Q, every = _every(values)
    np.testing.assert_array_equal(Q[:1], LOOKUP_QUERY)
    assert Q.shape == K.shape and not Q[2].any()  # T queries of width d_k; query 2 is zero
    scores, error = _scores(Q)
    assert_within(values["scores"], scores, error, "scores")
    assert_within(values["weights"], every.weights, every.weights_error, "weights")
    assert_within(values["output"], every.output, every.output_error, "output")
    sdpa = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(x) for x in (Q, K, V)))
    np.testing.assert_allclose(every.output, sdpa.numpy(), rtol=1e-12)
    np.testing.assert_allclose(every.weights[0], ONE.weights[0], rtol=1e-15)  # row 0: the first picture


def test_a_zero_query_weighs_every_key_alike_and_averages_the_values(values):
    _, every = _every(values)
    T = len(K)
    np.testing.assert_allclose(every.weights[2], np.full(T, 1 / T), rtol=1e-15)
    np.testing.assert_allclose(every.output[2], V.mean(axis=0), rtol=1e-12, atol=1e-15)


def test_prints_the_shapes_and_the_check(printed):
    T, d_v = V.shape
    assert_shown(line_after(printed, "scores, weights:"), (T, T), (T, T), decimals=0)
    assert_shown(line_after(printed, "outputs:"), (T, d_v), decimals=0)
    assert flag(printed, "same as PyTorch's:")


def test_the_second_picture_draws_the_same_numbers(grids, values):
    """K transposed, Q, the scores, V, the weights and the output, in that order."""
    Q, every = _every(values)
    scores, error = _scores(Q)
    expected = [
        (K.T, 0, 1, "RdBu_r"),
        (Q, 0, 1, "RdBu_r"),
        (scores, error, 2, "RdBu_r"),
        (V, 0, 1, "RdBu_r"),
        (every.weights, every.weights_error, 2, "viridis"),
        (every.output, every.output_error, 2, "RdBu_r"),
    ]
    cells = grids("matrices_fig")
    assert len(cells) == len(expected)
    for grid, (drawn, allowed, places, cmap) in zip(cells, expected, strict=True):
        assert grid.cmap == cmap
        assert_within(grid.values, drawn, allowed, cmap)
        assert_within(grid.numbers(), drawn, 0.5 * 10.0**-places + np.asarray(allowed), "written")
    assert cells[4].clim == (0.0, 1.0)
    assert cells[0].clim == cells[1].clim and cells[3].clim == cells[5].clim

"""mental_model/exercise_query_length.py: a zero query averages the values; a long one picks one value."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import assert_within, float32_attention, product_error
from tests.support.printed import assert_shown
from tests.support.reference import as64


def _exact(values, s):
    """Attention of s q in float64; s q itself is one float32 rounding of the exact product."""
    q, K, V = (as64(values[name]) for name in ("q", "K", "V"))
    return float32_attention(s * q, K, V, rounds=1)


def test_every_length_against_float64(values):
    assert len(values["results"]) >= 2
    for s, (output, weights) in values["results"].items():
        exact = _exact(values, s)
        assert_within(weights, exact.weights, exact.weights_error, f"weights at s = {s}")
        assert_within(output, exact.output, exact.output_error, f"output at s = {s}")


def test_a_zero_query_averages_the_values(values):
    V = as64(values["V"])
    assert 0 in values["results"]
    exact = _exact(values, 0)
    # By hand: all scores equal -> weights 1/S for S keys, output the mean of the values.
    np.testing.assert_allclose(exact.weights, np.full((1, len(V)), 1 / len(V)), rtol=1e-15)
    np.testing.assert_allclose(exact.output[0], V.mean(axis=0), rtol=1e-12, atol=1e-15)


def test_a_long_query_picks_the_value_of_the_top_key(values):
    q, K, V = (as64(values[name]) for name in ("q", "K", "V"))
    dots = (q @ K.T)[0]
    top = int(dots.argmax())
    assert values["top"] == top
    second = np.sort(dots)[-2]
    assert dots[top] - second > 2 * product_error(q, K.T)[0].max()  # no tie that float32 could flip
    s = max(values["results"])
    exact = _exact(values, s)
    # By hand: w_j <= exp(-s (q.k_top - q.k_j) / sqrt(d_k)) for j != top, so the output is within
    # sum_j w_j |v_j - v_top| of v_top; at this s that is below the printed 3 decimals.
    others = np.exp(-s * (dots[top] - np.delete(dots, top)) / np.sqrt(q.shape[-1]))
    bound = others @ np.abs(np.delete(V, top, axis=0) - V[top])
    assert_within(exact.output[0], V[top], bound, "long query vs v_top")
    assert bound.max() < 5e-4
    np.testing.assert_allclose(exact.output[0], V[top], atol=1e-3)
    output, _ = values["results"][s]
    assert_within(output[0], V[top], bound + exact.output_error[0], "the snippet's long query vs v_top")


def test_prints_the_weights_the_outputs_the_mean_and_v_top(printed, values):
    V = as64(values["V"])
    rows = [row[0] for output, weights in values["results"].values() for row in (weights, output)]
    assert_shown(printed, *rows, V.mean(axis=0), V[values["top"]], decimals=3)

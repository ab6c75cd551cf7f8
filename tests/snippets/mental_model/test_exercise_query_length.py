"""mental_model/exercise_query_length.py: a zero query averages the values; a long one picks the
value of the top key, Alice."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import as64
from tests.support.sentence import ALICE, SHE, K, Q, V


def _exact(s):
    """Attention of s q in float64; s q is exact in float32 (small integers)."""
    return float32_attention(s * Q[SHE : SHE + 1], K, V)


def test_the_exercises_vectors_are_the_sentences(values):
    for name, expected in (("K", K), ("V", V), ("q", Q[SHE])):
        np.testing.assert_array_equal(as64(values[name]), expected)


def test_every_length_against_float64(values):
    assert {0, 10} <= set(values["results"])
    for s, (weights, output) in values["results"].items():
        exact = _exact(s)
        assert_within(weights, exact.weights[0], exact.weights_error[0], f"weights at s = {s}")
        assert_within(output, exact.output[0], exact.output_error[0], f"output at s = {s}")


def test_a_zero_query_averages_the_values():
    exact = _exact(0)
    np.testing.assert_allclose(exact.weights[0], np.full(len(V), 1 / len(V)), rtol=1e-15)
    np.testing.assert_allclose(exact.output[0], V.mean(axis=0), rtol=1e-12, atol=1e-15)


def test_a_long_query_picks_alices_value():
    """By hand: each other key's weight is at most exp(-s (q.k_Alice - q.k_j) / sqrt(d_k)), so the
    output is within sum_j w_j |v_j - v_Alice| of Alice's value; at s = 10, far below 3 decimals."""
    q = Q[SHE]
    dots = K @ q
    assert int(dots.argmax()) == ALICE
    others = np.exp(-10 * (dots[ALICE] - np.delete(dots, ALICE)) / np.sqrt(len(q)))
    bound = others @ np.abs(np.delete(V, ALICE, axis=0) - V[ALICE])
    assert bound.max() < 5e-4
    assert_within(_exact(10).output[0], V[ALICE], bound, "long query vs Alice's value")


def test_prints_the_weights_the_outputs_and_the_mean(printed, values):
    rows = [row for weights, output in values["results"].values() for row in (weights, output)]
    assert_shown(printed, *rows, V.mean(axis=0), decimals=3)

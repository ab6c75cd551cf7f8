"""foundation/three_tokens_heatmap.py: each query's strongest keys (ties included) and the two
equal scores, against float64 NumPy."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import as64


def test_scores_are_exact_and_query_0_ties_keys_0_and_2(values):
    X = as64(values["X"])
    np.testing.assert_array_equal(X, THREE_TOKENS)
    scores = as64(values["scores"])
    np.testing.assert_array_equal(scores, X @ X.T)  # small integers: exact in float32
    assert scores[0, 2] == scores[0, 0] == 2.0  # x_0 . x_2 = 1 + 1 = x_0 . x_0


def test_each_querys_strongest_keys_ties_included(values):
    X = as64(values["X"])
    exact = float32_attention(X, X, X)
    assert_within(values["weights"], exact.weights, exact.weights_error, "weights")
    scores = X @ X.T
    for t, keys in enumerate(values["strongest"]):
        # The softmax is increasing: the largest weights are where the (exact, integer) scores are largest.
        assert keys == np.flatnonzero(scores[t] == scores[t].max()).tolist()
        assert keys == np.flatnonzero(np.isclose(exact.weights[t], exact.weights[t].max())).tolist()
        # The other keys trail the tied ones by more than float32 rounding could close.
        others = np.delete(exact.weights[t], keys)
        assert exact.weights[t, keys].min() - others.max(initial=0.0) > 2 * exact.weights_error[t].max()
    assert len(values["strongest"]) == len(X)


def test_prints_the_keys_and_the_scores(printed, values):
    scores = as64(values["scores"])
    assert_shown(printed, *values["strongest"], scores[0, 2], scores[0, 0])

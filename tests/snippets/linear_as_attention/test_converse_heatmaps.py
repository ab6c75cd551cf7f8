"""linear_as_attention/converse_heatmaps.py: doubling X sharpens every row of the weights A(X)."""

import numpy as np

from tests.support.printed import assert_printed_in_order, decimals
from tests.support.reference import EPS32, as64, attention


def test_converse_heatmaps_weights_sharpen_when_x_doubles(values, printed):
    X = as64(values["X"])
    weights = values["weights"]  # A(X) and A(2X)
    assert list(weights) == ["X", "2X"]
    largest = {}
    for label, t in (("X", 1), ("2X", 2)):
        expected = attention(t * X, t * X, t * X)[1]
        # float32 scores, rounded to a few eps of the largest one; softmax turns an error delta
        # in the scores into at most 2 delta relative error in a weight
        scores = (t * X) @ (t * X).T / np.sqrt(X.shape[-1])
        tolerance = 8 * X.shape[-1] * EPS32 * (1 + np.abs(scores).max())
        np.testing.assert_allclose(as64(weights[label]), expected, rtol=0, atol=tolerance)
        largest[label] = expected.max(axis=1)
    # Doubling X quadruples the scores: every row's largest weight grows.
    assert (largest["2X"] > largest["X"]).all()
    # What is printed: each row's largest weight, for X and for 2X, to 4 decimals.
    assert_printed_in_order(
        printed,
        [decimals(w, 4) for w in as64(weights["X"]).max(axis=1)]
        + [decimals(w, 4) for w in as64(weights["2X"]).max(axis=1)],
    )

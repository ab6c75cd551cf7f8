"""bugs/exercise_temperature.py: the factor worked out by hand (sqrt(C / (C / n_head)) = sqrt(n_head)),
and the weights recomputed exactly in float64 from the snippet's own inputs, each float32 result
within its rounding bound (tests/support/worst_case_rounding.py)."""

import math

import numpy as np

from tests.support.printed import assert_shows, rounded
from tests.support.worst_case_rounding import exact, gamma, matmul, scaled, softmax


def test_the_factor(printed, values):
    C, n_head, head_size, factor = (values[name] for name in ("C", "n_head", "head_size", "factor"))
    assert head_size * n_head == C
    # Divided by sqrt(C) = sqrt(n_head) sqrt(head_size) instead of sqrt(head_size): sqrt(n_head) too much.
    assert factor == math.sqrt(n_head)
    assert_shows(printed, rounded([factor], 3))


def test_the_weights(printed, values):
    x, W_Q, W_K, C, head_size, factor = (
        values[name] for name in ("x", "W_Q", "W_K", "C", "head_size", "factor")
    )
    X = exact(x)
    scores = matmul(matmul(X, exact(W_Q)), matmul(X, exact(W_K)).mT)  # (T, T), not yet scaled
    assert scores.holds(values["scores"])
    S = exact(values["scores"])  # from here on, the snippet's own float32 scores
    right = softmax(scaled(S, head_size**-0.5))
    buggy = softmax(scaled(S, C**-0.5))
    tempered = softmax(scaled(scaled(S, head_size**-0.5), 1 / factor))
    for name, expected in (("right", right), ("buggy", buggy), ("tempered", tempered)):
        assert expected.holds(values[name]), name
    # The buggy weights are the right scores at temperature sqrt(n_head), exactly ...
    np.testing.assert_allclose(buggy.value, tempered.value, rtol=0, atol=1e-15)
    # ... and in float32 up to the rounding bounded above, which the page shows as True.
    assert values["same"] is True
    # The average largest weight of a row: flatter at a higher temperature, and above the 1/T of a
    # uniform row (a row's largest weight is at least its mean, 1/T; equal only if the row is uniform).
    T = values["T"]
    largest = values["largest"]
    expected = [w.value.max(axis=-1).mean() for w in (right, buggy)]
    slack = [w.error.max() + gamma(T) for w in (right, buggy)]
    np.testing.assert_array_less(np.abs(np.array(largest) - expected), slack)
    assert 1 / T < expected[1] < expected[0]
    assert largest[1] - slack[1] > 1 / T and largest[1] + slack[1] < largest[0] - slack[0]
    assert_shows(printed, rounded(largest, 3) + rounded([1 / T], 3))

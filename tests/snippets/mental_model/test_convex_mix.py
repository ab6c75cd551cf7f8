"""mental_model/convex_mix.py: outputs are weighted averages of the values, not linear in X."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import assert_within, float32_attention, product_error
from tests.support.printed import assert_shown, printed_flags
from tests.support.reference import EPS32, as64


def _layer(values, X):
    """The snippet's f in float64, with the error bounds of its float32 projections X @ W."""
    W_Q, W_K, W_V = (as64(values[name]) for name in ("W_Q", "W_K", "W_V"))
    sizes = [np.abs(X) @ np.abs(W) for W in (W_Q, W_K, W_V)]
    return float32_attention(X @ W_Q, X @ W_K, X @ W_V, rounds=X.shape[-1], sizes=sizes)


def test_weights_are_an_average_and_the_output_averages_the_values(values):
    X, W_V = as64(values["X"]), as64(values["W_V"])
    exact = _layer(values, X)
    A, V, output = (as64(values[name]) for name in ("A", "V", "output"))
    assert_within(A, exact.weights, exact.weights_error, "weights")
    assert_within(output, exact.output, exact.output_error, "output")
    assert_within(V, X @ W_V, product_error(X, W_V), "V")
    # Weights: non-negative (exp is, exactly) and each row sums to one (float64: to rounding).
    assert (A >= 0).all() and (exact.weights >= 0).all()
    np.testing.assert_allclose(exact.weights.sum(axis=-1), 1.0, rtol=1e-12)
    assert_within(A.sum(axis=-1), 1.0, exact.weights_error.sum(axis=-1) + len(A) * EPS32, "row sums")
    # output = A @ V: both sides are within rounding of the exact weights times the exact values.
    gap = exact.weights_error @ np.abs(V) + exact.weights @ product_error(X, W_V)
    assert_within(output, A @ V, exact.output_error + gap + product_error(A, V), "A @ V")


def test_every_output_stays_within_the_range_of_the_values(values):
    X, W_V = as64(values["X"]), as64(values["W_V"])
    exact = _layer(values, X)
    V = X @ W_V
    # A convex combination of the values cannot leave their range, feature by feature (float64) ...
    low, high = V.min(axis=0), V.max(axis=0)
    assert ((low - 1e-12 <= exact.output) & (exact.output <= high + 1e-12)).all()
    # ... and the exact outputs keep clear of the ends by more than float32 rounding, so the
    # snippet's own comparison is True on every machine.
    margin = np.minimum(exact.output - low, high - exact.output)
    assert (margin > exact.output_error + product_error(X, W_V).max(axis=0)).all()
    assert values["inside"].all()


def test_doubling_x_does_not_double_the_output(values):
    X = as64(values["X"])
    once, twice = _layer(values, X), _layer(values, 2 * X)
    difference = np.abs(twice.output - 2 * once.output).max()
    assert difference > 1e-3  # not linear: the weights depend on X too
    error = twice.output_error.max() + 2 * once.output_error.max() + 2 * EPS32 * difference
    assert_within(values["difference"], difference, error, "largest difference")


def test_prints_the_largest_difference(printed, values):
    assert_shown(printed, values["difference"], decimals=2)


def test_prints_the_verdicts(printed):
    """output = A @ V, and every output inside its range over the values."""
    assert printed_flags(printed) == [True, True]

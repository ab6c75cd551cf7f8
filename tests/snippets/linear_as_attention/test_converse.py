"""linear_as_attention/converse.py: attention whose weights are recomputed from X is not linear."""

from __future__ import annotations

import itertools

import numpy as np

from tests.support.printed import assert_printed_in_order, exact, significant
from tests.support.reference import EPS64, as64, attention


def f(Z: np.ndarray) -> np.ndarray:
    """Self-attention with identity projections, in float64 NumPy."""
    return attention(Z, Z, Z)[0]


def test_converse_recomputed_weights_are_not_linear(values, printed):
    X, Y = as64(values["X"]), as64(values["Y"])
    scaling, additivity = np.abs(f(2 * X) - 2 * f(X)).max(), np.abs(f(X + Y) - f(X) - f(Y)).max()
    assert scaling > 0.1 and additivity > 0.1
    mean_token = X.mean(axis=0)
    np.testing.assert_array_equal(as64(values["mean_token"]), np.broadcast_to(mean_token, X.shape))
    scaled = values["scaled"]  # lam: f(lam X) / lam, from the largest lam to the smallest
    assert list(scaled) == sorted(scaled, reverse=True)
    gaps = []
    for lam, result in scaled.items():
        np.testing.assert_allclose(as64(result), f(lam * X) / lam, rtol=0, atol=64 * EPS64 * np.abs(X).max())
        gaps.append(np.abs(as64(result) - mean_token).max())
        # softmax(lam^2 Z) lies within a factor e^(+-lam^2 max|Z|) of the uniform 1/T, so
        # f(lam X) / lam lies within (e^(2 lam^2 max|Z|) - 1) max|X| of the mean token.
        Z = X @ X.T / np.sqrt(X.shape[-1])
        assert gaps[-1] <= np.expm1(2 * lam**2 * np.abs(Z).max()) * np.abs(X).max()
    assert all(a > b for a, b in itertools.pairwise(gaps))  # each smaller lam comes closer, ...
    assert gaps[-1] < 1e-5  # ... the last to 1e-5: the limit of the proof is the mean token
    # What is printed: the two gaps, then each lam and its distance to the mean token.
    expected = [significant(scaling, 2), significant(additivity, 2)]
    for lam, gap in zip(scaled, gaps, strict=True):
        expected += [exact(lam), significant(gap, 2)]
    assert_printed_in_order(printed, expected)

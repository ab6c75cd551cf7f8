"""linear_as_attention/exercise_single_token.py: linear for one token, not for two."""

import numpy as np

from tests.support.printed import assert_printed_in_order, exact, significant
from tests.support.reference import EPS64, as64, attention


def test_one_token_is_linear_and_two_are_not(values, printed):
    W_Q, W_K, W_V = (as64(values[name]) for name in ("W_Q", "W_K", "W_V"))
    C = W_V.shape[0]
    inputs, gaps = values["inputs"], values["gaps"]  # per number of tokens T
    assert sorted(inputs) == sorted(gaps) == [1, 2]

    def F(Z):
        return attention(Z @ W_Q, Z @ W_K, Z @ W_V)[0]

    # One token: its only weight is exactly 1, so F(X) = X W_V rounded, and the gaps are rounding
    # only: C products and sums per entry, for X, Y and X + Y, then two subtractions.
    X, Y = (as64(t) for t in inputs[1])
    assert X.shape == Y.shape == (1, C)
    np.testing.assert_allclose(F(X), X @ W_V, rtol=0, atol=0)
    rounding = 4 * (C + 2) * EPS64 * ((np.abs(X) + np.abs(Y)) @ np.abs(W_V)).max()
    assert max(gaps[1]) <= 2 * rounding
    # Two tokens: recomputed independently in float64 NumPy, and far from zero.
    X, Y = (as64(t) for t in inputs[2])
    assert X.shape == Y.shape == (2, C)
    expected = [np.abs(F(2 * X) - 2 * F(X)).max(), np.abs(F(X + Y) - F(X) - F(Y)).max()]
    sizes = []  # each input's largest score and value: what the rounding of attention scales with
    for Z in (X, Y, 2 * X, X + Y):
        scores = (Z @ W_Q) @ (Z @ W_K).T / np.sqrt(C)
        sizes.append((1 + np.abs(scores).max()) * np.abs(Z @ W_V).max())
    np.testing.assert_allclose(gaps[2], expected, rtol=0, atol=3 * 8 * C * EPS64 * max(sizes))
    assert min(expected) > 1e-3
    # What is printed: T, then its two gaps, to two significant digits.
    assert_printed_in_order(
        printed, [item for T, pair in gaps.items() for item in (exact(T), *(significant(g, 2) for g in pair))]
    )

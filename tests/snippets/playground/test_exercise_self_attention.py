"""playground/exercise_self_attention.py: the tie in token 0's weights, and one change that breaks it."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.printed import block_after, line_after, numbers
from tests.reference import attention


def test_equal_scores_tie_and_a_larger_feature_breaks_the_tie(printed):
    X = np.array(THREE_TOKENS)
    np.testing.assert_array_equal(block_after(printed, "X:"), X.ravel())
    _, weights = attention(X, X, X)
    np.testing.assert_allclose(
        numbers(line_after(printed, "token 0's dot products with tokens 0, 1, 2:")), X[0] @ X.T
    )
    np.testing.assert_allclose(numbers(line_after(printed, "token 0's weights:")), weights[0], atol=6e-5)
    assert weights[0, 0] == weights[0, 2]

    X_new = X.copy()
    X_new[0, 0] = 2.0
    _, weights_new = attention(X_new, X_new, X_new)
    np.testing.assert_allclose(
        numbers(line_after(printed, "after the change, dot products:")), X_new[0] @ X_new.T
    )
    np.testing.assert_allclose(
        numbers(line_after(printed, "after the change, weights:")), weights_new[0], atol=6e-5
    )
    assert weights_new[0].argmax() == 0

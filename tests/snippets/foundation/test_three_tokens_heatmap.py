"""foundation/three_tokens_heatmap.py: each query's strongest keys (ties included) and the two
equal scores, against float64 NumPy."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.printed import line_after, numbers
from tests.reference import attention


def test_each_querys_strongest_keys_ties_included(printed):
    X = np.array(THREE_TOKENS, dtype=np.float64)
    _, weights = attention(X, X, X)
    for t, row in enumerate(weights):
        expected = np.flatnonzero(np.isclose(row, row.max())).tolist()
        assert line_after(printed, f"query {t}: largest weight on key(s) ").strip() == str(expected)


def test_the_two_scores_the_page_says_are_equal(printed):
    X = np.array(THREE_TOKENS, dtype=np.float64)
    scores = numbers(line_after(printed, "scores x_0 . x_2 and x_0 . x_0:"))
    np.testing.assert_array_equal(scores, [X[0] @ X[2], X[0] @ X[0]])
    assert scores[0] == scores[1]

"""mental_model/plain_scores.py: plain dot-product scores are symmetric, self-preferring and
driven by vector length."""

from __future__ import annotations

import numpy as np

from tests.printed import block_after, flag, line_after, numbers
from tests.reference import softmax
from tests.snippets.mental_model.helpers import seeded_randn


def test_plain_scores_are_symmetric_self_preferring_and_length_driven(printed):
    (X,) = seeded_randn((5, 8))
    S = X @ X.T
    np.testing.assert_allclose(block_after(printed, "plain scores X X^T:", rows=5), S, atol=0.006)
    weights = softmax(S / np.sqrt(8))
    assert not np.allclose(weights, weights.T)
    assert line_after(printed, "scores symmetric:").split() == ["True", "weights", "symmetric:", "False"]

    top = S.argmax(axis=1)
    norms = np.linalg.norm(X, axis=1)
    shown_top, shown_lengths = line_after(printed, "each query's top key:").split("lengths:")
    assert shown_top.strip() == str(top.tolist())
    np.testing.assert_allclose(numbers(shown_lengths), norms, atol=0.006)
    # Cauchy-Schwarz, checked on the float64 data: the winner is the query or a longer vector.
    assert all(j == i or norms[j] > norms[i] for i, j in enumerate(top))
    assert flag(printed, "each top key is the query or a longer vector:")

    positive = [i for i in range(5) if i != 2 and S[i, 2] > 0]
    assert line_after(printed, "other queries with a positive score for token 2:").strip() == str(positive)
    previous = None
    for s in (1, 2, 4):
        X_loud = X.copy()
        X_loud[2] *= s
        expected = softmax(X_loud @ X_loud.T / np.sqrt(8))[:, 2]
        shown = numbers(line_after(printed, f"token 2 scaled by {s}, weight on it:"))
        np.testing.assert_allclose(shown, expected, atol=6e-4)
        if previous is not None:  # louder: more weight where the score is positive, less elsewhere
            for i in range(5):
                if i != 2:
                    assert (expected[i] > previous[i]) == (i in positive)
        previous = expected

"""mental_model/plain_scores.py: plain dot-product scores are symmetric, self-preferring and
driven by vector length."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import SAFETY, assert_within, product_error, softmax_error
from tests.support.printed import assert_shown
from tests.support.reference import EPS32, as64, softmax


def _scores(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """X X^T in float64, and how far float32 may be from it."""
    return X @ X.T, product_error(X, X.T)


def _loud_token(values) -> int:
    """The token the snippet made louder: the one row of X_loud that differs from X."""
    (row,) = np.flatnonzero((as64(values["X_loud"]) != as64(values["X"])).any(axis=1))
    return int(row)


def test_scores_are_symmetric_and_weights_are_not(values):
    X = as64(values["X"])
    scores, error = _scores(X)
    assert_within(values["scores"], scores, error, "scores")
    np.testing.assert_allclose(scores, scores.T, rtol=1e-14)  # x_i . x_j = x_j . x_i
    assert_within(values["scores"], values["scores"].T, 2 * error, "scores vs their transpose")
    # softmax(S / sqrt(C)) normalises each row by its own sum: the weights are not symmetric.
    scale = 1 / np.sqrt(X.shape[-1])
    weights = softmax(scores * scale)
    weights_error = softmax_error(scores * scale, error * scale + SAFETY * 2 * EPS32 * np.abs(scores) * scale)
    assert_within(values["A"], weights, weights_error, "weights")
    assert (np.abs(weights - weights.T) - weights_error - weights_error.T).max() > 0.1


def test_each_query_prefers_itself_or_a_longer_vector(values):
    X = as64(values["X"])
    scores, error = _scores(X)
    norms = np.linalg.norm(X, axis=1)
    assert_within(values["lengths"], norms, SAFETY * (X.shape[-1] + 2) * EPS32 * norms, "lengths")
    top = scores.argmax(axis=1)
    # Each row's winner leads by more than rounding could undo, so float32 finds the same one.
    for i, row in enumerate(scores):
        assert row[top[i]] - np.delete(row, top[i]).max() > 2 * error[i].max()
    assert values["top"].tolist() == top.tolist()
    # Cauchy-Schwarz: x_i . x_j <= |x_i| |x_j| < |x_i|^2 whenever |x_j| < |x_i|, so the winner is
    # the query itself or a longer vector.
    assert all(j == i or norms[j] > norms[i] for i, j in enumerate(top))
    assert any(j != i for i, j in enumerate(top))  # and a longer vector does win somewhere


def test_a_louder_token_takes_weight_where_its_score_is_positive(values):
    X = as64(values["X"])
    loud = _loud_token(values)
    scores, error = _scores(X)
    positive = [i for i in range(len(X)) if i != loud and scores[i, loud] > 0]
    assert all(abs(scores[i, loud]) > error[i, loud] for i in range(len(X)))  # no sign in doubt
    assert values["others"] == positive
    X_loud = X.copy()
    X_loud[loud] *= max(values["loud"])
    np.testing.assert_array_equal(as64(values["X_loud"]), X_loud)  # the last, largest scaling
    previous = None
    scale = 1 / np.sqrt(X.shape[-1])
    for s, weights in values["loud"].items():
        X_s = X.copy()
        X_s[loud] *= s  # one float32 rounding at most
        scores_s = X_s @ X_s.T
        size = np.abs(X_s) * (1 + EPS32)
        error_s = (
            product_error(size, size.T, rounds=1) * scale + SAFETY * 2 * EPS32 * np.abs(scores_s) * scale
        )
        expected = softmax(scores_s * scale)
        assert_within(weights, expected, softmax_error(scores_s * scale, error_s), f"weights at s = {s}")
        if previous is not None:  # louder: more weight where the score is positive, less elsewhere
            for i in range(len(X)):
                if i != loud:
                    assert (expected[i, loud] > previous[i, loud]) == (i in positive)
        previous = expected


def test_prints_the_scores_the_winners_the_lengths_and_the_weights(printed, values):
    loud = _loud_token(values)
    shown = [values["scores"], values["top"], values["lengths"], values["others"]]
    shown += [weights[:, loud] for weights in values["loud"].values()]
    assert_shown(printed, *shown, decimals=[2, 0, 2, 0] + [3] * len(values["loud"]))

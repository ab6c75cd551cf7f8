"""playground/exercise_self_attention.py: the tie in token 0's weights, and one change that breaks it."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import as64


def test_equal_scores_tie(values):
    X = as64(values["X"])
    tutorial = np.array(THREE_TOKENS)
    np.testing.assert_array_equal(X, tutorial[:, :2])
    np.testing.assert_array_equal(tutorial, np.hstack([X, X]))  # the tutorial's tokens: these twice
    dots = as64(values["dots"])
    np.testing.assert_array_equal(dots, X[0] @ X.T)  # small integers: exact in float32
    assert dots[0] == dots[2]  # token 2 adds a feature that meets a zero in token 0
    exact = float32_attention(X, X, X)
    assert exact.weights[0, 0] == exact.weights[0, 2]  # equal scores, equal weights (float64)
    assert_within(values["weights"], exact.weights, exact.weights_error, "weights")


def test_a_larger_feature_breaks_the_tie(values):
    X, X_new = as64(values["X"]), as64(values["X_new"])
    changed = np.argwhere(X_new != X)
    assert changed.tolist() == [[0, 0]]  # one number of token 0: its feature 0
    a = X_new[0, 0]
    assert a > 1
    dots_new = as64(values["dots_new"])
    np.testing.assert_array_equal(dots_new, X_new[0] @ X_new.T)
    # By hand (the answer's derivation): the self-score is a^2, token 2's score a.
    assert dots_new[0] == a**2 and dots_new[2] == a
    exact = float32_attention(X_new, X_new, X_new)
    assert_within(values["weights_new"], exact.weights, exact.weights_error, "weights after the change")
    # Token 0 now attends most to itself, by more than rounding could undo.
    w, error = exact.weights[0], exact.weights_error[0]
    assert w.argmax() == 0 and w[0] - np.delete(w, 0).max() > 2 * error.max()
    assert int(values["weights_new"][0].argmax()) == 0


def test_prints_the_tokens_the_scores_and_the_weights(printed, values):
    assert_shown(
        printed,
        values["X"],
        values["dots"],
        values["weights"][0],
        values["dots_new"],
        values["weights_new"][0],
    )

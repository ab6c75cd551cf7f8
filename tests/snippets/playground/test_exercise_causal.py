"""playground/exercise_causal.py: under a causal mask token 0 sees only itself, whatever the projections."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import EPS32, as64, causal


def test_causal_weights_and_output(values):
    X = as64(values["X"])
    np.testing.assert_array_equal(X, np.array(THREE_TOKENS)[:, :2])
    exact = float32_attention(X, X, X, allowed=causal(len(X)))
    assert_within(values["weights"], exact.weights, exact.weights_error, "causal weights")
    assert_within(values["output"], exact.output, exact.output_error, "causal output")
    weights = as64(values["weights"])
    assert (weights[np.triu_indices(len(X), k=1)] == 0).all()  # exp(-inf) = 0: exact
    # Token 0 has one key: exp(0) / exp(0) = 1 exactly, and its output is its own value.
    assert weights[0, 0] == 1
    np.testing.assert_array_equal(as64(values["output"])[0], X[0])


def test_the_last_token_sees_every_token(values):
    X = as64(values["X"])
    full = float32_attention(X, X, X)
    assert_within(values["full"][-1], full.weights[-1], full.weights_error[-1], "last row, no mask")
    # The same inputs and the same arithmetic with nothing masked in that row: the same float32 weights.
    np.testing.assert_array_equal(as64(values["full"])[-1], as64(values["weights"])[-1])


def test_no_projection_moves_token_0(values):
    X, W_Q, W_K = (as64(values[name]) for name in ("X", "W_Q", "W_K"))
    assert not np.allclose(W_Q, np.eye(2)) and not np.allclose(W_K, np.eye(2))
    exact = float32_attention(X @ W_Q, X @ W_K, X, allowed=causal(len(X)), rounds=2)
    assert_within(values["projected_weights"], exact.weights, exact.weights_error, "projected weights")
    np.testing.assert_array_equal(as64(values["projected_weights"])[0], [1, 0, 0])
    # One weight of exactly 1 times x_0, plus zeros: exact, up to the sum's rounding of nothing.
    assert_within(values["projected"][0], X[0], 2 * EPS32 * np.abs(X[0]), "token 0's output")


def test_prints_the_weights_and_outputs(printed, values):
    assert_shown(
        printed,
        values["weights"],
        values["output"],
        values["full"][-1],
        values["projected_weights"][0],
        values["projected"][0],
        values["X"][0],
    )

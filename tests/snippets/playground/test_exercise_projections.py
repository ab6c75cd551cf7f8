"""playground/exercise_projections.py: Q K^T = X W_Q W_K^T X^T is symmetric with identity projections,
and not once W_K[0, 1] = 1."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown, flag
from tests.support.reference import as64


def test_identity_projections_give_symmetric_dot_products(values):
    X = as64(values["X"])
    np.testing.assert_array_equal(X, np.array(THREE_TOKENS)[:, :2])
    dots = as64(values["dots_identity"])
    np.testing.assert_array_equal(dots, X @ X.T)  # small integers: exact in float32
    np.testing.assert_array_equal(dots, dots.T)


def test_one_entry_of_w_k_breaks_the_symmetry(values):
    X, W_Q, W_K = (as64(values[name]) for name in ("X", "W_Q", "W_K"))
    np.testing.assert_array_equal(W_Q, np.eye(2))
    assert np.argwhere(np.not_equal(W_K, np.eye(2))).tolist() == [[0, 1]] and W_K[0, 1] == 1
    dots = as64(values["dots"])
    np.testing.assert_array_equal(dots, X @ W_Q @ W_K.T @ X.T)  # small integers: exact
    assert (dots != dots.T).any()
    # The answer: token 1 now scores token 0 higher than before; token 0's score for token 1 is unchanged.
    before = as64(values["dots_identity"])
    assert dots[1, 0] > before[1, 0] and dots[0, 1] == before[0, 1]
    exact = float32_attention(X @ W_Q, X @ W_K, X, rounds=2)
    assert_within(values["weights"], exact.weights, exact.weights_error, "weights")
    # Token 1 gives token 0 more weight than with the identity, beyond rounding.
    identity = float32_attention(X, X, X)
    gap = exact.weights[1, 0] - identity.weights[1, 0]
    assert gap > exact.weights_error[1, 0] + identity.weights_error[1, 0]


def test_prints_the_dot_products_their_symmetry_and_the_weights(printed, values):
    assert_shown(printed, values["dots_identity"], values["dots"], values["weights"])
    assert [flag(line, "symmetric:") for line in printed.splitlines() if line.startswith("symmetric:")] == [
        True,
        False,
    ]

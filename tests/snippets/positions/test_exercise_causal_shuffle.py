"""positions/exercise_causal_shuffle.py: under a causal mask shuffled tokens do not give
shuffled outputs; the mask shuffled with them restores it."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown, printed_flags
from tests.support.reference import as64, causal


def _layer(values, X, allowed):
    """The snippet's f in float64, with the error bounds of its float32 projections X @ W."""
    W_Q, W_K, W_V = (as64(values[name]) for name in ("W_Q", "W_K", "W_V"))
    sizes = [np.abs(X) @ np.abs(W) for W in (W_Q, W_K, W_V)]
    return float32_attention(X @ W_Q, X @ W_K, X @ W_V, allowed=allowed, rounds=X.shape[-1], sizes=sizes)


def _permutation(matrix) -> list[int]:
    """perm with matrix @ X == X[perm], after checking that ``matrix`` is a permutation matrix."""
    P = as64(matrix)
    assert set(np.unique(P)) <= {0.0, 1.0} and (P.sum(axis=0) == 1).all() and (P.sum(axis=1) == 1).all()
    return P.argmax(axis=1).tolist()


def test_a_mask_moved_with_the_tokens_restores_equivariance(values):
    X, perm = as64(values["X"]), _permutation(values["P"])
    M = values["M"].numpy()
    np.testing.assert_array_equal(M, causal(len(X)))
    moved = M[perm][:, perm]  # new query i is old token perm[i]; it sees what that token saw
    np.testing.assert_array_equal(values["M_P"].numpy(), moved)  # 0/1 products: exact
    assert (moved != np.tril(moved)).any()  # no longer lower-triangular
    plain, shuffled, restored = (_layer(values, x, m) for x, m in ((X, M), (X[perm], M), (X[perm], moved)))
    assert_within(values["out_c"], plain.output, plain.output_error, "f(X, M)")
    assert_within(values["out_c_p"], shuffled.output, shuffled.output_error, "f(P X, M)")
    assert_within(values["out_moved"], restored.output, restored.output_error, "f(P X, P M P^T)")
    np.testing.assert_allclose(restored.output, plain.output[perm], rtol=1e-12, atol=1e-12)
    # Under the unmoved mask, the shuffled outputs are not the outputs shuffled: by more than rounding.
    gap = np.abs(shuffled.output - plain.output[perm]) - shuffled.output_error - plain.output_error[perm]
    assert gap.max() > 1e-3


def test_prints_the_verdicts_and_the_moved_mask(printed, values):
    assert printed_flags(printed) == [False, True]
    assert_shown(printed, values["M_P"].int(), decimals=0)

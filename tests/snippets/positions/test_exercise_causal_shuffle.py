"""positions/exercise_causal_shuffle.py: under a causal mask shuffled tokens do not give
shuffled outputs; the mask shuffled with them restores it."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import assert_within
from tests.support.positions_reference import permutation, projected_attention
from tests.support.printed import assert_shown, printed_flags
from tests.support.reference import as64, causal


def test_a_mask_moved_with_the_tokens_restores_equivariance(values):
    X, perm = as64(values["X"]), permutation(values["P"])
    M = values["M"].numpy()
    np.testing.assert_array_equal(M, causal(len(X)))
    moved = M[perm][:, perm]  # new query i is old token perm[i]; it sees what that token saw
    np.testing.assert_array_equal(values["M_P"].numpy(), moved)  # 0/1 products: exact
    assert (moved != np.tril(moved)).any()  # no longer lower-triangular
    plain, shuffled, restored = (
        projected_attention(values, x, m) for x, m in ((X, M), (X[perm], M), (X[perm], moved))
    )
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

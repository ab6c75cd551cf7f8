"""Token-by-token scores with and without the position offset, recomputed in float64 NumPy with the
paper's rotation (Su et al., 2021, equation 34)."""

import numpy as np

from tests.support.positions_reference import dot_rounding, rotate, rotation_rounding
from tests.support.printed import assert_printed_in_order, decimals, significant
from tests.support.reference import EPS32, as64


def test_the_offset_matters(values, printed):
    Q, K = as64(values["Q"]), as64(values["K"])
    T = len(Q)
    positions = np.arange(T)
    keys = rotate(K, positions)  # each key rotated at its own position
    full = rotate(Q, positions) @ keys.T  # (T, T): query t at t, key j at j
    forgot = rotate(Q, np.zeros(T)) @ keys.T  # every query at position 0
    tolerance = dot_rounding(
        rotate(Q, positions), keys, rotation_rounding(Q, EPS32), rotation_rounding(K, EPS32), EPS32
    )
    # All at once, and one token at a time with its offset: the same scores, up to rounding.
    np.testing.assert_array_less(np.abs(as64(values["full"]) - full), tolerance)
    rows, wrong_rows = values["rows"], values["forgot"]
    assert len(rows) == len(wrong_rows) == T
    for t in range(T):
        assert (np.abs(as64(rows[t]) - full[t, : t + 1]) <= tolerance[t, : t + 1]).all(), t
        assert (np.abs(as64(wrong_rows[t]) - forgot[t, : t + 1]) <= tolerance[t, : t + 1]).all(), t
    causal = np.tri(T, dtype=bool)
    assert values["right"] <= 2 * tolerance[causal].max()
    # Forgetting the offset changes the scores far beyond rounding.
    wrong = np.abs(forgot - full)[causal].max()
    assert abs(values["wrong"] - wrong) <= 2 * tolerance[causal].max()
    assert wrong > 4 * tolerance[causal].max()
    # What is printed: the two largest differences.
    assert_printed_in_order(printed, [significant(values["right"], 2), decimals(values["wrong"], 2)])

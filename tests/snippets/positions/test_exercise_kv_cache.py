"""Token-by-token scores with and without the position offset, recomputed in float64 NumPy with the
paper's rotation (Su et al., 2021, equation 34)."""

import numpy as np

from tests.snippets.positions.helpers import (
    EPS32,
    as_numpy,
    assert_printed_in_order,
    decimals,
    dot_rounding,
    rotate,
    rotation_rounding,
    significant,
)


def test_the_offset_matters(values, printed):
    Q, K = as_numpy(values["Q"]), as_numpy(values["K"])
    T = len(Q)
    positions = np.arange(T)
    keys = rotate(K, positions)  # each key rotated at its own position
    full = rotate(Q, positions) @ keys.T  # (T, T): query t at t, key j at j
    forgot = rotate(Q, np.zeros(T)) @ keys.T  # every query at position 0
    tolerance = dot_rounding(
        rotate(Q, positions), keys, rotation_rounding(Q, EPS32), rotation_rounding(K, EPS32), EPS32
    )
    # All at once, and one token at a time with its offset: the same scores, up to rounding.
    np.testing.assert_array_less(np.abs(as_numpy(values["full"]) - full), tolerance)
    rows, wrong_rows = values["rows"], values["forgot"]
    assert len(rows) == len(wrong_rows) == T
    for t in range(T):
        assert (np.abs(as_numpy(rows[t]) - full[t, : t + 1]) <= tolerance[t, : t + 1]).all(), t
        assert (np.abs(as_numpy(wrong_rows[t]) - forgot[t, : t + 1]) <= tolerance[t, : t + 1]).all(), t
    causal = np.tri(T, dtype=bool)
    assert values["right"] <= 2 * tolerance[causal].max()
    # Forgetting the offset changes the scores far beyond rounding.
    wrong = np.abs(forgot - full)[causal].max()
    assert abs(values["wrong"] - wrong) <= 2 * tolerance[causal].max()
    assert wrong > 4 * tolerance[causal].max()
    # What is printed: the two largest differences.
    assert_printed_in_order(printed, [significant(values["right"], 2), decimals(values["wrong"], 2)])

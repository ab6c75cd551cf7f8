"""linear_as_attention/zero_entries.py: zero entries of x give the literal steps nan."""

from __future__ import annotations

import numpy as np

from tests.support.printed import assert_printed_in_order, decimals, exact, printed_flags
from tests.support.reference import EPS32, as64


def test_zero_entries_break_the_literal_steps(values, printed):
    x = as64(values["x"])
    has_zero, zero_rows = (x == 0).any(axis=-1), ~x.any(axis=-1)
    assert (has_zero & ~zero_rows).any() and zero_rows.any()  # a zero entry, and a row of zeros
    # A row of zeros: 0 / 0 = nan weights. The others: log(0) = -inf where x_i = 0.
    weights = as64(values["attn_weights"])[:, 0]
    assert np.isnan(weights[zero_rows]).all() and not np.isnan(weights[~zero_rows]).any()
    logits = as64(values["logits"])[:, 0]
    rows = x[~zero_rows]
    with np.errstate(divide="ignore"):
        expected = np.log(np.abs(rows) / np.abs(rows).sum(-1, keepdims=True))
    np.testing.assert_array_equal(logits[~zero_rows] == -np.inf, rows == 0)
    finite = rows != 0
    tolerance = (x.shape[-1] + 4) * EPS32 * (1 + np.abs(expected[finite]).max())
    np.testing.assert_allclose(logits[~zero_rows][finite], expected[finite], rtol=0, atol=tolerance)
    # q = sqrt(d) logits (k^T)^-1: in a row with one -inf logit, q_j = -inf M_ij + finite, with
    # M = (k^T)^-1 and i the zero feature, so every q_j is infinite, of the sign of -M_ij.
    k, q = as64(values["k"]), as64(values["q"])[:, 0]
    for row in np.flatnonzero(has_zero & ~zero_rows):
        (i,) = np.flatnonzero(x[row] == 0)
        M = np.linalg.inv(k[row].T)[i]
        assert np.isinf(q[row]).all()
        # float32's inverse may differ from float64's by cond(k) eps in each entry
        sure = np.abs(M) > 8 * EPS32 * np.linalg.cond(k[row]) * np.abs(M).max()
        np.testing.assert_array_equal(np.sign(q[row])[sure], -np.sign(M)[sure])
        assert (q[row] > 0).any() and (q[row] < 0).any()  # both signs: +inf - inf in the scores
    # The rows with a zero have nan scores; the others do not.
    scores = as64(values["scores"])[:, 0]
    np.testing.assert_array_equal(np.isnan(scores).any(axis=-1), has_zero)
    # What is printed: row 0's logits to 2 decimals, its q in full, then nan in the scores per row.
    assert_printed_in_order(printed, [decimals(v, 2) for v in logits[0]] + [exact(v) for v in q[0]])
    assert printed_flags(printed) == np.isnan(scores).any(axis=-1).tolist()

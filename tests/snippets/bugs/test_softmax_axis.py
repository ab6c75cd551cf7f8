"""bugs/softmax_axis.py: the U-Net attention's weights with the softmax over the queries and over the
keys, recomputed exactly in float64 from the snippet's own inputs, each float32 result within its
rounding bound (tests/support/worst_case_rounding.py)."""

import numpy as np

from tests.support.printed import assert_shows, rounded, rounded_significant
from tests.support.worst_case_rounding import (
    assert_largest_difference,
    exact,
    matmul,
    plus,
    scaled,
    softmax,
    total,
)


def _weights(q, k, over: str):
    """softmax(q k^T / sqrt(d_k)) of (B, T, H, d_k) inputs, over the queries or the keys, as (B, H, i, j)."""
    heads_first = (0, 2, 1, 3)  # (B, H, T, d_k)
    q, k = (exact(a).map(lambda a: a.transpose(heads_first)) for a in (q, k))
    scores = scaled(matmul(q, k.mT), q.value.shape[-1] ** -0.5)  # (B, H, i, j)
    if over == "keys":
        return softmax(scores)
    return softmax(scores.mT).mT  # the queries i on the last axis, then back


def test_the_printed_weights_are_normalised_over_the_queries(printed, values):
    w = values["w"].double().numpy()  # head 0 of the bug: row i is query i, column j key j
    reference = _weights(values["q"], values["k"], over="queries").map(lambda a: a[0, 0])
    assert reference.holds(w)
    # Over the queries, each column sums to one; each of the float32 weights is off by its bound.
    assert (np.abs(w.sum(axis=0) - 1) <= reference.error.sum(axis=0) + 1e-15).all()
    # The rows do not: some row sum is off from one by more than rounding and than the printed
    # precision (three decimals), on any machine.
    row_sums = reference.value.sum(axis=1)
    assert (np.abs(row_sums - 1) - reference.error.sum(axis=1)).max() > 5e-4
    assert_shows(
        printed,
        rounded(w, 3)
        + rounded(w.sum(axis=1), 3)
        + rounded(w.sum(axis=0), 3)
        + rounded_significant(list(values["worst"].values()), 2),
    )


def test_the_check_fails_on_the_bug_and_passes_on_the_fix(values):
    tolerance = values["tolerance"]
    buggy, fixed = values["worst"].values()
    ranges, row_sums = [], []
    for worst, over in ((buggy, "queries"), (fixed, "keys")):
        row_sums.append(total(_weights(values["qs"], values["ks"], over=over)))  # over the keys j
        off = plus(row_sums[-1], exact(-1.0))
        ranges.append(assert_largest_difference(worst, (off, exact(np.zeros(off.value.shape)))))
    # Over the keys, the exact rows sum to one: the fix's difference is rounding alone.
    np.testing.assert_allclose(row_sums[1].value, 1.0, rtol=0, atol=1e-12)
    # The bug's is no rounding: the check fails on every machine.
    assert ranges[0][0] > tolerance and buggy > tolerance
    # The page promises the fix passes.
    assert fixed < tolerance


def test_the_picture_shows_columns_summing_to_one_above_rows_summing_to_one(figure, values):
    """The numbers written in each panel are the weights of head 0 at two decimals: over the queries
    (the bug) and over the keys (the fix), recomputed above in exact arithmetic."""
    for ax, over, axis in zip(figure.axes[:2], ("queries", "keys"), (0, 1), strict=True):
        weights = _weights(values["q"], values["k"], over=over).value[0, 0]  # (i, j)
        shown = np.array([float(t.get_text()) for t in ax.texts]).reshape(weights.shape)
        np.testing.assert_allclose(shown, weights, rtol=0, atol=0.005 + 1e-6)
        np.testing.assert_allclose(weights.sum(axis=axis), 1.0, rtol=0, atol=1e-12)

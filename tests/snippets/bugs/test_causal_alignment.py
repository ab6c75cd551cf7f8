"""bugs/causal_alignment.py: top-left and bottom-right causal masks for L new queries against S keys,
written out with np.tri (tests/support/reference.py), and the attention recomputed exactly in float64 from the
snippet's own inputs, each float32 result within its rounding bound (tests/support/worst_case_rounding.py)."""

import numpy as np

from tests.support.printed import assert_shows, rounded, rounded_significant
from tests.support.reference import causal
from tests.support.worst_case_rounding import assert_largest_difference, attention, exact


def _last(q, k, v, L, lower_right):
    """The last L queries alone against every key. Query i (0-based) sees keys 0..i (top-left), or
    0..S-L+i (bottom-right: the queries are the last L of the S positions)."""
    S = k.value.shape[1]
    return attention(q.map(lambda a: a[:, -L:]), k, v, allowed=causal(L, S, lower_right=lower_right))[0]


def test_the_new_query(printed, values):
    q, k, v = (exact(values[name]) for name in "qkv")
    S = values["S"]
    full = attention(q, k, v, allowed=causal(S))[0]
    top_left = _last(q, k, v, 1, lower_right=False)
    assert full.holds(values["full"]) and top_left.holds(values["new"])
    np.testing.assert_allclose(top_left.value[0, 0], v.value[0, 0], rtol=0, atol=1e-12)  # it sees key 0 only
    L = values["mask"].shape[0]
    np.testing.assert_array_equal(values["mask"], causal(L, S, lower_right=True))
    bottom_right = _last(q, k, v, L, lower_right=True)
    assert bottom_right.holds(values["fixed"])
    np.testing.assert_allclose(bottom_right.value, full.value[:, -L:], rtol=0, atol=1e-12)  # the full pass's
    shown = [values["full"][0, -1], values["new"][0, 0], values["v"][0, 0], values["fixed"][0, 0]]
    assert_shows(printed, [number for row in shown for number in rounded(row, 3)])


def test_the_check(printed, values):
    q, k, v = (exact(values[name]) for name in ("qs", "ks", "vs"))
    S, tolerance = values["S"], values["tolerance"]
    full = attention(q, k, v, allowed=causal(S))[0]
    assert full.holds(values["full_pass"])
    top_left, bottom_right = values["worst"].values()  # is_causal=True, then the bottom-right mask
    ranges = []
    for worst, lower_right in ((top_left, False), (bottom_right, True)):
        pairs = [(_last(q, k, v, L, lower_right), full.map(lambda a, L=L: a[:, -L:])) for L in range(1, S)]
        ranges.append(assert_largest_difference(worst, *pairs))
        if lower_right:  # the last L rows of the full pass, exactly
            for last, rows in pairs:
                np.testing.assert_allclose(last.value, rows.value, rtol=0, atol=1e-12)
    assert ranges[0][0] > tolerance and top_left > tolerance  # fails on every machine
    assert bottom_right < tolerance  # rounding alone, which the page promises stays below it
    assert_shows(printed, rounded_significant([top_left, bottom_right], 2))

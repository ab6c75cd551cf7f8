"""bugs/scale_by_width.py: the head scaled by 1/sqrt(C) and by 1/sqrt(d_k), recomputed exactly in
float64 from the snippet's own inputs and weights, each float32 result within its rounding bound
(tests/support/worst_case_rounding.py)."""

import numpy as np

from tests.support.printed import assert_shows, rounded, rounded_significant
from tests.support.reference import causal
from tests.support.worst_case_rounding import assert_largest_difference, attention, exact, matmul


def _head(x, values, scale):
    """One causal head from the input x, in exact arithmetic with the float32 rounding bounded."""
    X = exact(x)
    q, k, v = (matmul(X, exact(values[name])) for name in ("W_Q", "W_K", "W_V"))
    return attention(q, k, v, allowed=causal(x.shape[1]), scale=scale)


def _scales(values, x):
    """The bug's 1/sqrt(C), C the width of x, and the right 1/sqrt(d_k), d_k the width of a key."""
    return [x.shape[-1] ** -0.5, values["W_K"].shape[1] ** -0.5]


def test_the_weights_of_each_scale(printed, values):
    x = values["x"]
    weights = list(values["weights"].values())  # buggy, fixed
    reference = [_head(x, values, scale)[1] for scale in _scales(values, x)]
    for computed, expected in zip(weights, reference, strict=True):
        assert expected.holds(computed)
    # A softmax at a higher temperature is flatter: in every row that sees keys with different
    # scores, the largest weight gets smaller and the smallest larger (d/dT of log w_max <= 0).
    buggy, fixed = (expected.value[0] for expected in reference)
    allowed = causal(x.shape[1])
    for row in range(1, x.shape[1]):  # row 0 sees one key only: weight 1 either way
        seen = allowed[row]
        assert buggy[row, seen].max() < fixed[row, seen].max(), row
        assert buggy[row, seen].min() > fixed[row, seen].min(), row
    last_rows = [number for w in weights for number in rounded(w[0, -1], 3)]
    assert_shows(printed, last_rows + rounded_significant(list(values["worst"].values()), 2))


def test_the_check_fails_on_the_bug_and_passes_on_the_fix(values):
    xs, tolerance = values["xs"], values["tolerance"]
    # The snippet's q, k and v are xs W_Q, xs W_K and xs W_V in float32; PyTorch's SDPA on them is
    # their exact attention, up to rounding.
    XS = exact(xs)
    for name in "qkv":
        assert matmul(XS, exact(values[f"W_{name.upper()}"])).holds(values[name]), name
    expected, _ = attention(*(exact(values[name]) for name in "qkv"), allowed=causal(xs.shape[1]))
    assert expected.holds(values["expected"])
    buggy, fixed = values["worst"].values()
    buggy_scale, fixed_scale = _scales(values, xs)
    buggy_range = assert_largest_difference(buggy, (_head(xs, values, buggy_scale)[0], expected))
    assert_largest_difference(fixed, (_head(xs, values, fixed_scale)[0], expected))
    # The bug's difference is no rounding: the check fails on every machine.
    assert buggy_range[0] > tolerance and buggy > tolerance
    # The fix differs from PyTorch by rounding only (checked above), and the page promises that
    # this difference stays below its tolerance.
    assert fixed < tolerance


def test_the_picture_shows_both_heads_weights(figure, values):
    """Each panel writes its causal weights at two decimals: the bug's, then the fix's."""
    x = values["x"]
    allowed = causal(x.shape[1])
    for ax, scale in zip(figure.axes[:2], _scales(values, x), strict=True):
        weights = _head(x, values, scale)[1].value[0]
        shown = [float(t.get_text()) for t in ax.texts]
        np.testing.assert_allclose(shown, weights[allowed], rtol=0, atol=0.005 + 1e-6)

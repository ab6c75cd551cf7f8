"""bugs/exercise_float_mask.py: an additive mask made boolean with .bool() (True where non-zero) and
with == 0, worked out by hand; the attention recomputed exactly in float64 from the snippet's own
inputs, each float32 result within its rounding bound (tests/support/worst_case_rounding.py)."""

import numpy as np

from tests.support.printed import assert_shows
from tests.support.reference import causal
from tests.support.worst_case_rounding import attention, exact


def test_the_boolean_mask_marks_the_future(printed, values):
    T = values["T"]
    # The additive mask: 0 where query i may see key j (j <= i), the lowest float32 where not.
    np.testing.assert_array_equal(values["additive"], np.where(causal(T), 0.0, np.finfo(np.float32).min))
    # bool() is True for every non-zero entry: the blocked ones.
    np.testing.assert_array_equal(values["mask"], ~causal(T))
    assert_shows(printed, [(a, 0.0) for a in (~causal(T)).astype(float).ravel()])


def test_the_check(values):
    q, k, v = (exact(values[name]) for name in "qkv")
    T = values["T"]
    right, _ = attention(q, k, v, allowed=causal(T))
    assert right.holds(values["causal"])  # is_causal=True
    assert right.holds(values["out"])  # the fixed mask, == 0, the last one the exercise ran
    buggy, fixed = values["same"].values()
    # With .bool() each query sees the keys after it: allclose(out, causal) (rtol 1e-5, atol 1e-8)
    # fails on every machine, as some entry differs by more than rounding and the tolerance.
    inverted, _ = attention(q, k, v, allowed=~causal(T))
    apart = np.abs(inverted.value - right.value) - inverted.error - right.error
    assert (apart > 1e-8 + 1e-5 * (np.abs(right.value) + right.error)).any()
    assert buggy is False
    assert fixed is True  # the same as is_causal=True, up to the rounding bounded above

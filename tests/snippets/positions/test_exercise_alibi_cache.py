"""The bias row of a query at position 4 (and, wrongly, at 0) against keys 0..4, slope 1/2 (by hand)."""

import numpy as np

from tests.printed import flag, line_after, numbers


def test_rows(printed):
    np.testing.assert_allclose(numbers(line_after(printed, "head 0, query at 4:")), [-2, -1.5, -1, -0.5, 0])
    np.testing.assert_allclose(numbers(line_after(printed, "head 0, query at 0:")), [0, -0.5, -1, -1.5, -2])
    assert flag(printed, "the wrong row rewards the oldest key most:") is True

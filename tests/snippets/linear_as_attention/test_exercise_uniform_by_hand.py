"""linear_as_attention/exercise_uniform_by_hand.py: uniform weights and d_in x_i w_i give x W^T."""

import numpy as np

from tests.support.printed import assert_printed_in_order, exact
from tests.support.reference import EPS32, as64


def test_values_and_output_are_the_hand_computed_ones(values, printed):
    x, W, v = as64(values["x"]), as64(values["W"]), as64(values["v"])
    d_in = values["d_in"]
    assert d_in == x.shape[0]
    # v_i = d_in x_i w_i, w_i the rows of W^T: small integers, exact in float32.
    np.testing.assert_array_equal(v, d_in * x[:, None] * W.T)
    # By hand, for the exercise's x = (1, -2, 0) and W^T = [[1, 0], [0, 1], [2, -1]]:
    # the values 3 (1, 0), 3 (-2) (0, 1) and 0, and x W^T = (1, -2).
    assert x.tolist() == [1, -2, 0] and W.T.tolist() == [[1, 0], [0, 1], [2, -1]]
    np.testing.assert_array_equal(v, [[3 * 1 * 1, 3 * 1 * 0], [3 * -2 * 0, 3 * -2 * 1], [0, 0]])
    np.testing.assert_array_equal(x @ W.T, [1 * 1 + -2 * 0 + 0 * 2, 1 * 0 + -2 * 1 + 0 * -1])
    # q = 0: every score is 0 and every weight 1/d_in, so y is the mean of the values, x W^T.
    assert not as64(values["q"]).any()
    np.testing.assert_array_equal(v.mean(axis=0), x @ W.T)
    # float32: 1/d_in rounded, d_in products and sums, each within eps of the sum of |v_i| / d_in
    tolerance = (d_in + 2) * EPS32 * np.abs(v).sum(axis=0).max() / d_in
    np.testing.assert_allclose(as64(values["y"])[0], x @ W.T, rtol=0, atol=tolerance)
    # What is printed: the values, the attention output (in full), and x W^T.
    shown = [*v.flatten(), *as64(values["y"])[0], *(x @ W.T)]
    assert_printed_in_order(printed, [exact(e) for e in shown])

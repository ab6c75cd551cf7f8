"""linear_as_attention/exercise_uniform_by_hand.py: uniform weights and d_in x_i w_i give x W^T."""

import numpy as np

from tests.printed import block_after, line_after, numbers


def test_values_and_output_are_the_hand_computed_ones(printed):
    # v_i = 3 x_i w_i with x = (1, -2, 0) and w_i the rows of W^T = [[1, 0], [0, 1], [2, -1]].
    by_hand = [[3 * 1 * 1, 3 * 1 * 0], [3 * -2 * 0, 3 * -2 * 1], [0, 0]]
    np.testing.assert_array_equal(block_after(printed, "values, one row per input feature:", 3), by_hand)
    y = [1 * 1 + -2 * 0 + 0 * 2, 1 * 0 + -2 * 1 + 0 * -1]  # x W^T, by hand: (1, -2)
    np.testing.assert_allclose(numbers(line_after(printed, "attention output:")), y, atol=1e-6)
    np.testing.assert_array_equal(numbers(line_after(printed, "x W^T:")), y)

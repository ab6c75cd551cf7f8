"""linear_as_attention/exercise_weights.py: the weights |x| / ||x||_1, and the zero feature masked."""

from fractions import Fraction

import numpy as np

from tests.printed import line_after, numbers


def test_weights_are_the_hand_computed_fractions(printed):
    x = [3, -1, 0, 2]
    by_hand = [Fraction(abs(entry), sum(abs(e) for e in x)) for entry in x]  # 1/2, 1/6, 0, 1/3
    np.testing.assert_allclose(
        numbers(line_after(printed, "weights:")), [float(f) for f in by_hand], atol=6e-7
    )
    assert numbers(line_after(printed, "masked keys:")).tolist() == [x.index(0)]

"""The encoding's values and wavelengths, from the formula of Vaswani et al. (2017), section 3.5."""

import math

import numpy as np

from tests.printed import line_after, numbers

T, D = 64, 32  # the snippet's sizes


def test_shape_and_first_values(printed):
    assert numbers(line_after(printed, "PE:")).tolist() == [T, D]
    expected = [math.sin(1.0), math.cos(1.0), math.sin(10000 ** (-2 / D)), math.cos(10000 ** (-2 / D))]
    np.testing.assert_allclose(
        numbers(line_after(printed, "position 1, first four features:")), expected, atol=5e-5
    )


def test_wavelengths_run_from_2_pi_to_nearly_2_pi_times_the_base(printed):
    """Pair i turns once every 2 pi 10000^(2i/d) positions."""
    fastest = numbers(line_after(printed, "pair 0:"))
    slowest = numbers(line_after(printed, f"pair {D // 2 - 1}:"))
    np.testing.assert_allclose(fastest[0], 2 * math.pi, atol=0.05)
    np.testing.assert_allclose(slowest[0], 2 * math.pi * 10000 ** ((D - 2) / D), atol=0.05)

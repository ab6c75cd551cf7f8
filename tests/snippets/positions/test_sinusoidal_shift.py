"""PE[t + r] = PE[t] R_r: the printed error against a hand bound, the block against cos and sin."""

import math

import numpy as np

from tests.printed import block_after, flag, number_after

R = 5  # the snippet's shift


def test_the_shift_is_exact_up_to_float32_storage(printed):
    """Each entry of the float32 encoding is off by at most 2^-24 (it is at most 1 in size);
    PE[t] R_r adds two of them times cos and sin, so the error is at most (1 + sqrt 2) 2^-24."""
    assert number_after(printed, "max |PE[t + r] - PE[t] R_r| over all t:") <= (1 + math.sqrt(2)) * 2**-24


def test_the_fastest_block_turns_by_r_radians(printed):
    assert flag(printed, "R_r is a rotation:") is True
    c, s = math.cos(R), math.sin(R)  # the fastest pair has frequency 1
    np.testing.assert_allclose(block_after(printed, "block of the fastest pair:"), [c, -s, s, c], atol=5e-5)

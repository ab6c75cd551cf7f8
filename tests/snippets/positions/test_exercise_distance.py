"""|PE[t + r] - PE[t]|^2 = sum over pairs of |(sin, cos)(a + r w) - (sin, cos)(a)|^2 = sum_i (2 - 2 cos r w_i),
the same for every t (a hand derivation)."""

import numpy as np

from tests.support.positions_reference import frequencies, sinusoidal
from tests.support.printed import assert_printed_in_order, decimals, exact
from tests.support.reference import EPS32, EPS64, as64


def test_every_distance_is_the_closed_form(values):
    PE = as64(values["PE"])
    T, C = PE.shape
    # The encoding, stored in float32: each entry (at most 1 in size) is off by at most eps / 2.
    np.testing.assert_allclose(PE, sinusoidal(T, C), rtol=0, atol=EPS32 / 2 + 4 * EPS64 * T)
    # So a difference is off by eps per entry, and a distance by at most sqrt(C) eps.
    tolerance = np.sqrt(C) * EPS32 + 8 * C * EPS64 * T
    for r, dist in values["distances"].items():
        assert dist.shape == (T - r,)  # one per t
        expected = np.sqrt((2 - 2 * np.cos(r * frequencies(C))).sum())
        assert (np.abs(as64(dist) - expected) <= tolerance).all(), r


def test_prints_each_shift_with_its_smallest_and_largest_distance(values, printed):
    expected = []
    for r, dist in values["distances"].items():
        expected += [exact(r), decimals(dist.min().item(), 6), decimals(dist.max().item(), 6)]
    assert_printed_in_order(printed, expected)

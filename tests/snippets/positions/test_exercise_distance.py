"""|PE[t + r] - PE[t]|^2 = sum over pairs of |(sin, cos)(a + r w) - (sin, cos)(a)|^2 = sum_i (2 - 2 cos r w_i),
the same for every t (a hand derivation)."""

import numpy as np

from tests.printed import line_after, numbers

D = 16


def test_min_and_max_are_the_closed_form(printed):
    w = 10000.0 ** (-np.arange(0, D, 2) / D)
    for r in (1, 5, 50):
        expected = np.sqrt((2 - 2 * np.cos(r * w)).sum())
        low, high = numbers(line_after(printed, f"r = {r:2}:"))
        assert abs(low - expected) < 2e-6 and abs(high - expected) < 2e-6

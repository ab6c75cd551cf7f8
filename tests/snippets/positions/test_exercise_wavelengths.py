"""Pair i turns once every 2 pi base^(2i/d) positions; it turns fully within the context when
i <= (d/2) ln(context / 2 pi) / ln(base)."""

import math

from tests.printed import line_after, numbers

D, CONTEXT = 64, 2048


def test_counts_and_slowest_wavelength(printed):
    for base in (10000.0, 500000.0):
        last = (D / 2) * math.log(CONTEXT / (2 * math.pi)) / math.log(base)
        count = math.floor(last) + 1  # i = 0, 1, ..., floor(last)
        turns, pairs, slowest = numbers(line_after(printed, f"base {base:>8.0f}:"))
        assert (turns, pairs) == (count, D // 2)
        assert abs(slowest - 2 * math.pi * base ** ((D - 2) / D)) / slowest < 5e-3

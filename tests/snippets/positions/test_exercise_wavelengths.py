"""Pair i turns once every 2 pi base^(2i/d) positions; it turns fully within the context when
i <= (d/2) ln(context / 2 pi) / ln(base)."""

import itertools
import math

import numpy as np

from tests.support.printed import assert_printed_in_order, exact, significant
from tests.support.reference import EPS64


def full_turns(d: int, context: int, base: float) -> int:
    """How many pairs turn fully: i = 0, 1, ..., floor((d/2) ln(context / 2 pi) / ln(base))."""
    return math.floor((d / 2) * math.log(context / (2 * math.pi)) / math.log(base)) + 1


def test_counts_and_slowest_wavelength(values, printed):
    d, context, wavelengths = values["d_k"], values["context"], values["wavelengths"]
    expected = []
    for base, per_pair in wavelengths.items():
        formula = 2 * np.pi * base ** (np.arange(0, d, 2) / d)
        np.testing.assert_allclose(per_pair, formula, rtol=8 * EPS64, atol=0)
        # No wavelength sits at the edge of the context, where rounding could decide the count.
        assert (np.abs(formula - context) > 8 * EPS64 * context).all()
        count = full_turns(d, context, base)
        assert (formula <= context).sum() == count
        expected += [exact(base), exact(count), exact(d // 2), significant(per_pair[-1], 3)]
    # A larger base makes more pairs slow: fewer turn fully.
    counts = [full_turns(d, context, base) for base in sorted(wavelengths)]
    assert len(counts) > 1 and all(a > b for a, b in itertools.pairwise(counts))
    # What is printed: each base, how many of the pairs turn fully, and the slowest wavelength.
    assert_printed_in_order(printed, expected)

"""linear_as_attention/conditioning.py: the construction's error grows like eps times cond(k)."""

from __future__ import annotations

import numpy as np

from tests.printed import table_rows
from tests.snippets.linear_as_attention.helpers import EPS32, EPS64, bound, float64_data


def test_conditioning_error_grows_like_eps_times_cond(printed):
    rows = table_rows(printed)  # cond(k) = 10^e, then the float32 and float64 errors in eps
    assert [row[0] for row in rows] == [f"$10^{{{e}}}$" for e in range(0, 15, 2)]
    _, x, W = float64_data()
    spread_factor = (bound(x, W, 1.0) / (16 * np.abs(x).sum(-1) * np.abs(W).max())).max()
    for column, eps in ((1, EPS32), (2, EPS64)):
        exponents = np.array([2 * i for i, row in enumerate(rows) if row[column]])
        in_eps = np.array([float(row[column]) for row in rows if row[column]])
        # Measured up to the largest cond(k) with eps cond(k) <= 1, and no further.
        assert exponents.max() == max(e for e in range(0, 15, 2) if 10.0**e * eps <= 1)
        # Bounded by gamma cond(k) (in units of eps ||x||_1 max|W|) ...
        assert (in_eps <= 16 * spread_factor * 10.0**exponents).all()
        # ... and growing like cond(k): slope of log10(error) against log10(cond) near one.
        slope = np.polyfit(exponents[1:], np.log10(in_eps[1:]), 1)[0]
        assert 0.8 < slope < 1.2
        # What the page says: about one eps at cond(k) = 1, below eps cond(k) beyond.
        assert exponents[0] == 0 and 0.5 < in_eps[0] < 2
        assert (in_eps[1:] < 10.0 ** exponents[1:]).all()

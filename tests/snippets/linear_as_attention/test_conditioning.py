"""linear_as_attention/conditioning.py: the construction's error grows like eps times cond(k)."""

from __future__ import annotations

import numpy as np
import torch

from tests.support.linear_as_attention_bound import bound
from tests.support.printed import assert_printed_in_order, significant
from tests.support.reference import as64


def largest_errors(points: list[tuple[float, float]]) -> dict[float, float]:
    """The largest error for each condition number, in the order measured."""
    largest: dict[float, float] = {}
    for kappa, error in points:
        largest[kappa] = max(error, largest.get(kappa, 0.0))
    return largest


def test_conditioning_error_grows_like_eps_times_cond(values):
    x, W = as64(values["x"]), as64(values["W"])
    # The errors are relative to the size of the values, ||x||_1 max|W|, per row.
    np.testing.assert_allclose(as64(values["scale"])[:, 0], np.abs(x).sum(-1) * np.abs(W).max())
    spread_factor = (bound(x, W, 1.0) / (16 * np.abs(x).sum(-1) * np.abs(W).max())).max()
    assert set(values["results"]) == {torch.float32, torch.float64}
    for dtype, points in values["results"].items():
        eps = torch.finfo(dtype).eps
        largest = largest_errors(points)
        kappas = np.array(list(largest))
        in_eps = np.array(list(largest.values())) / eps
        # Condition numbers 1, 100, 10^4, ... up to the largest with eps cond(k) <= 1, and no further.
        np.testing.assert_allclose(kappas, 100.0 ** np.arange(len(kappas)))
        assert kappas.max() * eps <= 1 < 100 * kappas.max() * eps
        # Bounded by gamma cond(k) (in units of eps ||x||_1 max|W|) ...
        assert (in_eps <= 16 * spread_factor * kappas).all()
        # ... and growing like cond(k): slope of log10(error) against log10(cond) near one.
        slope = np.polyfit(np.log10(kappas[1:]), np.log10(in_eps[1:]), 1)[0]
        assert 0.8 < slope < 1.2
        # What the page says: about one eps at cond(k) = 1, below eps cond(k) beyond.
        assert kappas[0] == 1 and 0.5 < in_eps[0] < 2
        assert (in_eps[1:] < kappas[1:]).all()


def test_table_shows_the_largest_errors_in_eps(values, printed):
    """One row per condition number: the float32 error (none beyond its range), then float64's."""
    largest = {dtype: largest_errors(points) for dtype, points in values["results"].items()}
    expected = []
    for kappa in sorted(set().union(*largest.values())):
        for dtype, errors in largest.items():
            if kappa in errors:
                expected.append(significant(errors[kappa] / torch.finfo(dtype).eps, 1))
    assert_printed_in_order(printed, expected)

"""mental_model/exercise_variance_mean.py: sampled mean and variance of q · k against the formulas
derived by hand for components of mean mu and variance sigma^2."""

from __future__ import annotations

import numpy as np

from tests.printed import block_after, line_starting


def test_sampled_moments_match_the_derivation(printed):
    mu, sigma, n = 0.5, 1.0, 10_000
    widths = [16, 64, 256]
    table = block_after(printed, line_starting(printed, " d_k"), rows=len(widths))
    for (d_k, mean, derived_mean, variance, derived_variance, scaled), width in zip(
        table, widths, strict=True
    ):
        assert d_k == width
        # By hand: E[q_m k_m] = mu^2 and Var(q_m k_m) = E[q_m^2] E[k_m^2] - mu^4 = (sigma^2 + mu^2)^2 - mu^4,
        # for each of d_k independent terms.
        expected_mean = d_k * mu**2
        expected_variance = d_k * ((sigma**2 + mu**2) ** 2 - mu**4)
        np.testing.assert_allclose(
            [derived_mean, derived_variance], [expected_mean, expected_variance], atol=0.06
        )
        assert abs(mean - expected_mean) < 4 * np.sqrt(expected_variance / n)  # 4 standard errors
        np.testing.assert_allclose(variance, expected_variance, rtol=0.06)
        np.testing.assert_allclose(scaled, expected_variance / d_k, rtol=0.06)
        assert abs(scaled - 1) > 0.3  # not the unit variance of zero-mean components

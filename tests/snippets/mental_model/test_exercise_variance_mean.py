"""mental_model/exercise_variance_mean.py: sampled mean and variance of q · k against the formulas
derived by hand for components of mean mu and variance sigma^2, with margins from the sample size."""

from __future__ import annotations

import math

import numpy as np

from tests.support.printed import assert_shown

SE = 4  # standard errors allowed between a sampled moment and its expectation


def moments(mu: float, sigma: float, d_k: int) -> tuple[float, float, float]:
    """Mean, variance and fourth cumulant of q · k = sum of d_k independent q_m k_m, q_m and k_m
    independent N(mu, sigma^2).

    E[(q_m k_m)^r] = E[q_m^r]^2, from the normal's raw moments; the cumulants of a sum of
    independent terms add up.
    """
    m1, m2 = mu, mu**2 + sigma**2
    m3, m4 = mu**3 + 3 * mu * sigma**2, mu**4 + 6 * mu**2 * sigma**2 + 3 * sigma**4
    e1, e2, e3, e4 = m1**2, m2**2, m3**2, m4**2  # raw moments of one term q_m k_m
    kappa2 = e2 - e1**2
    kappa4 = e4 - 4 * e3 * e1 - 3 * e2**2 + 12 * e2 * e1**2 - 6 * e1**4
    return d_k * e1, d_k * kappa2, d_k * kappa4


def test_derived_columns_are_the_hand_derivation(values):
    mu, sigma = values["mu"], values["sigma"]
    for d_k, (_, derived_mean, _, derived_variance, _) in values["rows"].items():
        # By hand: E[q_m k_m] = mu^2 and Var(q_m k_m) = E[q_m^2] E[k_m^2] - mu^4 = (sigma^2 + mu^2)^2 - mu^4,
        # for each of d_k independent terms.
        expected_mean, expected_variance = d_k * mu**2, d_k * ((sigma**2 + mu**2) ** 2 - mu**4)
        np.testing.assert_allclose(
            [derived_mean, derived_variance], [expected_mean, expected_variance], rtol=1e-12
        )
        np.testing.assert_allclose(
            moments(mu, sigma, d_k)[:2], [expected_mean, expected_variance], rtol=1e-12
        )


def test_sampled_columns_are_the_samples_moments(values):
    """Recomputed from the snippet's own samples: two-pass, with exactly rounded sums."""
    for d_k, (mean, _, variance, _, per_width) in values["rows"].items():
        x = values["samples"][d_k]
        assert x.shape == (values["n"],)
        sample_mean = math.fsum(x) / x.size
        sample_variance = math.fsum((x - sample_mean) ** 2) / x.size
        np.testing.assert_allclose([mean, variance], [sample_mean, sample_variance], rtol=1e-9)
        np.testing.assert_allclose(per_width, sample_variance / d_k, rtol=1e-9)


def test_samples_match_the_theory_within_their_standard_errors(values):
    mu, sigma, n = values["mu"], values["sigma"], values["n"]
    for d_k, (mean, _, variance, _, per_width) in values["rows"].items():
        expected_mean, expected_variance, kappa4 = moments(mu, sigma, d_k)
        # Standard errors of a sample mean and of a sample variance of n independent draws.
        mean_error = SE * math.sqrt(expected_variance / n)
        variance_error = SE * math.sqrt((kappa4 + 2 * expected_variance**2) / n)
        assert abs(mean - expected_mean) < mean_error
        assert abs(variance - expected_variance) < variance_error
        # Var / d_k is sigma^4 + 2 sigma^2 mu^2 = 1.5, not the 1 of zero-mean components, and the
        # samples tell the two apart.
        assert abs(per_width - expected_variance / d_k) < variance_error / d_k
        assert abs(per_width - sigma**4) > variance_error / d_k


def test_prints_each_row(printed, values):
    rows = [[d_k, *row] for d_k, row in values["rows"].items()]
    assert_shown(printed, *rows, decimals=2)

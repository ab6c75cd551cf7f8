"""The decay numbers from closed forms: for q = k = ones each pair contributes 2 cos(r theta_i);
the paper's bound is the mean over j of |sum_{i<j} e^(i r theta_i)| (Su et al., 2021, section 3.4.3)."""

import numpy as np
import torch

from tests.printed import line_after, numbers

D = 128
THETA = 10000.0 ** (-np.arange(0, D, 2) / D)


def _random_cosine(r: int) -> float:
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, D, generator=g, dtype=torch.float64).numpy()
    a = r * THETA
    k_rot = np.empty(D)
    k_rot[0::2] = k[0::2] * np.cos(a) - k[1::2] * np.sin(a)
    k_rot[1::2] = k[0::2] * np.sin(a) + k[1::2] * np.cos(a)
    return float(q @ k_rot / (np.linalg.norm(q) * np.linalg.norm(k)))


def test_printed_rows(printed):
    for r in (0, 10, 100, 1000):
        score, bound, cosine = numbers(line_after(printed, f"r = {r:4}:"))
        assert abs(score - 2 * np.cos(r * THETA).sum()) < 0.006
        assert abs(bound - np.abs(np.cumsum(np.exp(1j * r * THETA))).mean()) < 0.006
        assert abs(cosine - _random_cosine(r)) < 0.006


def test_at_distance_zero_the_score_is_d_and_the_bound_is_the_mean_of_1_to_d_over_2(printed):
    score, bound, _ = numbers(line_after(printed, "r =    0:"))
    assert score == D
    assert bound == np.mean(np.arange(1, D // 2 + 1))

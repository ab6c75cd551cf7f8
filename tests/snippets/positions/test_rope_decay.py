"""The decay numbers from closed forms: for q = k = ones each pair contributes 2 cos(r theta_i);
the paper's S_j = sum_{l<j} e^(i r theta_l), and its bound (Su et al., 2021, section 3.4.3) is
max_i |h_{i+1} - h_i| sum_j |S_j|, where every h_i = (1 + i)(1 - i) = 2 and h_{d/2} = 0, so the
largest step is 2 (by hand)."""

import numpy as np
import torch

from tests.printed import flag, line_after, numbers

D = 128
THETA = 10000.0 ** (-np.arange(0, D, 2) / D)


def _abs_partial_sums(r: int | np.ndarray) -> np.ndarray:
    """|S_1|, ..., |S_{D/2}| at distance r, along the last axis (one row per r for an array r)."""
    return np.abs(np.cumsum(np.exp(1j * np.multiply.outer(r, THETA)), axis=-1))


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
        score, bound, mean_S, cosine = numbers(line_after(printed, f"r = {r:4}:"))
        assert abs(score - 2 * np.cos(r * THETA).sum()) < 0.006
        assert abs(bound - 2 * _abs_partial_sums(r).sum()) < 0.5
        assert abs(mean_S - _abs_partial_sums(r).mean()) < 0.006
        assert abs(cosine - _random_cosine(r)) < 0.006
        assert abs(score) <= bound  # a bound, unlike the mean of |S_j|


def test_the_score_never_exceeds_the_bound(printed):
    r = np.arange(1001)
    scores = 2 * np.cos(r[:, None] * THETA).sum(axis=1)
    bounds = 2 * _abs_partial_sums(r).sum(axis=-1)
    assert (np.abs(scores) <= bounds).all()
    assert flag(printed, "|score| <= bound at every r:") is True


def test_at_distance_zero_the_score_is_d_and_the_bound_is_d_times_the_mean_of_1_to_d_over_2(printed):
    score, bound, mean_S, _ = numbers(line_after(printed, "r =    0:"))
    assert score == D
    assert mean_S == np.mean(np.arange(1, D // 2 + 1))
    assert bound == 2 * np.sum(np.arange(1, D // 2 + 1))

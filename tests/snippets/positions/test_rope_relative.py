"""Scores of a rotated query and key, recomputed with the paper's rotation matrix (Su et al.,
2021, equation 15) in float64 NumPy: they depend on m - n only, and rotations keep norms."""

import numpy as np

from tests.support.positions_reference import dot_rounding, rotation_rounding
from tests.support.printed import assert_printed_in_order, decimals, exact
from tests.support.reference import EPS32, EPS64, as64


def rotation(m: int, d: int) -> np.ndarray:
    """The block-diagonal R(m) of equation 15: one 2 x 2 rotation by m theta_i per pair."""
    R = np.zeros((d, d))
    for i in range(d // 2):
        a = m * 10000 ** (-2 * i / d)
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return R


def score_and_rounding(q: np.ndarray, k: np.ndarray, m: int, n: int) -> tuple[float, float]:
    """(R(m) q) . (R(n) k) in float64, and how far float32's may lie from it."""
    d = q.shape[-1]
    q_m, k_n = rotation(m, d) @ q, rotation(n, d) @ k
    error = dot_rounding(
        q_m[None], k_n[None], rotation_rounding(q, EPS32)[None], rotation_rounding(k, EPS32)[None], EPS32
    )
    return float(q_m @ k_n), float(error[0, 0])


def test_scores_depend_on_the_offset_only(values):
    q, k = as64(values["q"])[0], as64(values["k"])[0]
    scores = values["scores"]  # (m, n): score
    reference = {pair: score_and_rounding(q, k, *pair) for pair in scores}
    for pair, score in scores.items():
        expected, error = reference[pair]
        assert abs(score - expected) <= error, pair
    # The same offset m - n gives the same score (up to rounding); the opposite offset does not.
    by_offset: dict[int, list] = {}
    for (m, n), (expected, error) in reference.items():
        by_offset.setdefault(m - n, []).append((expected, error))
    assert len(by_offset) > 1
    float64_rounding = (
        8 * len(q) * EPS64 * max(max(pair) for pair in scores) * np.linalg.norm(q) * np.linalg.norm(k)
    )
    for offset, group in by_offset.items():
        assert np.ptp([expected for expected, _ in group]) <= float64_rounding, offset
        if -offset in by_offset:  # the query before the key instead of after it
            (other, other_error), (this, this_error) = by_offset[-offset][0], group[0]
            assert abs(other - this) > 2 * (other_error + this_error), offset


def test_norms(values):
    q, q_far = as64(values["q"])[0], as64(values["q_far"])[0]
    error = rotation_rounding(q, EPS32)
    assert (np.abs(q_far - q) > error).any()  # turned, far along ...
    assert abs(np.linalg.norm(q_far) - np.linalg.norm(q)) <= np.linalg.norm(error)  # ... the same length


def test_prints_each_score_and_both_norms(values, printed):
    q, q_far = as64(values["q"])[0], as64(values["q_far"])[0]
    d = len(q)
    expected = []
    for (m, n), score in values["scores"].items():
        expected += [exact(m), exact(n), decimals(score, 5)]
    norm_rounding = d * EPS32 * np.linalg.norm(q)  # torch's float32 norm against NumPy's float64
    expected += [
        decimals(np.linalg.norm(q), 5, norm_rounding),
        decimals(np.linalg.norm(q_far), 5, norm_rounding),
    ]
    assert_printed_in_order(printed, expected)

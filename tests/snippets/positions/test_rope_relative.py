"""Scores of a rotated query and key, recomputed with the paper's rotation matrix (Su et al.,
2021, equation 15) in float64 NumPy."""

import numpy as np
import torch

from tests.printed import line_after, number_after, numbers

D = 8


def _rotation(m: int) -> np.ndarray:
    R = np.zeros((D, D))
    for i in range(D // 2):
        a = m * 10000 ** (-2 * i / D)
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return R


def _q_k():
    torch.manual_seed(0)
    return torch.randn(D).double().numpy(), torch.randn(D).double().numpy()


def test_scores_against_the_rotation_matrix(printed):
    q, k = _q_k()
    for m, n in [(3, 1), (13, 11), (1003, 1001), (1, 3)]:
        expected = (_rotation(m) @ q) @ (_rotation(n) @ k)
        printed_score = numbers(line_after(printed, f"m = {m:4}, n = {n:4}:"))[0]
        assert abs(printed_score - expected) < 2e-5, (m, n)


def test_the_same_offset_gives_the_same_score_and_the_opposite_one_does_not(printed):
    q, k = _q_k()
    assert abs((_rotation(3) @ q) @ (_rotation(1) @ k) - (_rotation(1) @ q) @ (_rotation(3) @ k)) > 0.1


def test_norms(printed):
    q, _ = _q_k()
    assert abs(number_after(printed, "norm of q: ") - np.linalg.norm(q)) < 1e-5
    assert abs(number_after(printed, "norm of q at 1000: ") - np.linalg.norm(_rotation(1000) @ q)) < 1e-5

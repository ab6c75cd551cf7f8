"""The factor worked out by hand (sqrt(384 / 64) = sqrt(6)), and the weights' statistics recomputed in
float64 NumPy from the snippet's random draws."""

import math

import numpy as np
import torch

from tests.printed import flag, line_after, number_after, numbers
from tests.reference import softmax

C, HEAD_SIZE, T = 384, 64, 16


def test_the_factor(printed):
    assert numbers(line_after(printed, "divided by sqrt(384) instead of sqrt(64), the scores are"))[
        -1
    ] == round(math.sqrt(6), 3)
    assert flag(printed, "buggy == right scores at temperature sqrt(n_head):") is True


def test_the_statistics(printed):
    torch.manual_seed(0)
    x = torch.randn(T, C).double().numpy()
    W_Q, W_K = ((torch.randn(C, HEAD_SIZE) / C**0.5).double().numpy() for _ in range(2))
    scores = (x @ W_Q) @ (x @ W_K).T
    largest = {
        name: softmax(scores / np.sqrt(scale)).max(axis=-1).mean()
        for name, scale in (("right", HEAD_SIZE), ("buggy", C))
    }
    printed_largest = numbers(line_after(printed, "average largest weight:"))
    np.testing.assert_allclose(printed_largest, [largest["right"], largest["buggy"]], atol=6e-4)
    assert 1 / T < largest["buggy"] < largest["right"]  # flatter, toward uniform
    assert abs(number_after(printed, f"uniform over {T} keys:") - 1 / T) < 6e-4

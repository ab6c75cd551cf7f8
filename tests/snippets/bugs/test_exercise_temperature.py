"""The factor worked out by hand (sqrt(384 / 64) = sqrt(6)), and the weights' statistics recomputed in
float64 NumPy from the snippet's random draws."""

import math

import numpy as np
import torch

from tests.printed import flag, line_after, numbers
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
    for name, scale in (("right", HEAD_SIZE), ("buggy", C)):
        w = softmax(scores / np.sqrt(scale))
        largest, entropy = numbers(line_after(printed, f"{name}: average largest weight"))
        assert abs(largest - w.max(axis=-1).mean()) < 6e-4
        assert abs(entropy - (-(w * np.log(w)).sum(axis=-1).mean())) < 6e-4
    largest, entropy = numbers(line_after(printed, f"uniform over {T} keys: largest weight"))
    assert abs(largest - 1 / T) < 6e-4 and abs(entropy - math.log(T)) < 6e-4

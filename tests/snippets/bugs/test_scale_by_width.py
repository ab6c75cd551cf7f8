"""The head scaled by 1/sqrt(C) and by 1/sqrt(d_k), recomputed in float64 NumPy (tests/reference.py)
from the snippet's random draws."""

import numpy as np
import torch

from tests.printed import line_after, numbers
from tests.reference import attention, causal

C, HEAD_SIZE, T = 32, 8, 6


def _weights():
    torch.manual_seed(0)
    W_Q, W_K, W_V = (torch.randn(C, HEAD_SIZE) / C**0.5 for _ in range(3))
    x = torch.randn(1, T, C)
    return [w.double().numpy() for w in (W_Q, W_K, W_V)], x.double().numpy()


def _head(x, W, scale):
    W_Q, W_K, W_V = W
    return attention(x @ W_Q, x @ W_K, x @ W_V, allowed=causal(x.shape[1]), scale=scale)


def test_the_printed_weights_are_those_of_each_scale(printed):
    W, x = _weights()
    _, buggy = _head(x, W, scale=C**-0.5)
    _, fixed = _head(x, W, scale=HEAD_SIZE**-0.5)
    np.testing.assert_allclose(numbers(line_after(printed, "  buggy:")), buggy[0, -1], atol=6e-4)
    np.testing.assert_allclose(numbers(line_after(printed, "  fixed:")), fixed[0, -1], atol=6e-4)
    # The bug makes the weights flatter: the largest weight is smaller.
    assert buggy[0, -1].max() < fixed[0, -1].max() - 0.05


def test_the_check_fails_on_the_bug_and_passes_on_the_fix(printed):
    W, _ = _weights()
    x = torch.randn(20, 8, C, generator=torch.Generator().manual_seed(1)).double().numpy()
    wrong, _ = _head(x, W, scale=C**-0.5)
    right, _ = _head(x, W, scale=HEAD_SIZE**-0.5)
    worst = np.abs(wrong - right).max()
    buggy = line_after(printed, "buggy: largest difference from PyTorch")
    assert abs(numbers(buggy)[0] - worst) < 0.05 * worst and buggy.endswith("FAILS")
    fixed = line_after(printed, "fixed: largest difference from PyTorch")
    assert numbers(fixed)[0] < 1e-5 and fixed.endswith("passes")

"""The U-Net attention's weights with the softmax over the queries and over the keys, recomputed in
float64 NumPy from the snippet's random draws."""

import numpy as np
import torch

from tests.printed import block_after, line_after, numbers
from tests.reference import softmax

T, H, D_K = 4, 2, 8


def _weights(q, k, axis):
    scores = np.einsum("bihd,bjhd->bijh", q, k) / np.sqrt(D_K)  # (B, T, T, H)
    return softmax(scores, axis=axis)


def test_the_printed_weights_are_normalised_over_the_queries(printed):
    torch.manual_seed(0)
    q, k, _ = (torch.randn(1, T, H, D_K).double().numpy() for _ in range(3))
    buggy = _weights(q, k, axis=1)[0, :, :, 0]
    np.testing.assert_allclose(block_after(printed, "buggy weights of head 0:", rows=T), buggy, atol=6e-4)
    np.testing.assert_allclose(numbers(line_after(printed, "row sums:")), buggy.sum(axis=1), atol=6e-4)
    np.testing.assert_allclose(numbers(line_after(printed, "column sums:")), np.ones(T), atol=6e-4)
    assert np.abs(buggy.sum(axis=1) - 1).max() > 0.1  # the bug shows on these draws


def test_the_check_fails_on_the_bug_and_passes_on_the_fix(printed):
    g = torch.Generator().manual_seed(1)
    q, k, _ = (torch.randn(20, 8, H, D_K, generator=g).double().numpy() for _ in range(3))
    worst = np.abs(_weights(q, k, axis=1).sum(axis=2) - 1).max()
    assert np.allclose(_weights(q, k, axis=2).sum(axis=2), 1.0)  # over the keys, rows sum to one
    buggy = line_after(printed, "buggy: largest |row sum - 1|")
    assert abs(numbers(buggy)[0] - worst) < 0.05 * worst and buggy.endswith("FAILS")
    fixed = line_after(printed, "fixed: largest |row sum - 1|")
    assert numbers(fixed)[0] < 1e-5 and fixed.endswith("passes")

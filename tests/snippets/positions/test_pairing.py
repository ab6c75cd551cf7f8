"""The two pairings written out in float64 NumPy: interleaved rotates (2i, 2i+1), half-split
rotates (i, i + d/2), both by t theta_i."""

import numpy as np
import torch

from tests.printed import flag, number_after
from tests.reference import softmax

T, D, C = 5, 8, 16
THETA = 10000.0 ** (-np.arange(0, D, 2) / D)


def _rotate(x: np.ndarray, interleaved: bool) -> np.ndarray:
    first, second = (
        (np.arange(0, D, 2), np.arange(1, D, 2)) if interleaved else (np.arange(D // 2), np.arange(D // 2, D))
    )
    a = np.arange(len(x))[:, None] * THETA
    out = np.empty_like(x)
    out[:, first] = x[:, first] * np.cos(a) - x[:, second] * np.sin(a)
    out[:, second] = x[:, first] * np.sin(a) + x[:, second] * np.cos(a)
    return out


def _data():
    torch.manual_seed(0)
    x = torch.randn(T, D).double().numpy()
    X = torch.randn(T, C).double().numpy()
    W_Q, W_K = torch.randn(C, D).double().numpy(), torch.randn(C, D).double().numpy()
    return x, X, W_Q, W_K


def _weights(Q, K, interleaved):
    return softmax(_rotate(Q, interleaved) @ _rotate(K, interleaved).T / np.sqrt(D))


def test_half_split_is_interleaved_up_to_the_permutation(printed):
    x, *_ = _data()
    perm = [0, 2, 4, 6, 1, 3, 5, 7]
    np.testing.assert_allclose(
        _rotate(x[:, perm], interleaved=False), _rotate(x, interleaved=True)[:, perm], atol=1e-12
    )
    assert flag(printed, "half-split of permuted x == permuted interleaved:") is True


def test_mixing_changes_the_weights_and_permuting_the_weights_fixes_it(printed):
    _, X, W_Q, W_K = _data()
    right = _weights(X @ W_Q, X @ W_K, interleaved=True)
    wrong = _weights(X @ W_Q, X @ W_K, interleaved=False)
    change = np.abs(right - wrong).max()
    assert (
        abs(number_after(printed, "largest change of a weight when mixed:") - change) < 5e-3
    )  # two decimals
    perm = [0, 2, 4, 6, 1, 3, 5, 7]
    np.testing.assert_allclose(
        _weights(X @ W_Q[:, perm], X @ W_K[:, perm], interleaved=False), right, atol=1e-12
    )
    assert flag(printed, "permuted W_Q, W_K with half-split:") is True

"""Token-by-token scores with and without the position offset, recomputed in float64 NumPy."""

import numpy as np
import torch

from tests.printed import number_after

T, D = 6, 8
THETA = 10000.0 ** (-np.arange(0, D, 2) / D)


def _rotate(x: np.ndarray, position: int) -> np.ndarray:
    a = position * THETA
    out = np.empty_like(x)
    out[0::2] = x[0::2] * np.cos(a) - x[1::2] * np.sin(a)
    out[1::2] = x[0::2] * np.sin(a) + x[1::2] * np.cos(a)
    return out


def test_the_offset_matters(printed):
    torch.manual_seed(0)
    Q, K = torch.randn(T, D).double().numpy(), torch.randn(T, D).double().numpy()
    keys = np.array([_rotate(K[j], j) for j in range(T)])
    forgot = max(
        np.abs(_rotate(Q[t], 0) @ keys[: t + 1].T - _rotate(Q[t], t) @ keys[: t + 1].T).max()
        for t in range(T)
    )
    assert number_after(printed, "with the offset, largest difference:") < 1e-5
    assert abs(number_after(printed, "forgetting it, largest difference:") - forgot) < 0.006

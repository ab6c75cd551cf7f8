"""Llama's complex form, recomputed with NumPy's complex128: (x_2i + i x_2i+1) e^(i t theta_i)."""

import numpy as np
import torch

from tests.printed import line_after, number_after, numbers

T, D = 6, 8


def _rotated() -> np.ndarray:
    torch.manual_seed(0)
    x = torch.randn(T, D).double().numpy()
    theta = 10000.0 ** (-np.arange(0, D, 2) / D)
    z = (x[:, 0::2] + 1j * x[:, 1::2]) * np.exp(1j * np.arange(T)[:, None] * theta)
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out


def test_both_forms_print_the_numpy_rotation(printed):
    expected = _rotated()[1, :4]
    for label in ("position 1, complex form:", "position 1, apply_rotary:"):
        np.testing.assert_allclose(numbers(line_after(printed, label)), expected, atol=5e-5)


def test_they_agree_to_float32_rounding(printed):
    assert number_after(printed, "largest difference:") < 1e-6

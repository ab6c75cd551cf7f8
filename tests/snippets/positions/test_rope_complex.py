"""Llama's complex form, recomputed with NumPy's complex128: (x_2i + i x_2i+1) e^(i t theta_i), the same
as the paper's rotation (Su et al., 2021, equation 34)."""

import numpy as np

from tests.support.positions_reference import frequencies, rotate, rotation_rounding
from tests.support.printed import assert_printed_in_order, decimals, significant
from tests.support.reference import EPS32, EPS64, as64


def complex_form(x: np.ndarray) -> np.ndarray:
    """Each pair (x_2i, x_2i+1) of row t as one complex number, times e^(i t theta_i), back to pairs."""
    T, d = x.shape
    z = (x[:, 0::2] + 1j * x[:, 1::2]) * np.exp(1j * np.arange(T)[:, None] * frequencies(d))
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out


def test_both_forms_are_the_rotation(values):
    x = as64(values["x"])
    T, d = x.shape
    expected = rotate(x, np.arange(T))
    np.testing.assert_allclose(complex_form(x), expected, rtol=0, atol=rotation_rounding(x, EPS64).max())
    # apply_rotary: float64 angles, then float32 cos, sin and products.
    rotary_error = rotation_rounding(x, EPS32)
    assert (np.abs(as64(values["rotated"]) - expected) <= rotary_error).all()
    # The complex form as the snippet writes it: its angles t theta_i are float32 too (theta_i
    # from a power and a division, then one product: 4 eps relative), turning each pair by up to
    # 4 eps t theta_i radians more.
    angles = np.arange(T)[:, None] * frequencies(d)
    pair_size = np.abs(x[:, 0::2]) + np.abs(x[:, 1::2])
    angle_error = np.repeat(pair_size * 4 * EPS32 * angles, 2, axis=1)
    complex_error = 1.5 * rotary_error + angle_error
    assert (np.abs(as64(values["x_rot"]) - expected) <= complex_error).all()
    # So they agree to float32 rounding.
    assert values["diff"] <= (rotary_error + complex_error).max()


def test_prints_position_1_in_both_forms_and_their_difference(values, printed):
    assert_printed_in_order(
        printed,
        [decimals(e, 4) for e in values["x_rot"][1, :4].tolist()]
        + [decimals(e, 4) for e in values["rotated"][1, :4].tolist()]
        + [significant(values["diff"], 2)],
    )

"""The encoding's values and wavelengths, from the formula of Vaswani et al. (2017), section 3.5."""

import math

import numpy as np
import pytest

from tests.support.positions_reference import sinusoidal
from tests.support.printed import assert_printed_in_order, decimals, exact
from tests.support.reference import EPS32, EPS64, as64


def test_every_value_is_the_formula(values):
    PE = as64(values["PE"])
    T, C = values["T"], values["C"]
    assert PE.shape == (T, C)
    # computed in float64, stored in float32: off by at most eps / 2 (every value is at most 1)
    np.testing.assert_allclose(PE, sinusoidal(T, C), rtol=0, atol=EPS32 / 2 + 4 * EPS64 * T)


def test_wavelengths_run_from_2_pi_to_nearly_2_pi_times_the_base(values):
    """Pair i turns once every 2 pi 10000^(2i/d) positions: 2 pi / theta_i."""
    PE, C = as64(values["PE"]), values["C"]
    wavelengths = values["wavelengths"]  # pair: positions per turn
    for i, wavelength in wavelengths.items():
        assert wavelength == pytest.approx(2 * math.pi * 10000 ** (2 * i / C), rel=8 * EPS64, abs=0)
        # The encoding itself turns pair i by theta_i per position: read it off position 1.
        theta = math.atan2(PE[1, 2 * i], PE[1, 2 * i + 1])
        assert abs(wavelength * theta / (2 * math.pi) - 1) <= 4 * EPS32
    assert wavelengths[0] == 2 * math.pi  # the fastest pair: one radian per position
    assert max(wavelengths.values()) < 2 * math.pi * 10000


def test_prints_the_shape_position_1_and_the_wavelengths(values, printed):
    PE = values["PE"]
    expected = [exact(n) for n in PE.shape] + [decimals(e, 4) for e in PE[1, :4].tolist()]
    for i, wavelength in values["wavelengths"].items():
        expected += [exact(i), decimals(wavelength, 1)]
    assert_printed_in_order(printed, expected)

"""PE[t + r] = PE[t] R_r: R_r against the angle-addition formulas, the error against a hand bound."""

import math

import numpy as np

from tests.support.positions_reference import frequencies, sinusoidal
from tests.support.printed import assert_printed_in_order, decimals, printed_flags, significant
from tests.support.reference import EPS32, EPS64, as64


def shift(r: int, C: int) -> np.ndarray:
    """R_r: for each pair, (sin a, cos a) [[cos b, -sin b], [sin b, cos b]] = (sin(a + b), cos(a + b))."""
    R = np.zeros((C, C))
    for i, theta in enumerate(frequencies(C)):
        b = r * theta
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[math.cos(b), -math.sin(b)], [math.sin(b), math.cos(b)]]
    return R


def test_R_is_the_rotation_by_r_theta_of_each_pair(values, printed):
    R, r, C = values["R"].numpy(), values["r"], values["C"]
    # Each entry within float32's rounding of the formula (torch.tensor of Python floats is float32).
    np.testing.assert_allclose(R, shift(r, C), rtol=0, atol=EPS32 / 2 + 4 * EPS64)
    # A rotation: R R^T = I, with cos^2 + sin^2 off by float32's rounding at most, and
    # cos sin - sin cos off the diagonal by float64's: far inside allclose's tolerance.
    gram = R @ R.T
    off_diagonal = ~np.eye(C, dtype=bool)
    assert (np.abs(np.diag(gram) - 1) <= 4 * EPS32).all()
    assert (np.abs(gram[off_diagonal]) <= 4 * C * EPS64).all()
    assert np.linalg.det(R) > 0  # not a reflection
    assert printed_flags(printed) == [True]
    # The fastest pair has frequency 1: its block turns by r radians (by hand).
    c, s = math.cos(r), math.sin(r)
    np.testing.assert_allclose(R[:2, :2], [[c, -s], [s, c]], rtol=0, atol=EPS32 / 2 + 4 * EPS64)


def test_the_shift_is_exact_up_to_float32_storage(values):
    """Each entry of the float32 encoding is off by at most 2^-25 (it is at most 1 in size), and so
    is each cos and sin of R_r; PE[t + r] is one such entry, PE[t] R_r sums two of them times cos and
    sin, so the error is at most (1 + sqrt 2 + 1) 2^-25 < (1 + sqrt 2) 2^-24 (and float64's rounding,
    far below)."""
    PE, R, r, T = as64(values["PE"]), values["R"].numpy(), values["r"], values["T"]
    C = PE.shape[1]
    np.testing.assert_allclose(PE, sinusoidal(T + r, C), rtol=0, atol=EPS32 / 2 + 4 * EPS64 * (T + r))
    np.testing.assert_allclose(values["predicted"].numpy(), PE[:T] @ R, rtol=0, atol=8 * EPS64)
    error = np.abs(PE[r:] - PE[:T] @ R).max()
    assert abs(values["error"] - error) <= 8 * EPS64
    assert values["error"] <= (1 + math.sqrt(2)) * 2**-24


def test_prints_the_error_and_the_fastest_block(values, printed):
    R = values["R"]
    assert_printed_in_order(
        printed, [significant(values["error"], 2)] + [decimals(e, 4) for e in R[:2, :2].flatten().tolist()]
    )

"""bugs/rope_pairing.py: the fixed rotation against the paper's rotation matrix (Su et al., 2021,
equation 15) and the buggy layout written out, in float64 from the snippet's own inputs; each float32
score within its rounding bound, derived below."""

import numpy as np

from tests.support.printed import assert_shows, rounded, rounded_significant
from tests.support.reference import U32
from tests.support.worst_case_rounding import Rounded, assert_largest_difference, matmul


def _theta(d: int) -> np.ndarray:
    """θ_i = 10000^(-2i/d), one frequency per pair of features (the paper's)."""
    return 10000.0 ** (-np.arange(0, d, 2) / d)


def _rotation(m: int, d: int) -> np.ndarray:
    """R^d_{Θ,m}: a 2x2 rotation by m θ_i on features (2i, 2i + 1), for column vectors."""
    R = np.zeros((d, d))
    for i, theta in enumerate(_theta(d)):
        c, s = np.cos(m * theta), np.sin(m * theta)
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, -s], [s, c]]
    return R


def _rope(x: np.ndarray, positions: np.ndarray, fixed: bool) -> Rounded:
    """Each row of x (N, d) turned by its position, exactly, and the float32 rounding bounded.

    Fixed: the paper's rotation of the pairs (2i, 2i + 1). Buggy: feature j turns by the angle of
    pair j // 2, but is mixed with feature j + d/2 (mod d). Either way out_j = x_j cos a + r_j sin a
    with |r_j| = |x_partner|. In float32, θ_i = pow(10000, -2i/d) is off by 4 u (pow, 2 ulp) plus
    ln(10000) (2i/d) u (its rounded exponent), except θ_0 = pow(10000, 0) = 1 exactly; the angle
    p θ_i rounds once more (not for θ_0: p is a small integer); cos and sin add 4 ulp <= 8 u; the
    two products and the sum round once each.
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    theta = _theta(d)
    if fixed:
        value = np.stack([_rotation(p, d) @ row for row, p in zip(x, positions, strict=True)])
        partner = np.arange(d) ^ 1
    else:
        angles = np.repeat(positions[:, None] * theta, 2, axis=-1)  # θ0, θ0, θ1, θ1, ...
        rotated = np.concatenate([-x[:, d // 2 :], x[:, : d // 2]], axis=-1)
        value = x * np.cos(angles) + rotated * np.sin(angles)
        partner = (np.arange(d) + d // 2) % d
    theta_error = (
        np.where(theta == 1, 0.0, 4 * U32 + np.log(10000) * np.arange(0, d, 2) / d * U32 + U32) * 1.001
    )
    angle_error = np.repeat(np.abs(positions)[:, None] * theta * theta_error, 2, axis=-1)
    magnitude = np.abs(x) + np.abs(x[:, partner])
    return Rounded(value, magnitude * (angle_error + 8 * U32) + 3 * U32 * magnitude * 1.001)


def _turned_scores(q, k, q_positions, k_positions, fixed: bool) -> Rounded:
    """The score of each row of q with the same row of k, each turned by its position."""
    rq = _rope(q, q_positions, fixed).map(lambda a: a[:, None, :])  # (N, 1, d)
    rk = _rope(k, k_positions, fixed).map(lambda a: a[:, :, None])  # (N, d, 1)
    return matmul(rq, rk).map(lambda a: a[:, 0, 0])


def test_the_scores(printed, values):
    q, k, positions = (values[name].double().numpy() for name in ("q", "k", "positions"))
    buggy_scores, fixed_scores = values["scores"].values()
    buggy, fixed = (_turned_scores(q, k, positions, positions - 1, fixed=f) for f in (False, True))
    assert buggy.holds(buggy_scores) and fixed.holds(fixed_scores)
    # The key is one position before the query each time: the same score, as RoPE promises ...
    np.testing.assert_allclose(fixed.value, fixed.value[0], rtol=0, atol=1e-12)
    # ... unless buggy: its scores drift, by more than rounding and than the printed precision (1e-4).
    assert np.ptp(buggy.value) - 2 * buggy.error.max() > 1e-4
    assert_shows(
        printed,
        rounded(buggy_scores, 4)
        + rounded(fixed_scores, 4)
        + rounded_significant(list(values["worst"].values()), 2),
    )


def test_the_check(values):
    q, k, m, n, shift = (values[name].double().numpy() for name in ("qs", "ks", "m", "n", "shift"))
    tolerance = values["tolerance"]
    buggy, fixed = values["worst"].values()
    ranges = []
    for worst, f in ((buggy, False), (fixed, True)):
        before = _turned_scores(q, k, m, n, fixed=f)
        after = _turned_scores(q, k, m + shift, n + shift, fixed=f)
        ranges.append(assert_largest_difference(worst, (after, before)))
        if f:  # R_m^T R_n = R_{n-m}: a shared shift leaves every score unchanged
            np.testing.assert_allclose(after.value, before.value, rtol=0, atol=1e-9)
    assert ranges[0][0] > tolerance and buggy > tolerance  # fails on every machine
    assert fixed < tolerance  # rounding alone, which the page promises stays below it

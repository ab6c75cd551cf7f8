"""The fixed rotation against the paper's rotation matrix (Su et al., 2021, equation 15), and the
buggy layout written out, in float64 NumPy from the snippet's random draws."""

import numpy as np
import torch

from tests.printed import line_after, numbers

D = 8
THETA = 10000.0 ** (-np.arange(0, D, 2) / D)


def _rotation(m: int) -> np.ndarray:
    """R^d_{Θ,m}: a 2x2 rotation by m θ_i on features (2i, 2i + 1), for column vectors."""
    R = np.zeros((D, D))
    for i, theta in enumerate(THETA):
        c, s = np.cos(m * theta), np.sin(m * theta)
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, -s], [s, c]]
    return R


def _buggy(x: np.ndarray, m: int) -> np.ndarray:
    """Feature j turns by m θ_{j // 2}, but is mixed with feature j ± d/2."""
    angles = m * np.repeat(THETA, 2)
    rotated = np.concatenate([-x[D // 2 :], x[: D // 2]])
    return x * np.cos(angles) + rotated * np.sin(angles)


def test_the_scores(printed):
    torch.manual_seed(0)
    q, k = torch.randn(D).double().numpy(), torch.randn(D).double().numpy()
    positions = [(1, 0), (4, 3), (9, 8)]
    buggy = [_buggy(q, m) @ _buggy(k, n) for m, n in positions]
    fixed = [(_rotation(m) @ q) @ (_rotation(n) @ k) for m, n in positions]
    np.testing.assert_allclose(numbers(line_after(printed, "buggy scores:")), buggy, atol=2e-4)
    np.testing.assert_allclose(numbers(line_after(printed, "fixed scores:")), fixed, atol=2e-4)
    assert np.ptp(fixed) < 1e-12 < 0.1 < np.ptp(buggy)  # the same distance: the same score, unless buggy


def test_the_check(printed):
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(20, D, generator=g).double().numpy(), torch.randn(20, D, generator=g).double().numpy()
    m, n, shift = torch.randint(0, 50, (3, 20), generator=g).tolist()
    worst = 0.0
    for i in range(20):
        a, b, s = m[i], n[i], shift[i]
        worst = max(worst, abs(_buggy(q[i], a + s) @ _buggy(k[i], b + s) - _buggy(q[i], a) @ _buggy(k[i], b)))
        change = (_rotation(a + s) @ q[i]) @ (_rotation(b + s) @ k[i]) - (_rotation(a) @ q[i]) @ (
            _rotation(b) @ k[i]
        )
        assert abs(change) < 1e-9
    buggy = line_after(printed, "buggy: largest change of a score")
    assert abs(numbers(buggy)[0] - worst) < 0.05 * worst and buggy.endswith("FAILS")
    fixed = line_after(printed, "fixed: largest change of a score")
    assert numbers(fixed)[0] < 1e-4 and fixed.endswith("passes")

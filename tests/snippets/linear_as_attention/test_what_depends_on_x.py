"""linear_as_attention/what_depends_on_x.py: which of q, k, v are fixed, homogeneous or additive in x.

The construction, written out in float64 NumPy (the page's step 2 to 4): v_i = ||x||_1 sign(x_i) w_i
and q = sqrt(d_k) l k, with l the centred log|x| and k the key with orthonormal rows. So k is a
constant; v(2x) = 2 v(x) but v is not additive; q(2x) = q(x).
"""

import numpy as np

from tests.support.printed import printed_flags
from tests.support.reference import EPS64, as64

# For each of q, k, v: equal for x1 and x2, f(2 x1) = 2 f(x1), f(x1 + x2) = f(x1) + f(x2).
ALGEBRA = {"q": [False, False, False], "k": [True, False, False], "v": [False, True, False]}


def construction(x: np.ndarray, W: np.ndarray, key: np.ndarray) -> dict[str, np.ndarray]:
    """q (1, 1, d_k), k (1, d_in, d_k) and v (1, d_in, d_out) for one row x (1, d_in)."""
    logs = np.log(np.abs(x))
    q = np.sqrt(key.shape[1]) * (logs - logs.mean()) @ key
    v = np.abs(x).sum() * np.sign(x)[..., None] * W.T
    return {"q": q[None], "k": key[None], "v": v}


def rounding(x: np.ndarray, W: np.ndarray, key: np.ndarray) -> dict[str, float]:
    """How far float64 results of the construction may lie from the exact ones."""
    d_in, d_k = key.shape
    logs = np.log(np.abs(x))
    q = 8 * d_in * EPS64 * np.sqrt(d_k) * (1 + np.abs(logs - logs.mean()).max()) * np.abs(key).sum(0).max()
    return {"q": q, "k": 0.0, "v": (d_in + 2) * EPS64 * np.abs(x).sum() * np.abs(W).max()}


def test_q_k_v_are_the_construction(values):
    W, x1, x2 = (as64(values[name]) for name in ("W", "x1", "x2"))
    key = as64(values["a"]["k"])[0]
    np.testing.assert_allclose(key @ key.T, np.eye(len(key)), rtol=0, atol=4 * len(key) * EPS64)
    for name, x in (("a", x1), ("b", x2), ("both", x1 + x2), ("double", 2 * x1)):
        expected, tolerance = construction(x, W, key), rounding(x, W, key)
        for n in ("q", "k", "v"):
            np.testing.assert_allclose(as64(values[name][n]), expected[n], rtol=0, atol=tolerance[n])


def test_what_depends_on_x_matches_the_algebra(values, printed):
    W, x1, x2 = (as64(values[name]) for name in ("W", "x1", "x2"))
    built = {name: {n: as64(t) for n, t in values[name].items()} for name in ("a", "b", "both", "double")}
    a, b, both, double = built["a"], built["b"], built["both"], built["double"]
    key = a["k"][0]
    tolerance = max(rounding(x, W, key)[n] for x in (x1, x2, x1 + x2) for n in ("q", "v"))
    for n, row in ALGEBRA.items():
        for (left, right), equal in zip(
            ((a[n], b[n]), (double[n], 2 * a[n]), (both[n], a[n] + b[n])), row, strict=True
        ):
            gap = np.abs(left - right)
            if equal:  # rounding only, far inside allclose's tolerance (atol 1e-8, rtol 1e-5)
                assert (gap <= 3 * tolerance).all() and 3 * tolerance < 1e-8, n
            else:  # far outside it, wherever the rounding falls
                assert (gap > 2 * (1e-8 + 1e-5 * np.abs(right)) + 6 * tolerance).any(), n
    np.testing.assert_allclose(double["q"], a["q"], rtol=0, atol=2 * tolerance)  # q ignores the scale
    # What is printed: the table's verdicts, row by row, then q(2 x1) = q(x1).
    assert printed_flags(printed) == [*ALGEBRA["q"], *ALGEBRA["k"], *ALGEBRA["v"], True]

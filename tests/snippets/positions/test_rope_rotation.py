"""The picture of RoPE's rotation, recomputed with the paper's rotation (Su et al., 2021, equation 34)
in float64 NumPy: each arrow is a pair turned by its position times its frequency, each number under
a circle is that pair's share of the score, and the shares are the same for the same distance."""

import numpy as np
from matplotlib.text import Annotation

from tests.support.positions_reference import dot_rounding, frequencies, rotate, rotation_rounding
from tests.support.reference import EPS32, as64


def test_each_arrow_is_its_pair_turned_by_position_times_frequency(figure, values):
    q, k = as64(values["q"]), as64(values["k"])  # (1, 8) each
    d = q.shape[-1]
    np.testing.assert_allclose(as64(values["thetas"]), frequencies(d), rtol=1e-6)
    axes = np.array(figure.axes).reshape(2, d // 2)
    for row, (m, n) in enumerate(values["settings"]):
        q_m, k_n = rotate(q, [m])[0], rotate(k, [n])[0]
        for i, ax in enumerate(axes[row]):
            arrows = [a for a in ax.texts if isinstance(a, Annotation)]
            tips = [np.array(a.xy, dtype=float) for a in arrows]
            np.testing.assert_allclose(tips, [q_m[2 * i : 2 * i + 2], k_n[2 * i : 2 * i + 2]], atol=1e-5)
            (dots,) = ax.lines  # the query at positions 0 .. m
            trail = rotate(np.repeat(q, m + 1, axis=0), np.arange(m + 1))[:, 2 * i : 2 * i + 2]
            np.testing.assert_allclose(np.column_stack(dots.get_data()), trail, atol=1e-5)


def test_the_shares_of_the_score_depend_on_the_distance_only(figure, values):
    q, k = as64(values["q"]), as64(values["k"])
    d = q.shape[-1]
    settings = values["settings"]
    assert len({m - n for m, n in settings}) == 1 and len({m for m, _ in settings}) == 2
    axes = np.array(figure.axes).reshape(2, d // 2)
    shares = {}
    for row, (m, n) in enumerate(settings):
        q_m, k_n = rotate(q, [m])[0], rotate(k, [n])[0]
        bound = dot_rounding(
            q_m[None], k_n[None], rotation_rounding(q, EPS32), rotation_rounding(k, EPS32), EPS32
        )[0, 0]
        for i in range(d // 2):
            share = q_m[2 * i : 2 * i + 2] @ k_n[2 * i : 2 * i + 2]
            assert abs(values["parts"][m, n, i] - share) <= bound
            assert axes[row, i].get_xlabel() == f"{values['parts'][m, n, i]:+.2f}"
            shares[m, n, i] = share
        assert abs(values["score"][m, n] - q_m @ k_n) <= 2 * bound  # the shares add up to the score
    (m1, n1), (m2, n2) = settings
    for i in range(d // 2):  # in exact arithmetic, the same: only (m - n) theta_i is left between them
        assert abs(shares[m1, n1, i] - shares[m2, n2, i]) < 1e-12

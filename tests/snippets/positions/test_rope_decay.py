"""The decay numbers from closed forms: for q = k = ones each pair contributes 2 cos(r theta_i);
the paper's S_j = sum_{l<j} e^(i r theta_l), and its bound (Su et al., 2021, section 3.4.3) is
max_i |h_{i+1} - h_i| sum_j |S_j|, where every h_i = (1 + i)(1 - i) = 2 and h_{d/2} = 0, so the
largest step is 2 (by hand)."""

import numpy as np
import pytest

from tests.support.positions_reference import frequencies, rotate
from tests.support.printed import numbers, printed_flags
from tests.support.reference import EPS64, as64


@pytest.fixture(scope="module")
def closed_forms(values) -> dict[str, np.ndarray]:
    """The score, |S_j|, the bound and the random pair's cosine at every distance, in float64 NumPy,
    and how far float64 results may lie from them (cos of an angle r theta is off by eps r)."""
    d, r = values["d_k"], values["r"].numpy()
    theta = frequencies(d)
    angles = r[:, None] * theta
    sizes = np.abs(np.cumsum(np.exp(1j * angles), axis=-1))  # |S_1|, ..., |S_{d/2}|, per r
    q, k = as64(values["q"]), as64(values["k"])
    return {
        "score": 2 * np.cos(angles).sum(axis=-1),
        "sizes": sizes,
        "bound": 2 * sizes.sum(axis=-1),
        "random": rotate(np.broadcast_to(k, (len(r), d)), r) @ q / (np.linalg.norm(q) * np.linalg.norm(k)),
        "rounding": 8 * d * EPS64 * (2 + r),
    }


def test_theta_and_h_are_the_papers(values):
    d = values["d_k"]
    np.testing.assert_allclose(values["theta"].numpy(), frequencies(d), rtol=4 * EPS64, atol=0)
    # q = k = ones: every pair is 1 + i, and h_i = (1 + i)(1 - i) = 2; then h_{d/2} = 0.
    np.testing.assert_array_equal(values["h"].numpy(), [2] * (d // 2) + [0])


def test_every_distance_against_the_closed_forms(values, closed_forms):
    rounding, d = closed_forms["rounding"], values["d_k"]
    sizes = values["sizes"].numpy()
    assert (np.abs(sizes - closed_forms["sizes"]) <= rounding[:, None]).all()
    assert (np.abs(values["mean_size"].numpy() - closed_forms["sizes"].mean(axis=-1)) <= rounding).all()
    assert (np.abs(values["scores"].numpy() - closed_forms["score"]) <= rounding).all()
    assert (np.abs(values["rand"].numpy() - closed_forms["random"]) <= rounding).all()
    # the bound: 2 times the sum of the d/2 sizes
    assert (np.abs(values["bound"].numpy() - closed_forms["bound"]) <= d * rounding).all()


def test_the_score_never_exceeds_the_bound(values, closed_forms, printed):
    margin = closed_forms["bound"] - np.abs(closed_forms["score"])
    assert (margin > (values["d_k"] + 1) * closed_forms["rounding"]).all()  # not even by rounding
    assert (values["scores"].abs() <= values["bound"]).all()
    assert printed_flags(printed) == [True]


def test_at_distance_zero_the_score_is_d_and_the_bound_is_d_times_the_mean_of_1_to_d_over_2(values):
    d = values["d_k"]
    assert values["r"][0] == 0
    assert values["scores"][0] == d  # cos 0 = 1, sin 0 = 0: exact
    assert values["mean_size"][0] == np.mean(np.arange(1, d // 2 + 1))  # |S_j| = j
    assert values["bound"][0] == 2 * np.sum(np.arange(1, d // 2 + 1))


def test_printed_rows(values, printed):
    """Each printed row: a distance, then its score, bound, mean |S_j| and random cosine."""
    rows = numbers(printed).reshape(-1, 5)
    assert len(rows)
    kept = [values[name].numpy() for name in ("scores", "bound", "mean_size", "rand")]
    for r, *shown in rows:
        expected = [series[int(r)] for series in kept]
        assert r == int(r)
        # printed with 2, 0, 2 and 2 decimals
        assert (np.abs(np.subtract(shown, expected)) <= [0.005, 0.5, 0.005, 0.005]).all(), r

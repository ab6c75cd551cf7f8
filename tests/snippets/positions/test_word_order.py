"""'dog bites man' against 'man bites dog', recomputed in float64 NumPy (tests/support/reference.py) with
the encoding written out from Vaswani et al. (2017), section 3.5.

allclose(..., atol=1e-6) compares float32 results; the tests assert its printed outcome only where
the rounding bound decides it, and otherwise check the results themselves against that bound.
"""

import numpy as np

from tests.support.positions_reference import dot_rounding, sinusoidal
from tests.support.printed import (
    allclose_decided,
    assert_printed_in_order,
    decimals,
    printed_flags,
    within_allclose,
)
from tests.support.reference import EPS32, as64, attention


def attend(X: np.ndarray, X_error: np.ndarray, W_Q, W_K, W_V) -> tuple[np.ndarray, np.ndarray]:
    """Self-attention of X (T, C) in float64, and how far float32's may lie from it when X itself
    may be off by ``X_error``: the projections' rounding, the scores' (a weight moves by at most
    2 delta of its size for scores off by delta), then the weighted sum of the values."""
    T, C = X.shape
    projected, errors = [], []
    for W in (W_Q, W_K, W_V):
        projected.append(X @ W)
        errors.append(C * EPS32 * (np.abs(X) @ np.abs(W)) + X_error @ np.abs(W))
    (Q, K, V), (dQ, dK, dV) = projected, errors
    out, weights = attention(Q, K, V)
    delta = (dot_rounding(Q, K, dQ, dK, EPS32) / np.sqrt(C)).max(axis=-1, keepdims=True)
    weight_error = weights * (np.expm1(2 * delta) + (T + 2) * EPS32)
    error = weight_error @ (np.abs(V) + dV) + weights @ dV + (T + 1) * EPS32 * (weights @ np.abs(V))
    return out, error


def sentences(values) -> tuple[list[int], list[int], int, int]:
    """The two sentences as ids, and where the word they swap sits in each (dog: first, then last)."""
    vocab, a, b = values["vocab"], values["a"], values["b"]
    assert sorted(a) == sorted(b) and a != b  # the same words, in another order
    (moved, *_) = (w for w in a if a.index(w) != b.index(w))
    return [vocab[w] for w in a], [vocab[w] for w in b], a.index(moved), b.index(moved)


def test_without_positions_the_swap_only_reorders_the_outputs(values, printed):
    E, W_Q, W_K, W_V = (as64(values[name]) for name in ("E", "W_Q", "W_K", "W_V"))
    ids_a, ids_b, i, j = sentences(values)
    zero = np.zeros_like(E[ids_a])
    (out_a, error_a), (out_b, error_b) = (attend(E[ids], zero, W_Q, W_K, W_V) for ids in (ids_a, ids_b))
    # Permutation equivariance: the moved word gets the same output, and the mean is the same.
    np.testing.assert_allclose(out_a[i], out_b[j], rtol=0, atol=1e-12 * np.abs(out_a).max())
    np.testing.assert_allclose(
        out_a.mean(axis=0), out_b.mean(axis=0), rtol=0, atol=1e-12 * np.abs(out_a).max()
    )
    # The snippet's means, in float32, within rounding of the float64 ones.
    mean_error = np.maximum(error_a, error_b).mean(axis=0)
    for name in ("mean_a", "mean_b"):
        assert (np.abs(as64(values[name]) - out_a.mean(axis=0)) <= mean_error).all(), name
    flags = printed_flags(printed)  # dog's output, the mean: without positions, then dog's with them
    assert len(flags) == 3
    if within_allclose(np.maximum(error_a[i], error_b[j]), out_a[i]):
        assert flags[0]
    if within_allclose(mean_error, out_a.mean(axis=0)):  # decided by the bound
        assert flags[1]
    # What is printed is the check of the kept means, wherever it is far from its edge.
    assert allclose_decided(values["mean_a"], values["mean_b"], atol=1e-6) in (None, flags[1])


def test_with_positions_dog_depends_on_where_it_sits(values, printed):
    E, W_Q, W_K, W_V = (as64(values[name]) for name in ("E", "W_Q", "W_K", "W_V"))
    ids_a, ids_b, i, j = sentences(values)
    PE = as64(values["PE"])
    np.testing.assert_allclose(PE, sinusoidal(*PE.shape), rtol=0, atol=EPS32)  # float32, at most 1
    expected = {}
    for name, ids in (("out_a", ids_a), ("out_b", ids_b)):
        X = E[ids] + PE
        expected[name] = attend(X, EPS32 * np.abs(X), W_Q, W_K, W_V)  # E + PE rounded once
        out, error = expected[name]
        assert (np.abs(as64(values[name]) - out) <= error).all(), name
    (out_a, error_a), (out_b, error_b) = expected["out_a"], expected["out_b"]
    gap = np.abs(out_a[i] - out_b[j]).max()
    bound = (error_a[i] + error_b[j]).max()
    assert abs(values["gap"] - gap) <= bound
    # Far beyond allclose's tolerance, wherever the rounding falls: the check must print False.
    assert (
        np.abs(out_a[i] - out_b[j]) > 1e-6 + 1e-5 * (np.abs(out_b[j]) + error_b[j]) + error_a[i] + error_b[j]
    ).any()
    assert printed_flags(printed)[2] is False
    # What is printed: the largest difference, to two decimals.
    assert_printed_in_order(printed, [decimals(values["gap"], 2)])


def test_the_picture_draws_the_four_outputs_and_frames_dog(figure, values):
    """Four grids, top without positions and bottom with: each is the snippet's own attention of its
    sentence (within float32 rounding of float64), drawn on one colour scale, with the row of 'dog'
    framed."""
    E, W_Q, W_K, W_V = (as64(values[name]) for name in ("E", "W_Q", "W_K", "W_V"))
    PE = as64(values["PE"])
    ids_a, ids_b, i, j = sentences(values)
    (ax,) = figure.axes
    images = ax.images
    assert len(images) == 4
    expected = []
    for with_pe in (False, True):
        for ids in (ids_a, ids_b):
            X = E[ids] + (PE if with_pe else 0)
            expected.append(attend(X, EPS32 * np.abs(X) if with_pe else np.zeros_like(X), W_Q, W_K, W_V))
    for image, (out, error) in zip(images, expected, strict=True):
        assert (np.abs(image.get_array() - out) <= error).all()
    largest = max(np.abs(out).max() + error.max() for out, error in expected)
    for image in images:
        low, high = image.get_clim()
        assert low == -high and abs(high - largest) <= 2 * max(e.max() for _, e in expected) + 1e-6
    frames = [p for p in ax.patches if not p.get_fill()]
    framed_rows = [
        round((p.get_y() - image.get_extent()[3]) / 0.45) for p, image in zip(frames, images, strict=True)
    ]
    assert framed_rows == [i, j, i, j]  # dog: first in 'dog bites man', last in 'man bites dog'

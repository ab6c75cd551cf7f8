"""How far float32 attention may be from the exact result: first-order bounds in closed form, for
the snippet tests of mental_model, playground and foundation, and the playground's browser tests.

A test reads a snippet's inputs and results from its variables (the ``values`` fixture), recomputes
the results in float64 from the same inputs, and allows the difference that float32 rounding can
make. The bounds are the standard first-order ones (Higham, *Accuracy and Stability of Numerical
Algorithms*, ch. 3), with EPS32 as the relative error of one float32 operation (twice the unit
roundoff): a dot product of n terms is off by at most n EPS32 times the sum of the terms' sizes,
whatever order the kernel adds them in. They hold on every IEEE machine, for every kernel
(``ATEN_CPU_CAPABILITY``) and thread count, so they are far wider than the error of any one run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tests.support.reference import EPS32, as64, attention

TINY32 = float(np.finfo(np.float32).tiny)  # below it float32 loses relative precision, down to 0
SAFETY = 2.0  # for the second-order terms the first-order bounds leave out


def product_error(a, b, rounds: int = 0) -> np.ndarray:
    """Elementwise bound on how far float32 ``a @ b`` may be from the exact product: SAFETY times
    (n + 2 rounds) EPS32 (|a| @ |b|) for inner size n, where each entry of ``a`` and ``b`` already
    carries up to ``rounds`` EPS32 of relative error (``rounds`` = C for a projection X @ W of width C)."""
    a, b = np.abs(as64(a)), np.abs(as64(b))
    return SAFETY * (a.shape[-1] + 2 * rounds) * EPS32 * (a @ b)


def _softmax_with_error(scores, score_error=0.0) -> tuple[np.ndarray, np.ndarray]:
    """The exact softmax of ``scores`` (last axis; -inf masks a key, a row with no key gets zeros)
    and, per row, the relative error a float32 softmax may make (see `softmax_error`)."""
    z = as64(scores)
    finite = np.isfinite(z)
    row_max = np.where(finite, z, -np.inf).max(axis=-1, keepdims=True)
    e = np.where(finite, np.exp(z - np.where(np.isfinite(row_max), row_max, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    size = np.where(finite, np.abs(z), 0.0).max(axis=-1, keepdims=True)
    delta = np.where(finite, np.broadcast_to(score_error, z.shape), 0.0).max(axis=-1, keepdims=True)
    return weights, 2 * delta + 4 * EPS32 * size + (z.shape[-1] + 6) * EPS32


def softmax_error(scores, score_error=0.0) -> np.ndarray:
    """Elementwise bound on how far a float32 softmax (last axis) may be from the exact one, when
    each float32 score is off by at most ``score_error`` (broadcastable to ``scores``).

    The row's maximum cancels between numerator and denominator, so each weight changes by a
    factor of at most exp(2 delta) from the scores' errors (delta the row's largest), plus the
    rounding of ``z - max`` (2 EPS32 max|z| in the exponent, twice), of exp (2 EPS32, once in the
    numerator and once in the sum), of the sum of S terms and of the division: a relative error
    of 2 delta + 4 EPS32 max|z| + (S + 6) EPS32, and weights below float32's normal range may
    lose all their digits (exp underflows to 0). Masked scores (-inf) give exact zeros.
    """
    weights, relative = _softmax_with_error(scores, score_error)
    return SAFETY * (relative * weights + np.where(weights > 0, TINY32, 0.0))


@dataclass(frozen=True)
class Attention:
    """Attention in float64, and how far float32 attention on the same inputs may be from it."""

    output: np.ndarray
    weights: np.ndarray
    output_error: np.ndarray
    weights_error: np.ndarray


def float32_attention(query, key, value, scale=None, allowed=None, rounds: int = 0, sizes=None) -> Attention:
    """softmax(Q K^T scale) V in float64 (`tests.support.reference.attention`) and elementwise bounds on the
    error of a float32 computation from the same inputs.

    ``rounds`` and ``sizes``: when the float32 inputs were themselves computed, as X @ W of width C,
    pass the exact float64 products as inputs, ``rounds=C`` and ``sizes`` = (|X| @ |W_Q|, |X| @ |W_K|,
    |X| @ |W_V|), bounds on the inputs' sizes. A score is then off by (d_k + 2 rounds + 2) EPS32
    (|q| . |k|) |scale| (its dot product, its inputs' errors and the scaling, wherever the kernel
    applies it); an output by the weights' relative error, the sum of S terms and the values'
    own error, all times sum_j w_j |v_j|.
    """
    q, k, v = (as64(x) for x in (query, key, value))
    d_k, S = q.shape[-1], k.shape[-2]
    scale = 1.0 / np.sqrt(d_k) if scale is None else float(scale)
    size_q, size_k, size_v = (np.abs(as64(x)) for x in (sizes or (q, k, v)))
    output, weights = attention(q, k, v, allowed=None if allowed is None else as64(allowed) > 0, scale=scale)
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if allowed is not None:
        scores = np.where(np.broadcast_to(as64(allowed) > 0, scores.shape), scores, -np.inf)
    score_error = (d_k + 2 * rounds + 2) * EPS32 * (size_q @ np.swapaxes(size_k, -1, -2)) * abs(scale)
    _, relative = _softmax_with_error(scores, score_error)
    weights_error = SAFETY * (relative * weights + np.where(weights > 0, TINY32, 0.0))
    output_error = SAFETY * (
        (relative + (S + rounds) * EPS32) * (weights @ size_v) + TINY32 * size_v.sum(axis=-2, keepdims=True)
    )
    return Attention(output, weights, output_error, weights_error)


def assert_within(actual, expected, error, what: str = "") -> None:
    """|actual - expected| <= error, elementwise (NaN matches NaN); a scalar ``expected`` is
    expected everywhere."""
    actual, expected = as64(actual), as64(expected)
    if expected.ndim == 0:
        expected = np.broadcast_to(expected, actual.shape)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    both_nan = np.isnan(actual) & np.isnan(expected)
    gap = np.where(both_nan, 0.0, np.abs(actual - expected))
    error = np.broadcast_to(as64(error), gap.shape)
    worst = np.unravel_index(np.argmax(np.nan_to_num(gap - error, nan=np.inf)), gap.shape) if gap.size else ()
    assert (gap <= error).all(), (
        f"{what}: off by {gap[worst]:.3g} at {worst}, allowed {error[worst]:.3g}\n"
        f"actual   {actual.ravel()[:12]}\nexpected {expected.ravel()[:12]}"
    )

"""The position encodings of the papers in float64 NumPy (sinusoidal, RoPE), and how far their
rounding may move a result (the tests of snippets/positions/).

Each test reads its snippet's inputs and results from the ``values`` fixture and checks them against
these formulas, written out independently of attn_ref, with tolerances derived from the rounding.
"""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import float32_attention
from tests.support.reference import as64


def frequencies(d: int, base: float = 10000.0) -> np.ndarray:
    """theta_i = base^(-2i/d), i = 0 .. d/2 - 1: the sinusoidal encoding's and RoPE's frequencies."""
    return base ** (-np.arange(0, d, 2) / d)


def sinusoidal(T: int, C: int) -> np.ndarray:
    """PE[t, 2i] = sin(t theta_i), PE[t, 2i + 1] = cos(t theta_i) (Vaswani et al., 2017, section 3.5)."""
    angles = np.arange(T)[:, None] * frequencies(C)
    pe = np.empty((T, C))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return pe


def rotate(x: np.ndarray, positions, interleaved: bool = True, theta=None) -> np.ndarray:
    """RoPE (Su et al., 2021, equation 34): pair i of the row at position p turned by p theta_i.

    ``x`` is ``(..., T, d)``; ``positions`` broadcasts to ``(..., T)``. Pairs are features
    (2i, 2i + 1) when ``interleaved``, else (i, i + d/2). ``theta``, the ``(d/2,)`` frequencies,
    defaults to RoPE's own with base 10000.
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    first, second = (
        (np.arange(0, d, 2), np.arange(1, d, 2)) if interleaved else (np.arange(d // 2), np.arange(d // 2, d))
    )
    theta = frequencies(d) if theta is None else np.asarray(theta, dtype=np.float64)
    a = np.asarray(positions, dtype=np.float64)[..., None] * theta
    out = np.empty_like(x)
    out[..., first] = x[..., first] * np.cos(a) - x[..., second] * np.sin(a)
    out[..., second] = x[..., first] * np.sin(a) + x[..., second] * np.cos(a)
    return out


def rotation_rounding(x: np.ndarray, eps: float, interleaved: bool = True) -> np.ndarray:
    """How far each entry of a rotation computed in precision ``eps`` may lie from the exact one.

    The angles are float64 (apply_rotary's, and the tests'); cos and sin are rounded to ``eps``,
    then u cos - v sin and u sin + v cos each round two products and a sum: at most 2 eps (|u| + |v|).
    """
    x = np.abs(np.asarray(x, dtype=np.float64))
    d = x.shape[-1]
    pairs = x[..., 0::2] + x[..., 1::2] if interleaved else x[..., : d // 2] + x[..., d // 2 :]
    out = np.empty_like(x)
    if interleaved:
        out[..., 0::2] = out[..., 1::2] = 2 * eps * pairs
    else:
        out[..., : d // 2] = out[..., d // 2 :] = 2 * eps * pairs
    return out


def dot_rounding(q: np.ndarray, k: np.ndarray, dq: np.ndarray, dk: np.ndarray, eps: float) -> np.ndarray:
    """How far q . k computed in precision ``eps`` from inputs off by at most ``dq`` and ``dk`` may lie
    from the exact q . k, for rows ``q`` (..., L, d) and ``k`` (..., S, d): the inputs' errors, then
    d products and sums, each rounded."""
    q, k = np.abs(q), np.abs(k)
    d = q.shape[-1]
    return (
        dq @ k.swapaxes(-1, -2)
        + q @ dk.swapaxes(-1, -2)
        + dq @ dk.swapaxes(-1, -2)
        + d * eps * (q @ k.swapaxes(-1, -2))
    )


def permutation(matrix) -> list[int]:
    """perm with matrix @ X == X[perm], after checking that ``matrix`` is a permutation matrix."""
    P = as64(matrix)
    assert set(np.unique(P)) <= {0.0, 1.0} and (P.sum(axis=0) == 1).all() and (P.sum(axis=1) == 1).all()
    return P.argmax(axis=1).tolist()


def projected_attention(values, X, allowed=None, rounds=0, size=None):
    """A snippet's f(X) = attention(X W_Q, X W_K, X W_V) in float64 (``values`` holds the W's), with
    the error bounds of its float32 projections X @ W, for an input X that is itself off by
    ``rounds`` EPS32 relative to ``size`` (default: exact)."""
    W_Q, W_K, W_V = (as64(values[name]) for name in ("W_Q", "W_K", "W_V"))
    size = np.abs(X) if size is None else size
    sizes = [size @ np.abs(W) for W in (W_Q, W_K, W_V)]
    return float32_attention(
        X @ W_Q, X @ W_K, X @ W_V, allowed=allowed, rounds=X.shape[-1] + rounds, sizes=sizes
    )

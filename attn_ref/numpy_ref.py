r"""NumPy versions of softmax and scaled dot-product attention.

They mirror `attn_ref.functional` for readers who want to see attention
without PyTorch, and are tested against PyTorch's own attention. They are not
the tests' reference: that is ``tests/support/reference.py``, written in the tests,
independently of ``attn_ref``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["scaled_dot_product_attention", "softmax"]


def softmax(x: ArrayLike, axis: int = -1) -> NDArray[np.floating]:
    r"""Numerically stable softmax along ``axis``; see `attn_ref.functional.softmax`.

    Examples:
        >>> softmax([1.0, 2.0, 3.0]).round(4)
        array([0.09  , 0.2447, 0.6652])
    """
    x = np.asarray(x, dtype=float)
    exps = np.exp(x - x.max(axis=axis, keepdims=True))
    return exps / exps.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(
    query: ArrayLike,
    key: ArrayLike,
    value: ArrayLike,
    attn_mask: ArrayLike | None = None,
) -> tuple[NDArray[np.floating], NDArray[np.floating]]:
    r"""$\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$ in NumPy, returning output and weights.

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``.
        value: ``(..., S, d_v)``.
        attn_mask: Boolean, broadcastable to ``(..., L, S)``; ``True`` may attend.
            A query with every key masked gets zero weights, as in PyTorch;
            ``nan`` and ``inf`` in the inputs propagate as they do there.

    Returns:
        ``(output, weights)`` with shapes ``(..., L, d_v)`` and ``(..., L, S)``.

    Examples:
        >>> from attn_ref.examples import THREE_TOKENS
        >>> X = np.array(THREE_TOKENS)
        >>> output, weights = scaled_dot_product_attention(X, X, X)
        >>> weights.round(4)
        array([[0.4223, 0.1554, 0.4223],
               [0.0159, 0.8668, 0.1173],
               [0.1554, 0.4223, 0.4223]])
    """
    q, k, v = (np.asarray(a, dtype=float) for a in (query, key, value))
    if q.ndim < 2 or k.shape[:-2] != q.shape[:-2] or k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"key has shape {k.shape}, expected (..., S, {q.shape[-1]}) to match query {q.shape}"
        )
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"value has shape {v.shape}, expected {k.shape[:-1]} + (d_v,) to match key")
    with np.errstate(invalid="ignore"):  # nan and inf in the inputs propagate, as in PyTorch, silently
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., L, S)
        if attn_mask is not None:
            mask = _broadcastable_mask(attn_mask, scores.shape)
            scores = scores + np.where(mask, 0.0, -np.inf)  # added, as PyTorch does: nan stays nan
        weights = softmax(scores)  # a row of -inf gives nan here
        no_key = np.all(scores == -np.inf, axis=-1, keepdims=True)  # (..., L, 1): every key masked
        weights = np.where(no_key, 0.0, weights)
        return weights @ v, weights  # (..., L, S) @ (..., S, d_v) -> (..., L, d_v)


def _broadcastable_mask(attn_mask: ArrayLike, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    mask = np.asarray(attn_mask, dtype=bool)
    try:
        fits = np.broadcast_shapes(mask.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"attn_mask has shape {mask.shape}, which does not broadcast to {shape}")
    return mask

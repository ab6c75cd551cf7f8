"""Attention written out in float64 NumPy, independently of attn_ref: the tests' one reference.

With it: `as64`, which brings a tensor (or anything array-like) into float64 NumPy, and the
machine epsilons and unit roundoffs that the tests' rounding bounds are written with.
"""

from __future__ import annotations

import math

import numpy as np
import torch

EPS32 = float(np.finfo(np.float32).eps)  # the relative error of one float32 operation, 2^-23
EPS64 = float(np.finfo(np.float64).eps)
U32 = 2.0**-24  # float32's unit roundoff: half its machine epsilon
U64 = 2.0**-53


def as64(x) -> np.ndarray:
    """A float64 NumPy copy of a tensor, array, number or nested list (exact for float32 data)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(z - max) / sum(exp(z - max)) along ``axis``."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    allowed: np.ndarray | None = None,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """softmax(Q K^T * scale) V, returning (output, weights), for ``(..., L, d)`` inputs.

    ``allowed`` is a boolean ``(..., L, S)`` mask, True where a query may see a key;
    a query that may see no key gets zero weights. ``scale`` defaults to 1/sqrt(d_k).
    """
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (query, key, value))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale  # (..., L, S)
    if allowed is None:
        weights = softmax(scores)
    else:
        allowed = np.broadcast_to(allowed, scores.shape)
        row_max = np.where(allowed, scores, -np.inf).max(axis=-1, keepdims=True)
        e = np.where(allowed, np.exp(scores - np.where(np.isfinite(row_max), row_max, 0.0)), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights


def plain_attention(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, allowed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """softmax(Q K^T / sqrt(d_k) with -inf where not allowed) V, returning (output, weights), in
    float64 with no special case: a query that may see no key gets nan weights (0 / 0)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (query, key, value))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    with np.errstate(invalid="ignore"):  # -inf - (-inf) in a row that is all -inf
        weights = softmax(np.where(allowed, scores, -np.inf))
    return weights @ v, weights


def causal(L: int, S: int | None = None, lower_right: bool = False) -> np.ndarray:
    """The ``(L, S)`` causal mask, True where a query may see a key (``S`` defaults to ``L``).

    Query i (0-based) sees keys 0..i (top-left alignment), or keys 0..S-L+i with ``lower_right``,
    where the L queries are the last L of the S positions.
    """
    S = L if S is None else S
    return np.tri(L, S, k=S - L if lower_right else 0, dtype=bool)


def multihead_attention(
    x: np.ndarray, state, num_heads: int, allowed: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """torch.nn.MultiheadAttention's self-attention written out in float64, from its weights.

    ``x`` is ``(..., L, C)``; ``state`` maps ``in_proj_weight`` (3C, C: W_Q^T, W_K^T, W_V^T
    stacked), ``in_proj_bias``, ``out_proj.weight`` and ``out_proj.bias`` to arrays (a
    ``state_dict()`` will do). ``allowed`` is True where a query may see a key, broadcastable to
    ``(..., H, L, S)``; a query that may see no key gets zero weights (see ``attention``).
    Returns the per-head ``heads`` ``(..., H, L, d)`` and ``weights`` ``(..., H, L, S)``, their
    ``concat`` ``(..., L, C)`` (each token's heads side by side) and the projected ``output``.
    """
    x = np.asarray(x, dtype=np.float64)
    W, b, W_out, b_out = (
        np.asarray(state[name], dtype=np.float64)
        for name in ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")
    )
    C = x.shape[-1]
    d = C // num_heads  # d_k of each head

    def split_heads(i: int) -> np.ndarray:  # projection i (0: Q, 1: K, 2: V) as (..., H, L, d)
        projected = x @ W[i * C : (i + 1) * C].T + b[i * C : (i + 1) * C]  # nn.Linear stores W^T
        return np.moveaxis(projected.reshape(*x.shape[:-1], num_heads, d), -2, -3)

    heads, weights = attention(split_heads(0), split_heads(1), split_heads(2), allowed)
    concat = np.moveaxis(heads, -3, -2).reshape(x.shape)
    return {"heads": heads, "weights": weights, "concat": concat, "output": concat @ W_out.T + b_out}


def linear(x, module) -> np.ndarray:
    """``x @ W^T + b`` in float64, from an ``nn.Linear``'s weights."""
    out = np.asarray(x, dtype=np.float64) @ as64(module.weight).T
    return out if module.bias is None else out + as64(module.bias)


def layer_norm(x, norm) -> np.ndarray:
    """An ``nn.LayerNorm`` over the last axis in float64: (x - mean) / sqrt(var + eps) * gamma + beta,
    with the biased variance, as LayerNorm computes it."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + norm.eps) * as64(norm.weight) + as64(norm.bias)


def gelu(x) -> np.ndarray:
    """The exact GELU, x Phi(x), with Phi written with erf."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def multihead(query, key, layer, allowed=None):
    """attn_ref's ``MultiHeadAttention`` ``layer`` written out in float64, from its weights:
    (output, per-head weights)."""
    H = layer.num_heads

    def heads(x, projection):  # (..., T, C) -> (..., H, T, d_k)
        projected = linear(x, projection)
        return np.moveaxis(projected.reshape(*projected.shape[:-1], H, -1), -2, -3)

    out, weights = attention(
        heads(query, layer.q_proj), heads(key, layer.k_proj), heads(key, layer.v_proj), allowed
    )
    concat = np.moveaxis(out, -3, -2).reshape(*out.shape[:-3], out.shape[-2], -1)  # (..., L, H * d_k)
    return linear(concat, layer.out_proj), weights

"""Causal attention with shared key/value heads, written out in float64 NumPy with its gradients, and
how far a float computation split over ranks and merged by log-sum-exp may lie from it (the tests of
attn_ref.context_parallel and of its tutorial); the tiles of scores that a causal mask leaves a rank.

The references are independent of attn_ref: the attention and its chain-rule gradients of
tests/support/reference.py and tests/support/backward_reference.py, on key/value heads repeated for
their query heads (query head h reads key/value head h // (H / H_kv)), the gradients of a repeated
head summed back into it.
"""

from __future__ import annotations

import math

import numpy as np

from tests.support.backward_reference import error_bounds, reference_gradients
from tests.support.reference import as64, attention, causal


def repeat_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """``(B, H_kv, T, d)`` -> ``(B, heads, T, d)``: each key/value head once for each query head it serves."""
    return np.repeat(x, heads // x.shape[1], axis=1)


def sum_heads(x: np.ndarray, kv_heads: int) -> np.ndarray:
    """``(B, H, T, d)`` -> ``(B, kv_heads, T, d)``: what the query heads of a group gave, summed."""
    B, H, T, d = x.shape
    return x.reshape(B, kv_heads, H // kv_heads, T, d).sum(axis=2)


def causal_attention_and_grads(q, k, v, d_out) -> tuple[np.ndarray, ...]:
    """(output, dQ, dK, dV) of causal softmax(Q K^T / sqrt(d_k)) V for ``(B, H, T, d)`` queries and
    ``(B, H_kv, T, d)`` keys and values, and of the loss sum(output * d_out), in float64."""
    q, k, v, d_out = (as64(x) for x in (q, k, v, d_out))
    H, H_kv = q.shape[1], k.shape[1]
    keys, values = repeat_heads(k, H), repeat_heads(v, H)
    allowed = causal(q.shape[-2])
    out, _ = attention(q, keys, values, allowed=allowed)
    dq, dk, dv = reference_gradients(q, keys, values, d_out, allowed=allowed)
    return out, dq, sum_heads(dk, H_kv), sum_heads(dv, H_kv)


def merged_bounds(q, k, v, d_out, eps: float, merges: int) -> tuple[np.ndarray, ...]:
    """Entrywise bounds on |computed - exact| of (output, dQ, dK, dV) of `causal_attention_and_grads`
    computed in a float format of machine epsilon ``eps`` in parts (pairs of chunks, each tile by
    tile), their partial outputs merged by log-sum-exp, at most ``merges`` merges per query.

    `error_bounds` holds for one tiled pass. A part's normalised output weighs key j by
    exp(s_j - lambda_p); a merge scales it by exp(lambda_p - lambda), with lambda computed as
    m + log(sum exp(lambda_p - m)). Each part's log-sum-exp carries what a tiled pass's does (the
    scores' error, gamma(4 T + 4), u |lambda_p|), and each merge adds, to the relative error of
    every weight, the rounding of lambda_p - lambda and of lambda (u times their sizes, each at
    most Lambda = max |s_j| + log T) and a few roundings of exp, log and the sum: at most
    4 u Lambda + gamma(8) per merge. These are added to each query's log-sum-exp error, which
    `error_bounds` carries into every weight, the output and the gradients. A shared key/value
    head sums its query heads' gradients: H / H_kv more terms in each sum of dK and dV, which
    widens their bound by that many roundings of the same terms.
    """
    u = eps / 2

    def gamma(n):
        return n * u / (1 - n * u)

    q, k, v, d_out = (as64(x) for x in (q, k, v, d_out))
    H, H_kv = q.shape[1], k.shape[1]
    T, d_k = q.shape[-2:]
    keys, values = repeat_heads(k, H), repeat_heads(v, H)
    allowed = causal(T)
    scale = 1.0 / math.sqrt(d_k)
    scores = np.where(allowed, scale * q @ np.swapaxes(keys, -1, -2), 0.0)
    size = np.abs(scores).max(axis=-1, keepdims=True) + math.log(T) + 1.0  # Lambda, per query
    score_error = (
        gamma(d_k + 1) * scale * np.where(allowed, np.abs(q) @ np.swapaxes(np.abs(keys), -1, -2), 0.0)
    )
    part_error = score_error.max(axis=-1, keepdims=True) + gamma(4 * T + 4) + u * size
    lse_error = part_error + merges * (4 * u * size + gamma(8))
    e_out, e_dq, e_dk, e_dv = error_bounds(
        q, keys, values, d_out, eps, allowed, lse_error=lse_error, output=True
    )
    widen = 1.0 + (H // H_kv) / (T + 2)  # gamma(T + 2 + H / H_kv) over gamma(T + 2), first order
    return e_out, e_dq, widen * sum_heads(e_dk, H_kv), widen * sum_heads(e_dv, H_kv)


def visible_tiles(rows: np.ndarray, cols: np.ndarray, block: int) -> int:
    """Tiles of ``block`` x ``block`` scores, queries at positions ``rows`` against keys at
    positions ``cols`` (each cut into runs of ``block`` consecutive positions, in order), that hold
    at least one key a query may see under the causal mask: the tiles a causal computation cannot skip."""
    visible = cols[None, :] <= rows[:, None]  # the causal mask: key j visible to query i
    return sum(
        bool(visible[i : i + block, j : j + block].any())
        for i in range(0, len(rows), block)
        for j in range(0, len(cols), block)
    )

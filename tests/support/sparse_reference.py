"""Block-sparse attention written out in float64 NumPy, one query at a time, independently of
attn_ref.sparse: block means, the selection of each query (its own block, and the best earlier
blocks by a sort), and softmax over the keys it selected."""

from __future__ import annotations

import math

import numpy as np


def block_means_np(k: np.ndarray, block_size: int) -> np.ndarray:
    """``(..., S, d)`` keys -> ``(..., ceil(S / block_size), d)``: each block's mean key."""
    S = k.shape[-2]
    return np.stack(
        [k[..., s : min(s + block_size, S), :].mean(axis=-2) for s in range(0, S, block_size)], -2
    )


def selection_np(scores: np.ndarray, top_k: int, block_size: int) -> np.ndarray:
    """``(L, n_blocks)`` scores of one sequence and head -> the blocks each query keeps: its own, and
    the ``top_k`` best wholly before it, ties to the earlier block."""
    L, n = scores.shape
    chosen = np.zeros((L, n), dtype=bool)
    for t in range(L):
        own = t // block_size
        chosen[t, own] = True
        earlier = sorted(range(own), key=lambda i: (-scores[t, i], i))
        chosen[t, earlier[:top_k]] = True
    return chosen


def window_np(L: int, n_blocks: int, num_blocks: int, block_size: int) -> np.ndarray:
    """``(L, n_blocks)``: each query's own block and the ``num_blocks`` blocks just before it."""
    return np.array([[0 <= t // block_size - i <= num_blocks for i in range(n_blocks)] for t in range(L)])


def sparse_attention_np(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, chosen: np.ndarray, block_size: int
) -> np.ndarray:
    """Softmax(q k^T / sqrt(d)) over the keys j <= t in the blocks query t chose, for one sequence
    and head, ``(L, d_v)``."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    out = np.zeros((q.shape[0], v.shape[1]))
    for t in range(q.shape[0]):
        allowed = [j for j in range(k.shape[0]) if j <= t and chosen[t, j // block_size]]
        s = q[t] @ k[allowed].T / math.sqrt(q.shape[1])
        w = np.exp(s - s.max())
        out[t] = (w / w.sum()) @ v[allowed]
    return out

"""Cache eviction written out in float64 NumPy, one row at a time: the policies of
attn_ref.serving.eviction, and a RotaryDecoder's forward pass under per-layer masks and positions."""

from __future__ import annotations

import numpy as np

from tests.support import reference
from tests.support.positions_reference import rotate
from tests.support.reference import as64


def top_np(scores: np.ndarray, budget: int, forced: np.ndarray | None = None) -> np.ndarray:
    """One row: forced entries, then the highest scores, the earlier entry first on a tie."""
    S = len(scores)
    forced = np.zeros(S, dtype=bool) if forced is None else forced
    keep = forced.copy()
    others = sorted((j for j in range(S) if not forced[j]), key=lambda j: (-scores[j], j))
    for j in others[: budget - int(forced.sum())]:
        keep[j] = True
    return keep


def rows_np(scores: np.ndarray, budget: int, forced: np.ndarray | None = None) -> np.ndarray:
    """`top_np` on every row of ``(..., S)`` scores."""
    keep = np.zeros(scores.shape, dtype=bool)
    for index in np.ndindex(*scores.shape[:-1]):
        keep[index] = top_np(scores[index], budget, forced)
    return keep


def sink_window_np(S: int, budget: int, sinks: int) -> np.ndarray:
    return np.array([j < sinks or j >= S - (budget - sinks) for j in range(S)])


def h2o_np(w: np.ndarray, budget: int, recent: int | None = None) -> np.ndarray:
    """Column sums of each head's (T, T) weights, the last ``recent`` (half the budget) forced."""
    T = w.shape[-1]
    recent = budget // 2 if recent is None else recent
    return rows_np(w.sum(-2), budget, np.arange(T) >= T - recent)


def snapkv_np(w: np.ndarray, budget: int, window: int, kernel: int = 5) -> np.ndarray:
    """The window's votes, averaged over ``kernel`` positions with zeros past the ends."""
    T = w.shape[-1]
    votes = w[..., T - window :, : T - window].sum(-2)  # (..., T - window)
    pad = np.zeros((*votes.shape[:-1], kernel // 2))
    padded = np.concatenate([pad, votes, pad], axis=-1)
    pooled = np.stack([padded[..., j : j + kernel].sum(-1) / kernel for j in range(T - window)], -1)
    scores = np.concatenate([pooled, np.zeros((*votes.shape[:-1], window))], axis=-1)
    return rows_np(scores, budget, np.arange(T) >= T - window)


def tova_np(w: np.ndarray, budget: int) -> np.ndarray:
    """(..., H, T, T) -> (..., H, T): the last query's weights averaged over the heads."""
    shared = rows_np(w[..., -1, :].mean(-2), budget)  # (..., T)
    return np.broadcast_to(shared[..., None, :], w.shape[:-1])


def decode_mask_np(keep: np.ndarray, T: int) -> np.ndarray:
    """(..., P) -> (..., T, T): causal; the queries after the prompt see only kept prompt entries."""
    P = keep.shape[-1]
    mask = np.broadcast_to(np.tril(np.ones((T, T), dtype=bool)), (*keep.shape[:-1], T, T)).copy()
    for i in range(P, T):
        mask[..., i, :P] = keep
    return mask


def _heads(x: np.ndarray, projection, H: int) -> np.ndarray:
    """(B, T, C) -> (B, H, T, d_k)."""
    B, T, _ = x.shape
    return np.moveaxis(reference.linear(x, projection).reshape(B, T, H, -1), 2, 1)


def rotary_forward_np(model, tokens: np.ndarray, masks=None, positions=None):
    """A `RotaryDecoder` in float64: logits and each layer's per-head weights."""
    B, T = tokens.shape
    positions = np.arange(T) if positions is None else np.asarray(positions)
    theta = as64(model.frequencies)
    x = as64(model.token_embedding.weight)[tokens]  # (B, T, C)
    weights = []
    for number, layer in enumerate(model.layers):
        q, k, v = (_heads(x, p, layer.num_heads) for p in (layer.q_proj, layer.k_proj, layer.v_proj))
        q, k = rotate(q, positions, theta=theta), rotate(k, positions, theta=theta)
        allowed = reference.causal(T) if masks is None else masks[number]
        out, w = reference.attention(q, k, v, allowed)
        x = x + reference.linear(np.moveaxis(out, 1, 2).reshape(B, T, -1), layer.out_proj)
        weights.append(w)
    return x @ as64(model.unembedding.weight).T, weights

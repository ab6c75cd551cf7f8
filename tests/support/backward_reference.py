"""The gradients of attention written out in float64 NumPy from the chain rule, and entrywise bounds
on how far a float computation of them may lie (the tests of attn_ref.backward and of the backward
pass tutorial).

Tolerances come from ``error_bounds``: the first-order forward error analysis of the float
computation (Higham's ``gamma_n = n u / (1 - n u)`` for a chain of ``n`` roundings), entry by
entry, so that a float32 or float16 result is held to what its arithmetic guarantees, not to a
threshold read off one run.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from tests.support.reference import as64


def masked_softmax(scores: np.ndarray, allowed) -> tuple[np.ndarray, ...]:
    """The softmax of each row of ``scores`` over the keys a query may see (``allowed``, None for
    all, and a finite score): (that mask, the row's maximum, its sum of exp(score - maximum), the
    weights). A query that may see no key gets weights of zero."""
    mask = np.ones(scores.shape, dtype=bool) if allowed is None else np.broadcast_to(allowed, scores.shape)
    mask = mask & np.isfinite(scores)
    row_max = np.where(mask, scores, -np.inf).max(axis=-1, keepdims=True)
    e = np.where(mask, np.exp(scores - np.where(np.isfinite(row_max), row_max, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return mask, row_max, total, np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def reference_gradients(q, k, v, d_out, allowed=None, additive=None, scale=None, keep=None, p=0.0):
    """dQ, dK, dV of softmax(scale Q K^T + additive, masked) V in float64 NumPy, with the
    dropout mask ``keep`` (weights kept, divided by 1 - p) applied after the softmax.

    Written from the chain rule, one step at a time: O = (P * Z) V, so dV = (P * Z)^T dO and
    d(P) = (dO V^T) * Z; then the softmax's vector-Jacobian product row by row,
    dS_i = (diag(p_i) - p_i p_i^T) dP_i, as an explicit (S, S) Jacobian per row; then
    S = scale Q K^T. A query that may see no key has P = 0 (as PyTorch returns since 2.5).
    """
    q, k, v, d_out = (np.asarray(a, dtype=np.float64) for a in (q, k, v, d_out))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = scale * q @ np.swapaxes(k, -1, -2)
    if additive is not None:
        scores = scores + np.asarray(additive, dtype=np.float64)
    _, _, _, P = masked_softmax(scores, allowed)
    Z = np.ones_like(P) if keep is None else np.broadcast_to(keep, P.shape) / (1.0 - p)
    dV = np.swapaxes(P * Z, -1, -2) @ d_out
    dP = (d_out @ np.swapaxes(v, -1, -2)) * Z
    jacobian = -P[..., :, None] * P[..., None, :]  # (..., L, S, S): -p_j p_k ...
    jacobian += np.einsum("...j,jk->...jk", P, np.eye(P.shape[-1]))  # ... + p_j on the diagonal
    dS = np.einsum("...jk,...k->...j", jacobian, dP)  # J is symmetric: J^T dP = J dP
    dQ = scale * dS @ k
    dK = scale * np.swapaxes(dS, -1, -2) @ q
    return dQ, dK, dV


def error_bounds(
    q,
    k,
    v,
    d_out,
    eps,
    allowed=None,
    additive=None,
    scale=None,
    keep=None,
    p=0.0,
    lse_error=0.0,
    output=False,
):
    """Entrywise bounds on |computed - exact| of dQ, dK, dV computed tile by tile in a float
    format of machine epsilon ``eps`` (first order in u = eps / 2); with ``output``, the output's
    bound first. ``lse_error`` (a number, or one per query as ``(..., L, 1)``) adds to each
    query's log-sum-exp error: what a computation adds beyond the tiles' (merges of partial results).

    S_ij = scale q_i . k_j carries gamma_{d_k + 1} scale |q_i| . |k_j| (plus u |mask|); the
    log-sum-exp L_i, a running max and a sum rescaled once per tile, at most
    gamma_{4 S + 4} more plus u |L_i|; so P_ij = exp(S_ij - L_i) has a relative error
    rho_ij <= |dS_ij| + |dL_i| + u |S_ij - L_i| + u. Every later step is a product or a sum:
    its error is gamma_n times the sum of the absolute values of its terms, plus what its
    inputs carried.
    """
    u = eps / 2

    def gamma(n):
        return n * u / (1 - n * u)

    q, k, v, d_out = (np.asarray(a, dtype=np.float64) for a in (q, k, v, d_out))
    L, d_k = q.shape[-2:]
    S, d_v = v.shape[-2:]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    T = np.swapaxes
    scores = scale * q @ T(k, -1, -2)
    e_S = gamma(d_k + 1) * scale * np.abs(q) @ T(np.abs(k), -1, -2)
    if additive is not None:
        additive = np.asarray(additive, dtype=np.float64)
        finite = np.where(np.isfinite(additive), additive, 0.0)
        scores, e_S = scores + additive, e_S + u * np.abs(finite) + u * np.abs(scores + finite)
    mask, row_max, total, P = masked_softmax(scores, allowed)
    lse = np.where(total > 0, row_max + np.log(np.where(total > 0, total, 1.0)), 0.0)
    e_L = (
        np.where(mask, e_S, 0.0).max(axis=-1, keepdims=True) + gamma(4 * S + 4) + u * np.abs(lse) + lse_error
    )
    rho = np.where(mask, 2 * e_S + e_L + u * np.abs(np.where(mask, scores, 0.0) - lse) + u, 0.0)
    Z = np.ones_like(P) if keep is None else np.broadcast_to(keep, P.shape) / (1.0 - p)
    Pd = P * Z
    e_Pd = rho * Pd + u * Pd  # the division by 1 - p rounds once more
    out = Pd @ v
    e_O = e_Pd @ np.abs(v) + gamma(4 * S + 4) * Pd @ np.abs(v)  # rescaled once per tile
    e_dV = T(e_Pd, -1, -2) @ np.abs(d_out) + gamma(L + 1) * T(Pd, -1, -2) @ np.abs(d_out)
    dP = (d_out @ T(v, -1, -2)) * Z
    e_dP = (gamma(d_v + 1) * np.abs(d_out) @ T(np.abs(v), -1, -2)) * Z
    D = (d_out * out).sum(axis=-1, keepdims=True)
    e_D = gamma(d_v) * (np.abs(d_out) * np.abs(out)).sum(axis=-1, keepdims=True)
    e_D += (np.abs(d_out) * e_O).sum(axis=-1, keepdims=True)
    dS = P * (dP - D)
    e_dS = rho * np.abs(dS) + P * (e_dP + e_D + u * np.abs(dP - D)) + u * np.abs(dS)
    e_dQ = scale * (e_dS @ np.abs(k) + gamma(S + 2) * np.abs(dS) @ np.abs(k))
    e_dK = scale * (T(e_dS, -1, -2) @ np.abs(q) + gamma(L + 2) * T(np.abs(dS), -1, -2) @ np.abs(q))
    return (e_O, e_dQ, e_dK, e_dV) if output else (e_dQ, e_dK, e_dV)


def subnormal_gap(dtype):
    """The spacing of the subnormal numbers: what rounding can lose near zero."""
    return torch.finfo(dtype).tiny * torch.finfo(dtype).eps


def half_output_bound(q, k, v, d_out, allowed, additive, u, floor, name):
    """What rounding O to half adds to dQ or dK through D = rowsum(dO * O): dS changes by
    P * dD, with |dD_i| <= |dO_i| . (u |O_i| + floor), floor for O's entries near zero."""
    if name == "V":
        return 0.0
    q64, k64, v64, d64 = (as64(t) for t in (q, k, v, d_out))
    scale = 1.0 / math.sqrt(q64.shape[-1])
    out, P = reference_weights(q64, k64, v64, allowed, additive)
    dD = (np.abs(d64) * (u * np.abs(out) + floor)).sum(axis=-1, keepdims=True) * (1 + 1e-3)
    if name == "Q":
        return scale * (P * dD) @ np.abs(k64)
    return scale * np.swapaxes(P * dD, -1, -2) @ np.abs(q64)


def reference_weights(q, k, v, allowed, additive):
    """(output, weights) of softmax(Q K^T / sqrt(d_k) + additive, masked) V in float64 NumPy; a
    query that may see no key gets weights of zero."""
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if additive is not None:
        scores = scores + additive
    _, _, _, P = masked_softmax(scores, allowed)
    return P @ v, P


def pytorch_gradients(q, k, v, d_out, backend=None, **kwargs) -> tuple[torch.Tensor, ...]:
    """PyTorch's own attention and its gradients: (out, dQ, dK, dV) for the loss sum(out * d_out),
    from ``F.scaled_dot_product_attention(q, k, v, **kwargs)`` on ``backend`` (default: its choice)."""
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
        out = F.scaled_dot_product_attention(*leaves, **kwargs)
    return (out.detach(), *torch.autograd.grad((out * d_out).sum(), leaves))

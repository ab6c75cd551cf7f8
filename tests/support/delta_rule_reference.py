"""The delta rule as its papers write it, in float64 NumPy, independently of attn_ref; its inputs, and
how far float32 or float64 may land from it.

DeltaNet (Yang et al., 2024) writes the state as a ``(d_v, d_k)`` matrix read as ``S_t q_t``:
``S_t = S_{t-1} - beta_t (S_{t-1} k_t - v_t) k_t^T``; Gated DeltaNet (Yang, Kautz, Hatamizadeh,
2025) decays it first: ``S_t = S_{t-1} (alpha_t (I - beta_t k_t k_t^T)) + beta_t v_t k_t^T``. The
site's row-vector state is the transpose, ``(d_k, d_v)``, read as ``q_t S_t``.
"""

from __future__ import annotations

import numpy as np
import torch


def delta_rule_np(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, beta: np.ndarray, alpha: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The papers' recurrence for one sequence and head: ``(T, d_k)`` queries and keys, ``(T, d_v)``
    values, ``(T,)`` write strengths and decays. Returns the ``(T, d_v)`` outputs ``S_t q_t`` and the
    last state in the papers' ``(d_v, d_k)`` layout."""
    q, k, v, beta = (np.asarray(a, dtype=np.float64) for a in (q, k, v, beta))
    T, d_k = q.shape
    S = np.zeros((v.shape[1], d_k))
    outputs = np.zeros((T, v.shape[1]))
    for t in range(T):
        a = 1.0 if alpha is None else float(alpha[t])
        column = k[t][:, None]  # (d_k, 1)
        S = S @ (a * (np.eye(d_k) - beta[t] * column @ column.T)) + beta[t] * v[t][:, None] @ column.T
        outputs[t] = S @ q[t]
    return outputs, S


def delta_rule_inputs(
    seed: int,
    shape: tuple[int, ...],
    d_v: int,
    gated: bool,
    dtype: torch.dtype = torch.float64,
    log_alpha_scale: float = 3.0,
) -> list[torch.Tensor]:
    """``[q, k, v, beta]`` (and ``log_alpha`` when gated) for ``shape = (..., T, d_k)``: unit keys, as
    DeltaNet's layer makes them, beta in (0, 1), log alpha in (-log_alpha_scale, 0]; drawn in float64,
    then cast."""
    g = torch.Generator().manual_seed(seed)
    *batch, T, _ = shape
    q = torch.randn(*shape, generator=g, dtype=torch.float64)
    k = torch.randn(*shape, generator=g, dtype=torch.float64)
    k = k / k.norm(dim=-1, keepdim=True)
    v = torch.randn(*batch, T, d_v, generator=g, dtype=torch.float64)
    beta = torch.rand(*batch, T, generator=g, dtype=torch.float64)
    tensors = [q, k, v, beta]
    if gated:
        tensors.append(-log_alpha_scale * torch.rand(*batch, T, generator=g, dtype=torch.float64))
    return [x.to(dtype) for x in tensors]


def delta_rule_bound(eps: float, T: int, d_k: int, d_v: int, C: int, q_max: float, v_max: float) -> float:
    """How far either form may land from the exact recurrence. With unit keys, beta in [0, 1] and
    alpha in (0, 1], every transition alpha (I - beta k^T k) has norm at most 1, so the state stays
    below T max|v| and an output below max|q| T max|v|. Each number passes through at most about
    T (d_k + d_v + C) multiply-adds of numbers that size; the bound allows 8 roundings of ``eps``
    for each."""
    size = max(q_max * T * v_max, 1.0)
    return 8 * eps * T * (d_k + d_v + C) * size

"""The compressed caches' papers written out in float64 NumPy (DeepSeek-V2's multi-head latent
attention, Katharopoulos et al.'s linear attention), and the rounding bounds they are compared with
(the tests of attn_ref.compression and of the cache compression tutorial).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attn_ref.compression import MultiHeadLatentAttention
from tests.support import reference


def tolerance(eps: float, chain: int, magnitude: float) -> float:
    """A bound on the rounding of a chain of products and sums: ``chain`` counts the terms summed
    along the way (the inner sizes of every product, plus one per elementwise step), each of size
    at most ``magnitude``; a factor 4 covers the softmax's exp and division."""
    return 4 * eps * chain * magnitude


def weights_of(linear: torch.nn.Module) -> np.ndarray:
    """nn.Linear stores W^T, of shape (out, in): W, of shape (in, out), in float64."""
    return linear.weight.detach().double().numpy().T


def rope_np(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """RoPE written out: pair (2i, 2i+1) of the vector at position p turns by p * base**(-2i/d)."""
    d = x.shape[-1]
    angles = positions[:, None] * base ** (-np.arange(0, d, 2) / d)  # (T, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    u, v = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = u * cos - v * sin
    out[..., 1::2] = u * sin + v * cos
    return out


def mla_np(mla: MultiHeadLatentAttention, x: np.ndarray) -> dict[str, np.ndarray]:
    """DeepSeek-V2's equations 9 to 19 (with row vectors), causal over all of ``x`` (B, T, C)."""
    B, T, _ = x.shape
    H, dn, dR, dv = mla.num_heads, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim
    positions = np.arange(T, dtype=np.float64)
    q_in = x @ weights_of(mla.q_down) if mla.q_lora_rank else x
    q = (q_in @ weights_of(mla.q_up)).reshape(B, T, H, dn + dR).transpose(0, 2, 1, 3)  # (B, H, T, .)
    q_rope = rope_np(q[..., dn:], positions, mla.rope_base)
    latent = x @ weights_of(mla.kv_down)  # (B, T, d_c)
    rope_key = rope_np(x @ weights_of(mla.k_rope_proj), positions, mla.rope_base)  # (B, T, d_R)
    k_nope = (latent @ weights_of(mla.k_up)).reshape(B, T, H, dn).transpose(0, 2, 1, 3)
    value = (latent @ weights_of(mla.v_up)).reshape(B, T, H, dv).transpose(0, 2, 1, 3)
    query = np.concatenate([q[..., :dn], q_rope], axis=-1)
    key = np.concatenate([k_nope, np.broadcast_to(rope_key[:, None], (B, H, T, dR))], axis=-1)
    heads, _ = reference.attention(query, key, value, reference.causal(T), scale=1 / math.sqrt(dn + dR))
    output = heads.transpose(0, 2, 1, 3).reshape(B, T, H * dv) @ weights_of(mla.out_proj)
    return {
        "output": output,
        "latent": latent,
        "rope_key": rope_key,
        "query": query,
        "key": key,
        "value": value,
    }


def mla_tolerance(mla: MultiHeadLatentAttention, x: torch.Tensor, eps: float) -> float:
    """Projections of inner size C, q_in and d_c, scores of d_c + d_R terms, mixes of T terms; the
    default initialisation keeps every weight below 1, and x is drawn from N(0, 1)."""
    chain = 2 * mla.embed_dim + (mla.q_lora_rank or 0) + 2 * mla.kv_lora_rank + mla.qk_rope_head_dim
    chain += mla.num_heads * mla.v_head_dim + x.shape[1]
    magnitude = (1 + x.abs().max().item()) ** 2
    return tolerance(eps, chain, magnitude)


def phi_np(x: np.ndarray) -> np.ndarray:
    """elu(x) + 1: x + 1 where x > 0, else exp(x)."""
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_np(q, k, v, causal):
    """Katharopoulos et al.'s linear attention: sum_j phi(q).phi(k_j) v_j / sum_j phi(q).phi(k_j)."""
    sim = phi_np(q) @ np.swapaxes(phi_np(k), -1, -2)  # (..., L, S)
    if causal:
        sim = sim * reference.causal(q.shape[-2], k.shape[-2])
    weights = sim / sim.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def linear_tolerance(q, k, v, eps, against_numpy=False):
    """A weighted mean of the values with positive weights: each weight is off by about
    (d_k + S) eps relative to itself, so the output by that much of the largest |value|.

    Against NumPy's exp, PyTorch's elu(x) + 1 (expm1, then + 1) is off by about eps absolutely,
    which is eps / phi relative to a small phi(x): the bound grows by 1 / the smallest phi."""
    relative = 1.0
    if against_numpy:
        relative += 1.0 / min(phi_np(q.numpy()).min(), phi_np(k.numpy()).min())
    return tolerance(eps, q.shape[-1] + k.shape[-2] + 2, relative * (v.abs().max().item() + 1e-300))


def draw_contexts(g, batch, num_pairs, num_queries, num_keys=64, num_values=64):
    """Contexts drawn here: distinct keys (the first num_pairs of a random permutation), values,
    and queries chosen among the context's keys."""
    keys = torch.stack([torch.randperm(num_keys, generator=g)[:num_pairs] for _ in range(batch)])
    values = torch.randint(0, num_values, (batch, num_pairs), generator=g)
    which = torch.randint(0, num_pairs, (batch, num_queries), generator=g)
    return keys, values, keys.gather(1, which), values.gather(1, which)

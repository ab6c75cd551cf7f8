r"""The cost of decoding, and split-K decoding, which spreads one query's work along the keys.

`attention_intensity` counts the multiply-adds per byte read: decoding reads
every cached key for a few multiply-adds, so it is bound by memory.
`split_k_attention` (Flash-Decoding's split-K) gives each worker a share of
the keys; `merge_partials` merges the workers' outputs exactly.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref._numerics import compute_dtype, finite_or_zero

__all__ = ["attention_intensity", "merge_partials", "split_k_attention"]


def attention_intensity(
    L: int,
    S: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    bytes_per_number: int = 2,
    causal: bool = False,
) -> float:
    r"""Multiply-adds per byte read, for one sequence's attention of ``L`` queries over ``S`` keys.

    Each (query, key) pair a query meets costs $2 d_k$ multiply-adds per head, one
    $d_k$ for its score in $Q K^\top$ and one for its share of $A V$. Without a mask
    there are $L S$ pairs; with a causal mask aligned to the bottom-right corner (the
    queries are the last $L$ of $S$ positions), query $i$ meets $S - L + i + 1$ keys,
    $P = L (S - L) + L (L + 1) / 2$ pairs in all: about half of $L S$ for a prefill
    ($L = S$), all of it for one decoding step ($L = 1$). The bytes read are those of
    $Q$ (``H L d_k`` numbers) and of $K$ and $V$ (``2 H_kv S d_k``), mask or not.

    $$
    I = \frac{2 H P d_k}{b\,(H L d_k + 2 H_{kv} S d_k)}
    $$

    For one decoding step ($L = 1$) and $S \gg H / H_{kv}$ this is about
    $H / (H_{kv}\, b)$: every key read is used once per query head in its group.
    For a prefill of $T$ tokens ($L = S = T$) it grows like $T$.

    Args:
        L: Queries.
        S: Keys.
        num_heads: ``H``.
        num_kv_heads: ``H_kv``.
        head_dim: ``d_k``.
        bytes_per_number: ``b``: 2 for 16-bit numbers.
        causal: Count only the pairs a bottom-right causal mask lets through; needs ``L <= S``.

    Returns:
        Multiply-adds per byte.

    Examples:
        >>> heads = dict(num_heads=32, num_kv_heads=32, head_dim=128)
        >>> attention_intensity(1, 4096, **heads)  # about 1/2
        0.4999389722934212
        >>> attention_intensity(4096, 4096, **heads)  # every pair: T / 3
        1365.3333333333333
        >>> attention_intensity(4096, 4096, **heads, causal=True)  # (T + 1) / 6
        682.8333333333334
    """
    for name, n in (("L", L), ("S", S), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
        _validate.count(name, n)
    _validate.count("head_dim", head_dim)
    _validate.count("bytes_per_number", bytes_per_number)
    _validate.divides("num_kv_heads", num_kv_heads, "num_heads", num_heads)
    if causal and L > S:
        raise ValueError(f"a causal mask needs L <= S (the queries are the last L keys), got L={L}, S={S}")
    pairs = L * (S - L) + L * (L + 1) // 2 if causal else L * S
    macs = 2 * num_heads * pairs * head_dim
    read = bytes_per_number * (num_heads * L * head_dim + 2 * num_kv_heads * S * head_dim)
    return macs / read


def merge_partials(outputs: Tensor, logsumexps: Tensor) -> tuple[Tensor, Tensor]:
    r"""Merge attention computed over disjoint parts of the keys into attention over all of them.

    Part $i$ gives its normalised output $O_i$ and its log-sum-exp $\lambda_i$.
    With $\lambda = \log \sum_i e^{\lambda_i}$, the merged output is
    $O = \sum_i e^{\lambda_i - \lambda} O_i$: each part weighted by its share of
    the softmax's denominator. A part with no key ($\lambda_i = -\infty$) weighs nothing.

    Args:
        outputs: ``(parts, ..., L, d_v)``.
        logsumexps: ``(parts, ..., L)``.

    Returns:
        ``(output, logsumexp)``: ``(..., L, d_v)`` and ``(..., L)``.

    Examples:
        Two halves of the keys of one query:

        >>> from attn_ref.functional import scaled_dot_product_attention
        >>> g = torch.Generator().manual_seed(0)
        >>> q = torch.randn(1, 4, generator=g)
        >>> k, v = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        >>> halves = (slice(0, 2), slice(2, 6))
        >>> parts = [(q @ k[s].T / 2, v[s]) for s in halves]  # scores, d_k = 4
        >>> outputs = torch.stack([s.softmax(-1) @ p for s, p in parts])  # (2, 1, 4)
        >>> lses = torch.stack([s.logsumexp(-1) for s, _ in parts])  # (2, 1)
        >>> out, _ = merge_partials(outputs, lses)
        >>> torch.allclose(out, scaled_dot_product_attention(q, k, v)[0], atol=1e-6)
        True
    """
    _validate.tensor("outputs", outputs, min_ndim=3)
    _validate.tensor("logsumexps", logsumexps, min_ndim=2)
    _validate.shape(
        "logsumexps", logsumexps, outputs.shape[:-1], "(parts, ..., L): outputs' shape without d_v"
    )
    total = torch.logsumexp(logsumexps, dim=0)  # (..., L)
    weights = (logsumexps - finite_or_zero(total)).exp()  # (parts, ..., L); 0 for an empty part
    return (weights[..., None] * outputs).sum(dim=0), total  # (..., L, d_v)


def split_k_attention(query: Tensor, key: Tensor, value: Tensor, num_splits: int) -> tuple[Tensor, Tensor]:
    """Decoding attention with the keys split across ``num_splits`` workers, merged at the end.

    Each worker attends the queries to its contiguous share of the keys and
    returns its output and log-sum-exp; `merge_partials` combines them. This
    is Flash-Decoding's split-K: with one query per sequence, the work is
    spread along the keys instead of the queries.

    Args:
        query: ``(..., L, d_k)``, usually ``L = 1``.
        key: ``(..., S, d_k)``.
        value: ``(..., S, d_v)``.
        num_splits: Workers, ``1 <= num_splits <= S``.

    Returns:
        ``(output, partial_outputs)``: ``(..., L, d_v)``, and the workers'
        ``(num_splits, ..., L, d_v)`` before the merge.

    Examples:
        >>> from attn_ref.functional import scaled_dot_product_attention
        >>> q, k, v = (
        ...     torch.randn(2, 1, n, 8, generator=torch.Generator().manual_seed(n))
        ...     for n in (1, 9, 9)
        ... )
        >>> out, partial = split_k_attention(q, k, v, num_splits=3)
        >>> expected, _ = scaled_dot_product_attention(q, k, v)
        >>> torch.allclose(out, expected, atol=1e-6), tuple(partial.shape)
        (True, (3, 2, 1, 1, 8))
    """
    _validate.attention_inputs(query, key, value, None, False)
    S = key.shape[-2]
    _validate.count("num_splits", num_splits, maximum=S)
    bounds = [round(S * i / num_splits) for i in range(num_splits + 1)]
    outputs, lses = [], []
    q = query.to(compute_dtype(query.dtype))
    for start, stop in itertools.pairwise(bounds):
        scores = q @ key[..., start:stop, :].to(q.dtype).transpose(-2, -1) / math.sqrt(query.shape[-1])
        lse = torch.logsumexp(scores, dim=-1)  # (..., L)
        outputs.append((scores - lse[..., None]).exp() @ value[..., start:stop, :].to(q.dtype))
        lses.append(lse)
    partial = torch.stack(outputs)  # (num_splits, ..., L, d_v)
    output, _ = merge_partials(partial, torch.stack(lses))
    return output.to(query.dtype), partial

r"""Linear attention: a feature map in place of the softmax, and its recurrent form of fixed size.

`linear_attention` computes it with the ``(L, S)`` weights (Katharopoulos et al.,
2020); `linear_attention_recurrent` computes the same causal output token by
token from a `LinearAttentionState`, which a generating model keeps instead of a
key/value cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from attn_ref import _validate
from attn_ref._numerics import compute_dtype
from attn_ref.masks import causal_mask

__all__ = ["LinearAttentionState", "elu_feature_map", "linear_attention", "linear_attention_recurrent"]


def elu_feature_map(x: Tensor) -> Tensor:
    r"""$\phi(x) = \operatorname{elu}(x) + 1$, elementwise: positive everywhere (Katharopoulos et al., 2020).

    Examples:
        >>> elu_feature_map(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([0.3679, 1.0000, 3.0000])
    """
    return F.elu(x) + 1.0


def linear_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    is_causal: bool = False,
    feature_map: Callable[[Tensor], Tensor] = elu_feature_map,
) -> tuple[Tensor, Tensor]:
    r"""Attention with a feature map in place of the softmax, in its quadratic form.

    $$
    o_i = \frac{\sum_j \phi(q_i) \cdot \phi(k_j)\; v_j}{\sum_j \phi(q_i) \cdot \phi(k_j)}
    $$

    over every key $j$, or over $j \le i$ with ``is_causal=True``. The similarity
    $\phi(q_i) \cdot \phi(k_j)$ replaces $e^{q_i \cdot k_j / \sqrt{d_k}}$; with a
    positive $\phi$ every weight is positive and each row sums to one. This form
    builds the ``(L, S)`` weights, as `attn_ref.scaled_dot_product_attention` does;
    `linear_attention_recurrent` gives the causal output without them.

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``, same leading dimensions as ``query``.
        value: ``(..., S, d_v)``.
        is_causal: Query $i$ sees keys $0, \dots, i$ only; needs ``L == S``.
        feature_map: $\phi$, applied to queries and keys; it must be positive.

    Returns:
        ``(output, weights)``: ``(..., L, d_v)`` and ``(..., L, S)``.

    Examples:
        >>> q = k = torch.zeros(1, 3, 2)  # phi(0) = 1: every key weighs the same
        >>> v = torch.tensor([[[3.0], [6.0], [9.0]]])
        >>> linear_attention(q, k, v)[0].flatten()
        tensor([6., 6., 6.])
        >>> linear_attention(q, k, v, is_causal=True)[0].flatten()  # the mean so far
        tensor([3.0000, 4.5000, 6.0000])
    """
    _, L, S, _ = _validate.attention_inputs(query, key, value, None, is_causal)
    if is_causal and L != S:
        raise ValueError(f"is_causal=True needs one query per key, L == S, got L={L}, S={S}")
    dtype = compute_dtype(query.dtype)
    phi_q, phi_k = feature_map(query.to(dtype)), feature_map(key.to(dtype))  # (..., L, d_k), (..., S, d_k)
    weights = phi_q @ phi_k.transpose(-2, -1)  # (..., L, d_k) @ (..., d_k, S) -> (..., L, S)
    if is_causal:
        weights = weights.masked_fill(~causal_mask(L, S, device=query.device), 0.0)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    output = weights @ value.to(dtype)  # (..., L, S) @ (..., S, d_v) -> (..., L, d_v)
    return output.to(query.dtype), weights.to(query.dtype)


@dataclass(frozen=True)
class LinearAttentionState:
    r"""What causal linear attention keeps between tokens: a fixed size, however many tokens came.

    Attributes:
        state: $\sum_j \phi(k_j)^\top v_j$ over the tokens read, ``(..., d_k, d_v)``.
        normalizer: $\sum_j \phi(k_j)$, ``(..., d_k)``.
        length: Number of tokens read.
    """

    state: Tensor
    normalizer: Tensor
    length: int

    @property
    def nbytes(self) -> int:
        """Bytes of the state and the normalizer."""
        return self.state.nbytes + self.normalizer.nbytes


def linear_attention_recurrent(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    state: LinearAttentionState | None = None,
    *,
    feature_map: Callable[[Tensor], Tensor] = elu_feature_map,
) -> tuple[Tensor, LinearAttentionState]:
    r"""Causal linear attention, token by token, from a state of fixed size.

    For token $t$, with $S_t = S_{t-1} + \phi(k_t)^\top v_t$ (a $d_k \times d_v$
    matrix) and $z_t = z_{t-1} + \phi(k_t)$:

    $$
    o_t = \frac{\phi(q_t)\, S_t}{\phi(q_t) \cdot z_t},
    $$

    which is `linear_attention` with ``is_causal=True``, regrouped: the sums over
    $j \le t$ are kept instead of recomputed (Katharopoulos et al., 2020, section 3.4).
    A language model generating text keeps $(S, z)$ per head and layer instead of a
    key/value cache.

    Args:
        query: ``(..., T, d_k)``: ``T`` new tokens, in order.
        key: ``(..., T, d_k)``.
        value: ``(..., T, d_v)``.
        state: The state after earlier tokens; ``None`` starts from zero.
        feature_map: $\phi$; it must be positive.

    Returns:
        ``(output, state)``: ``(..., T, d_v)`` and the `LinearAttentionState` after the last token.

    Examples:
        >>> q = k = torch.zeros(1, 3, 2)
        >>> v = torch.tensor([[[3.0], [6.0], [9.0]]])
        >>> out, state = linear_attention_recurrent(q, k, v)
        >>> out.flatten(), tuple(state.state.shape), state.length
        (tensor([3.0000, 4.5000, 6.0000]), (1, 2, 1), 3)
        >>> out2, _ = linear_attention_recurrent(  # a 4th token
        ...     q[:, :1], k[:, :1], v[:, :1], state
        ... )
        >>> out2.flatten()  # (3 + 6 + 9 + 3) / 4
        tensor([5.2500])
    """
    _, L, S, d_k = _validate.attention_inputs(query, key, value, None, False)
    if L != S:
        raise ValueError(f"query and key must hold the same T tokens, got L={L} and S={S}")
    _validate.count("T (the tokens in query)", L)
    dtype = compute_dtype(query.dtype)
    phi_q, phi_k = feature_map(query.to(dtype)), feature_map(key.to(dtype))  # (..., T, d_k)
    v = value.to(dtype)
    batch, d_v = query.shape[:-2], value.shape[-1]
    if state is None:
        S_t = torch.zeros((*batch, d_k, d_v), dtype=dtype, device=query.device)  # (..., d_k, d_v)
        z_t = torch.zeros((*batch, d_k), dtype=dtype, device=query.device)  # (..., d_k)
        length = 0
    else:
        _validate.shape("state.state", state.state, (*batch, d_k, d_v), "(..., d_k, d_v) of these inputs")
        _validate.shape("state.normalizer", state.normalizer, (*batch, d_k), "(..., d_k) of these inputs")
        S_t, z_t, length = state.state.to(dtype), state.normalizer.to(dtype), state.length
    outputs = []
    for t in range(L):
        S_t = S_t + phi_k[..., t, :, None] * v[..., t, None, :]  # (..., d_k, 1) * (..., 1, d_v)
        z_t = z_t + phi_k[..., t, :]
        numerator = (phi_q[..., t, None, :] @ S_t).squeeze(
            -2
        )  # (..., 1, d_k) @ (..., d_k, d_v) -> (..., d_v)
        denominator = (phi_q[..., t, :] * z_t).sum(dim=-1, keepdim=True)  # (..., 1)
        outputs.append(numerator / denominator)
    output = torch.stack(outputs, dim=-2)  # T of (..., d_v) -> (..., T, d_v)
    kept = LinearAttentionState(S_t.to(query.dtype), z_t.to(query.dtype), length + L)
    return output.to(query.dtype), kept

r"""Attending to nothing: a sink logit in the softmax's denominator, and a gate on each head.

`sink_softmax` normalizes each row of scores with one more logit per head, the sink,
that brings no value (gpt-oss); `sink_attention` is attention with it: a head may put
its weight on nothing. `output_gate` multiplies each head's output by a sigmoid of
the layer's input (Qiu et al., 2025; Qwen3-Next): a head may output nothing.
Both answer the question a plain softmax cannot: what does a head do when no key is
worth reading?
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attn_ref import _validate

__all__ = ["output_gate", "sink_attention", "sink_softmax"]


def sink_softmax(scores: Tensor, sink: Tensor) -> Tensor:
    r"""Softmax of each row with one more logit per head, the sink, left out of the result.

    $$
    a_{ij} = \frac{e^{s_{ij}}}{e^{\sigma_h} + \sum_k e^{s_{ik}}}
    $$

    It is the softmax of the row with the sink appended as one more column,
    that column dropped. The maximum subtracted before ``exp`` includes the
    sink, so neither a large score nor a large sink overflows, and a row
    whose scores are all ``-inf`` (no key to see) gets weights of zero.

    Args:
        scores: ``(B, H, L, S)`` scaled scores, ``-inf`` where masked.
        sink: ``(H,)`` one logit per head.

    Returns:
        ``(B, H, L, S)`` weights; each row sums to one minus the sink's share.

    Examples:
        Three keys of score 0; head 0's sink is 0, head 1's is ln 9:

        >>> scores = torch.zeros(1, 2, 1, 3)  # (B, H, L, S)
        >>> sink_softmax(scores, torch.tensor([0.0, math.log(9.0)]))
        tensor([[[[0.2500, 0.2500, 0.2500]],
        <BLANKLINE>
                 [[0.0833, 0.0833, 0.0833]]]])
    """
    _validate.tensor("scores", scores)
    _validate.shape("scores", scores, (None, None, None, None), "(B, H, L, S)")
    H = scores.shape[1]
    _validate.tensor("sink", sink)
    _validate.shape("sink", sink, (H,), "(H,), one logit per head")
    sinks = sink.to(scores.dtype).view(1, H, 1, 1)  # (1, H, 1, 1)
    # (B, H, L, 1): finite even for a fully masked row, as the sink is
    top = torch.maximum(scores.amax(dim=-1, keepdim=True), sinks)
    exps = (scores - top).exp()  # (B, H, L, S); 0 where masked
    return exps / (exps.sum(dim=-1, keepdim=True) + (sinks - top).exp())


def sink_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    sink: Tensor,
    attn_mask: Tensor | None = None,
    *,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Attention with one learned sink logit per head in the softmax's denominator (gpt-oss).

    $$
    a_{ij} = \frac{e^{s_{ij}}}{e^{\sigma_h} + \sum_k e^{s_{ik}}},
    \qquad o_i = \sum_j a_{ij} v_j
    $$

    The sink $\sigma_h$ takes part in the normalization and brings no value
    (`sink_softmax`), so a row's weights sum to less than one. It is exactly
    ordinary attention over one more key whose score is $\sigma_h$ for every
    query and whose value is zero.

    Args:
        query: ``(B, H, L, d_k)``.
        key: ``(B, H, S, d_k)``.
        value: ``(B, H, S, d_v)``.
        sink: ``(H,)`` one logit per head.
        attn_mask: Boolean, ``True`` where a query may see a key;
            broadcastable to ``(B, H, L, S)``.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.

    Returns:
        ``(output, weights)``: ``(B, H, L, d_v)`` and ``(B, H, L, S)``, the
        weights of the real keys only.

    Examples:
        Two keys with score 0 and a sink of logit 0: each key gets 1/3.

        >>> q = torch.zeros(1, 1, 1, 2)
        >>> k, v = torch.zeros(1, 1, 2, 2), torch.ones(1, 1, 2, 2)
        >>> out, w = sink_attention(q, k, v, sink=torch.zeros(1))
        >>> w
        tensor([[[[0.3333, 0.3333]]]])
        >>> out  # the value 1, times the 2/3 that reached the keys
        tensor([[[[0.6667, 0.6667]]]])
    """
    _, _, _, d_k = _validate.attention_inputs(query, key, value, attn_mask, False)
    _validate.shape("query", query, (None, None, None, None), "(B, H, L, d_k)")
    scale = 1.0 / math.sqrt(d_k) if scale is None else _validate.number("scale", scale)
    scores = query @ key.transpose(-2, -1) * scale  # (B, H, L, S)
    if attn_mask is not None:
        _validate.boolean("attn_mask", attn_mask)
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    weights = sink_softmax(scores, sink)  # (B, H, L, S)
    return weights @ value, weights  # (B, H, L, d_v)


def output_gate(heads: Tensor, gate_logits: Tensor) -> Tensor:
    r"""Each head's output times $\sigma(x W_g)$: a head may output nothing (Qiu et al., 2025).

    With one logit per head (``(B, T, H)``) the whole head is scaled; with one
    per head and feature (``(B, T, H d_k)``, Qwen3-Next's "elementwise" gate)
    each feature is.

    Args:
        heads: ``(B, H, T, d_k)`` each head's attention output.
        gate_logits: ``(B, T, H)`` or ``(B, T, H d_k)``, the layer's input
            projected, before the sigmoid.

    Returns:
        ``(B, H, T, d_k)``.

    Examples:
        >>> heads = torch.ones(1, 2, 1, 3)  # (B, H, T, d_k)
        >>> output_gate(heads, torch.tensor([[[0.0, -1e4]]]))[0, :, 0, 0]
        tensor([0.5000, 0.0000])
    """
    _validate.tensor("heads", heads)
    _validate.shape("heads", heads, (None, None, None, None), "(B, H, T, d_k)")
    B, H, T, d_k = heads.shape
    _validate.tensor("gate_logits", gate_logits)
    if gate_logits.shape not in ((B, T, H), (B, T, H * d_k)):
        raise ValueError(
            f"gate_logits must be (B, T, H) = ({B}, {T}, {H}) or (B, T, H d_k) = "
            f"({B}, {T}, {H * d_k}), got {tuple(gate_logits.shape)}"
        )
    gates = torch.sigmoid(gate_logits).view(B, T, H, -1)  # (B, T, H, 1 or d_k)
    return heads * gates.transpose(1, 2)  # (B, H, T, d_k)

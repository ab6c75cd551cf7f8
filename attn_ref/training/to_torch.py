"""PyTorch's module with the weights of an `attn_ref.multihead.MultiHeadAttention`.

`to_torch_multihead` lets a page check a trained model's attention against
`torch.nn.MultiheadAttention`.
"""

from __future__ import annotations

import torch
from torch import nn

from attn_ref.multihead import MultiHeadAttention

__all__ = ["to_torch_multihead"]


def to_torch_multihead(attention: MultiHeadAttention) -> nn.MultiheadAttention:
    """A `torch.nn.MultiheadAttention` (``batch_first=True``) with the weights of ``attention``.

    The inverse of `MultiHeadAttention.from_torch`: the three input projections are stacked into
    PyTorch's one ``(3C, C)`` ``in_proj_weight``. Remember that PyTorch reads a boolean mask the
    other way round: ``True`` there means *may not attend*.

    Args:
        attention: An `attn_ref.multihead.MultiHeadAttention` with as many key/value heads as
            query heads (PyTorch's module has no grouped-query attention).

    Returns:
        The PyTorch module, on the same device and dtype.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> ours = MultiHeadAttention(8, num_heads=2)
        >>> theirs = to_torch_multihead(ours)
        >>> x = torch.randn(2, 5, 8)
        >>> torch.allclose(ours(x, x, x)[0], theirs(x, x, x)[0], atol=1e-6)
        True
    """
    if attention.num_kv_heads != attention.num_heads:
        raise ValueError(
            f"attention must have num_kv_heads == num_heads, got {attention.num_kv_heads} and "
            f"{attention.num_heads}: torch.nn.MultiheadAttention has no grouped-query attention"
        )
    like = attention.q_proj.weight
    has_bias = attention.q_proj.bias is not None
    theirs = nn.MultiheadAttention(
        attention.embed_dim,
        attention.num_heads,
        bias=has_bias,
        batch_first=True,
        device=like.device,
        dtype=like.dtype,
    )
    projections = (attention.q_proj, attention.k_proj, attention.v_proj)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))  # three (C, C) -> (3C, C)
        theirs.out_proj.weight.copy_(attention.out_proj.weight)
        if has_bias:
            theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))  # (3C,)
            theirs.out_proj.bias.copy_(attention.out_proj.bias)
    return theirs

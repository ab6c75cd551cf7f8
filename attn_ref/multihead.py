r"""Multi-head attention from scratch: split into heads, attend, merge, project.

`MultiHeadAttention` computes what `torch.nn.MultiheadAttention`
computes (with ``batch_first=True``), and `MultiHeadAttention.from_torch`
copies the weights of one into the other so that the two can be compared.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attn_ref.functional import scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "merge_heads", "split_heads"]


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Give each head its own slice of the features.

    Args:
        x: ``(B, T, C)`` with ``C`` divisible by ``num_heads``.
        num_heads: Number of heads ``H``.

    Returns:
        ``(B, H, T, C // H)``.

    Examples:
        >>> split_heads(torch.arange(8.0).reshape(1, 2, 4), num_heads=2)
        tensor([[[[0., 1.],
                  [4., 5.]],
        <BLANKLINE>
                 [[2., 3.],
                  [6., 7.]]]])
    """
    if x.ndim != 3:
        raise ValueError(f"x must have shape (B, T, C), got {tuple(x.shape)}")
    B, T, C = x.shape
    if C % num_heads:
        raise ValueError(f"x has C={C} features, which num_heads={num_heads} does not divide")
    return x.view(B, T, num_heads, C // num_heads).transpose(1, 2)  # (B, T, H, d_k) -> (B, H, T, d_k)


def merge_heads(x: Tensor) -> Tensor:
    """Undo `split_heads`: concatenate the heads' features.

    Args:
        x: ``(B, H, T, d_k)``.

    Returns:
        ``(B, T, H * d_k)``.

    Examples:
        >>> x = torch.arange(8.0).reshape(1, 2, 4)
        >>> torch.equal(merge_heads(split_heads(x, num_heads=2)), x)
        True
    """
    if x.ndim != 4:
        raise ValueError(f"x must have shape (B, H, T, d_k), got {tuple(x.shape)}")
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)  # (B, T, H, d_k) -> (B, T, H * d_k)


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention with batch-first inputs.

    $$
    \operatorname{MultiHead}(Q, K, V) = \operatorname{Concat}(\text{head}_1,
    \dots, \text{head}_H)\, W^O, \qquad
    \text{head}_h = \operatorname{Attention}(Q W^Q_h, K W^K_h, V W^V_h)
    $$

    Each head works in ``d_k = embed_dim // num_heads`` dimensions, so all
    heads together cost about as much as one head of full width.

    Masks follow `attn_ref.scaled_dot_product_attention`: ``True``
    means *may attend*. `torch.nn.MultiheadAttention` uses the
    opposite convention for boolean masks, so negate a mask (``~mask``)
    when passing the same one to both.

    Args:
        embed_dim: Model width ``C``.
        num_heads: Number of heads ``H``; must divide ``embed_dim``.
        bias: Whether the four projections have biases.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> mha = MultiHeadAttention(embed_dim=8, num_heads=2)
        >>> x = torch.randn(1, 5, 8)
        >>> output, weights = mha(x, x, x)
        >>> output.shape, weights.shape  # (B, T, C) and (B, H, T, T)
        (torch.Size([1, 5, 8]), torch.Size([1, 2, 5, 5]))
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide embed_dim={embed_dim}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(B, L, C)``.
            key: ``(B, S, C)``.
            value: ``(B, S, C)``.
            attn_mask: Boolean or additive, broadcastable to ``(B, H, L, S)``.
            is_causal: Apply a causal mask.

        Returns:
            ``(output, weights)``: ``(B, L, C)`` and the per-head ``(B, H, L, S)``.
        """
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.ndim != 3 or x.shape[-1] != self.embed_dim:
                raise ValueError(f"{name} has shape {tuple(x.shape)}, expected (B, T, {self.embed_dim})")
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, L, C) -> (B, H, L, d_k)
        k = split_heads(self.k_proj(key), self.num_heads)  # (B, S, C) -> (B, H, S, d_k)
        v = split_heads(self.v_proj(value), self.num_heads)  # (B, S, C) -> (B, H, S, d_k)
        heads, weights = scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
        return self.out_proj(merge_heads(heads)), weights  # (B, H, L, d_k) -> (B, L, C)

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Build a copy of a `torch.nn.MultiheadAttention` with the same weights.

        PyTorch stores the three input projections stacked in one
        ``(3C, C)`` matrix; they are split here into ``q_proj``, ``k_proj``
        and ``v_proj``.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> theirs = nn.MultiheadAttention(8, num_heads=2, batch_first=True)
            >>> ours = MultiHeadAttention.from_torch(theirs)
            >>> x = torch.randn(2, 5, 8)
            >>> torch.allclose(ours(x, x, x)[0], theirs(x, x, x)[0], atol=1e-6)
            True
        """
        if not mha._qkv_same_embed_dim:
            raise ValueError("mha must use kdim == vdim == embed_dim")
        if mha.bias_k is not None or mha.add_zero_attn or mha.dropout:
            raise ValueError("mha must not use add_bias_kv, add_zero_attn or dropout")
        has_bias = mha.in_proj_bias is not None
        like = mha.in_proj_weight  # same device and dtype as the module copied
        ours = cls(mha.embed_dim, mha.num_heads, bias=has_bias).to(like.device, like.dtype)
        with torch.no_grad():
            projections = (ours.q_proj, ours.k_proj, ours.v_proj)
            for proj, weight in zip(projections, mha.in_proj_weight.chunk(3), strict=True):
                proj.weight.copy_(weight)  # (3C, C) -> three (C, C)
            ours.out_proj.weight.copy_(mha.out_proj.weight)
            if has_bias:
                for proj, bias in zip(projections, mha.in_proj_bias.chunk(3), strict=True):
                    proj.bias.copy_(bias)
                ours.out_proj.bias.copy_(mha.out_proj.bias)
        return ours

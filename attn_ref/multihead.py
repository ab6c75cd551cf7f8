r"""Multi-head attention from scratch: split into heads, attend, merge, project.

`MultiHeadAttention` computes what `torch.nn.MultiheadAttention`
computes (with ``batch_first=True``), and `MultiHeadAttention.from_torch`
copies the weights of one into the other so that the two can be compared.
With ``num_kv_heads`` smaller than ``num_heads`` it becomes grouped-query
attention (multi-query attention when ``num_kv_heads=1``), and with a
`attn_ref.KVCache` it attends to the keys and values of earlier calls too.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.cache import KVCache
from attn_ref.functional import scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "merge_heads", "repeat_kv_heads", "split_heads"]


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
    _validate.tensor("x", x)
    _validate.shape("x", x, (None, None, None), "(B, T, C)")
    B, T, C = x.shape
    _validate.divides("num_heads", _validate.count("num_heads", num_heads), "x's C", C)
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
    _validate.tensor("x", x)
    _validate.shape("x", x, (None, None, None, None), "(B, H, T, d_k)")
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)  # (B, T, H, d_k) -> (B, T, H * d_k)


def repeat_kv_heads(x: Tensor, num_heads: int) -> Tensor:
    """Repeat each key/value head for the group of query heads that shares it.

    With ``H`` query heads and ``H_kv`` key/value heads, each key/value head
    serves ``H // H_kv`` consecutive query heads: query head ``h`` reads
    key/value head ``h // (H // H_kv)``. This is the grouping of
    ``torch.repeat_interleave`` along the head dimension, which is what
    `torch.nn.functional.scaled_dot_product_attention` does with
    ``enable_gqa=True``.

    Args:
        x: ``(B, H_kv, T, d_k)`` keys or values.
        num_heads: Number of query heads ``H``; a multiple of ``H_kv``.

    Returns:
        ``(B, H, T, d_k)``; the input itself when ``H == H_kv``.

    Examples:
        >>> kv = torch.tensor([10.0, 20.0]).reshape(1, 2, 1, 1)  # H_kv = 2 heads
        >>> repeat_kv_heads(kv, num_heads=6).flatten()  # 0-2 read head 0, 3-5 head 1
        tensor([10., 10., 10., 20., 20., 20.])
    """
    _validate.tensor("x", x)
    _validate.shape("x", x, (None, None, None, None), "(B, H_kv, T, d_k)")
    num_kv_heads = x.shape[1]
    _validate.divides(
        "x's H_kv",
        num_kv_heads,
        "num_heads",
        _validate.count("num_heads", num_heads),
        "each key/value head must serve the same number of query heads",
    )
    if num_heads == num_kv_heads:
        return x
    return x.repeat_interleave(num_heads // num_kv_heads, dim=1)  # (B, H_kv, T, d_k) -> (B, H, T, d_k)


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention with batch-first inputs, and optionally fewer key/value heads.

    $$
    \operatorname{MultiHead}(Q, K, V) = \operatorname{Concat}(\text{head}_1,
    \dots, \text{head}_H)\, W^O, \qquad
    \text{head}_h = \operatorname{Attention}(Q W^Q_h, K W^K_{g(h)}, V W^V_{g(h)})
    $$

    Each head works in ``d_k = embed_dim // num_heads`` dimensions, so all
    heads together cost about as much as one head of full width.

    With ``num_kv_heads`` equal to ``num_heads`` (the default), every query
    head has its own key and value head, $g(h) = h$: ordinary multi-head
    attention. With fewer key/value heads, each is shared by a group of
    ``num_heads // num_kv_heads`` consecutive query heads,
    $g(h) = \lfloor h / (H / H_{kv}) \rfloor$: grouped-query attention, or
    multi-query attention when ``num_kv_heads=1``. The key and value
    projections shrink to ``(C, num_kv_heads * d_k)``, and so do the keys and
    values a `attn_ref.KVCache` keeps.

    Masks follow `attn_ref.scaled_dot_product_attention`: ``True``
    means *may attend*. `torch.nn.MultiheadAttention` uses the
    opposite convention for boolean masks, so negate a mask (``~mask``)
    when passing the same one to both.

    Args:
        embed_dim: Model width ``C``.
        num_heads: Number of query heads ``H``; must divide ``embed_dim``.
        bias: Whether the four projections have biases.
        num_kv_heads: Number of key/value heads ``H_kv``; must divide
            ``num_heads``. Defaults to ``num_heads``.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> mha = MultiHeadAttention(embed_dim=8, num_heads=2)
        >>> x = torch.randn(1, 5, 8)
        >>> output, weights = mha(x, x, x)
        >>> output.shape, weights.shape  # (B, T, C) and (B, H, T, T)
        (torch.Size([1, 5, 8]), torch.Size([1, 2, 5, 5]))

        Four query heads sharing one key/value head (multi-query attention):

        >>> mqa = MultiHeadAttention(embed_dim=8, num_heads=4, num_kv_heads=1)
        >>> mqa.q_proj.weight.shape, mqa.k_proj.weight.shape  # stores W^T: (out, in)
        (torch.Size([8, 8]), torch.Size([2, 8]))
        >>> mqa(x, x, x)[1].shape  # still one weight matrix per query head
        torch.Size([1, 4, 5, 5])
    """

    def __init__(
        self, embed_dim: int, num_heads: int, bias: bool = True, num_kv_heads: int | None = None
    ) -> None:
        super().__init__()
        _validate.divides("num_heads", _validate.count("num_heads", num_heads), "embed_dim", embed_dim)
        num_kv_heads = num_heads if num_kv_heads is None else _validate.count("num_kv_heads", num_kv_heads)
        _validate.divides(
            "num_kv_heads",
            num_kv_heads,
            "num_heads",
            num_heads,
            "every key/value head must serve the same number of query heads",
        )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = embed_dim // num_heads
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, kv_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, kv_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query`` to ``key``/``value`` (and to the cached ones).

        With a ``cache``, the keys and values of ``key``/``value`` are appended
        to the ones cached for ``layer``, and the queries attend to all of
        them: ``S`` is then the cached length plus the new one. The new
        queries are the *last* positions, so a causal mask must be aligned
        to the bottom right (`attn_ref.masks.causal_mask` with
        ``lower_right=True``); ``is_causal=True`` aligns it to the top left,
        and is refused once the cache holds keys.

        Args:
            query: ``(B, L, C)``.
            key: ``(B, S_new, C)``.
            value: ``(B, S_new, C)``.
            attn_mask: Boolean or additive, broadcastable to ``(B, H, L, S)``.
            is_causal: Apply a causal (top-left aligned) mask.
            cache: Keys and values of earlier calls, updated in place.
            layer: Which of the cache's layers this attention reads and writes.

        Returns:
            ``(output, weights)``: ``(B, L, C)`` and the per-head ``(B, H, L, S)``.
        """
        for name, x in (("query", query), ("key", key), ("value", value)):
            _validate.tensor(name, x)
            _validate.shape(name, x, (None, None, self.embed_dim), "(B, T, embed_dim)")
        if is_causal and cache is not None and cache.length > 0:
            raise ValueError(
                "is_causal=True aligns the mask to the top left, so the first new query would see only "
                f"cached key 0 of {cache.length}; pass attn_mask=causal_mask(L, S, lower_right=True) instead"
            )
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, L, C) -> (B, H, L, d_k)
        k = split_heads(
            self.k_proj(key), self.num_kv_heads
        )  # (B, S_new, H_kv * d_k) -> (B, H_kv, S_new, d_k)
        v = split_heads(
            self.v_proj(value), self.num_kv_heads
        )  # (B, S_new, H_kv * d_k) -> (B, H_kv, S_new, d_k)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (B, H_kv, S, d_k): the cached keys, then the new ones
        k = repeat_kv_heads(k, self.num_heads)  # (B, H_kv, S, d_k) -> (B, H, S, d_k)
        v = repeat_kv_heads(v, self.num_heads)  # (B, H_kv, S, d_k) -> (B, H, S, d_k)
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
        if not mha.kdim == mha.vdim == mha.embed_dim:
            raise ValueError(
                f"mha must use kdim == vdim == embed_dim, got kdim={mha.kdim}, vdim={mha.vdim}, "
                f"embed_dim={mha.embed_dim}"
            )
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

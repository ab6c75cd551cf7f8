r"""Batch invariance: a request's numbers, bit for bit, whatever else is in its batch.

Float addition is not associative: the last bits of a sum depend on the order of its terms.
A kernel that splits a reduction by how busy it is (how many requests share the batch, where
a prompt was cut into chunks) hands a request other bits in another batch. Here every
reduction has an order fixed by the request's own positions:

- `fixed_order_sum`: a sum along one dimension, added in halves after zero-padding to a power
  of two, so that its order depends on nothing but the length;
- `split_bounds`: where the keys of a query are split, by a fixed split size (boundaries at
  absolute positions, the same in any batch) or into a number of splits (boundaries that move
  when the number does);
- `split_kv_attention`: attention split along the keys at those boundaries, one query row at
  a time, the splits merged with their maxima and sums as Flash-Decoding merges them;
- `batch_invariant`: a copy of a decoder whose linear layers, layer norms and GELUs compute
  every row in a fixed order, which `attn_ref.serving.serve` runs with a fixed ``split_size``.

Each function is built so that its claim holds by construction, on any machine: a row's
result comes from elementwise IEEE operations (add, multiply, divide, square root, maximum),
which give the same bits whatever tensor they sit in, and from exponentials taken on tensors
whose shape and values depend on that row alone.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref._numerics import NEG_INF, compute_dtype, finite_or_zero
from attn_ref.multihead import repeat_kv_heads

__all__ = [
    "FixedOrderLayerNorm",
    "FixedOrderLinear",
    "RowwiseGELU",
    "batch_invariant",
    "fixed_order_sum",
    "split_bounds",
    "split_kv_attention",
]


def fixed_order_sum(x: Tensor, dim: int = -1) -> Tensor:
    r"""Sum ``x`` along ``dim`` in an order that depends only on the length of ``dim``.

    The terms are padded with zeros to a power of two, then the second half is
    added to the first, elementwise, until one term is left: for eight terms,
    $((x_0 + x_4) + (x_2 + x_6)) + ((x_1 + x_5) + (x_3 + x_7))$. Each step is an
    elementwise addition, which IEEE arithmetic rounds the same way wherever
    the numbers sit, so the sum of a row does not depend on how many rows are
    summed with it. Adding a zero changes nothing, so more zeros at the end
    (a longer padding) give the same bits.

    Args:
        x: A floating tensor.
        dim: The dimension to sum.

    Returns:
        ``x`` summed along ``dim`` (that dimension removed).

    Examples:
        Float addition is not associative. In float32, $10^8 + 1$ rounds back
        to $10^8$, so the order decides the answer:

        >>> x = torch.tensor([1e8, 1.0, -1e8, 1.0])
        >>> ((x[0] + x[1]) + x[2]) + x[3]  # left to right: the first 1 is lost
        tensor(1.)
        >>> fixed_order_sum(x)  # (1e8 - 1e8) + (1 + 1)
        tensor(2.)
        >>> fixed_order_sum(torch.ones(3, 5), dim=0)  # three rows, padded to four
        tensor([3., 3., 3., 3., 3.])
    """
    _validate.tensor("x", x, min_ndim=1)
    x = x.movedim(dim, -1)  # (..., n): the summed dimension last
    n = x.shape[-1]
    width = 1 << max(n - 1, 0).bit_length()  # the power of two at or above n
    x = F.pad(x, (0, width - n))  # (..., width): zeros after the terms
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        x = x[..., :half] + x[..., half:]  # (..., half)
    return x[..., 0]


def split_bounds(num_keys: int, *, split_size: int | None = None, num_splits: int | None = None) -> list[int]:
    """Where ``num_keys`` keys are split: ``[0, b_1, ..., num_keys]``.

    With ``split_size``, the boundaries are the multiples of the size: they
    sit at the same absolute positions whatever the number of keys, so a
    longer sequence only adds splits at its end. With ``num_splits``, the keys
    are shared out evenly, as `attn_ref.serving.split_k_attention` does: the
    boundaries can move when the count (or the number of keys) changes.

    Args:
        num_keys: Keys to split, at least 1.
        split_size: Keys per split (the last split may be shorter).
        num_splits: Splits, at most ``num_keys``. Give exactly one of the two.

    Returns:
        The boundaries, increasing, from 0 to ``num_keys``.

    Examples:
        Flash-Decoding's 1000 keys in four even splits, and in splits of 256:

        >>> split_bounds(1000, num_splits=4)
        [0, 250, 500, 750, 1000]
        >>> split_bounds(1000, split_size=256)
        [0, 256, 512, 768, 1000]
    """
    _validate.count("num_keys", num_keys)
    if (split_size is None) == (num_splits is None):
        raise ValueError(
            f"give exactly one of split_size and num_splits, got split_size={split_size!r}, "
            f"num_splits={num_splits!r}"
        )
    if split_size is not None:
        _validate.count("split_size", split_size)
        return [*range(0, num_keys, split_size), num_keys]
    _validate.count("num_splits", num_splits, maximum=num_keys)
    return [round(num_keys * i / num_splits) for i in range(num_splits + 1)]


def split_kv_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    allowed: Tensor,
    *,
    split_size: int | None = None,
    num_splits: int | None = None,
    cuts: Sequence[int] = (),
) -> Tensor:
    r"""Attention with the keys split at fixed boundaries, each query row computed on its own.

    The keys are split at `split_bounds` (and, besides, at every position in
    ``cuts``: where two parts of the keys meet, such as a prefill chunk's
    first key when a kernel reads the chunk apart from the cache). For one
    query row and one split $i$, the row's scores $s_j$ give the split's
    maximum $m_i$, its sum $\ell_i = \sum_j e^{s_j - m_i}$ and its output
    $O_i = \frac{1}{\ell_i}\sum_j e^{s_j - m_i} v_j$, stored in ``query``'s
    dtype (as vLLM's PagedAttention V2 stores its partial outputs). The splits
    are merged as in Flash-Decoding: with $M = \max_i m_i$ and
    $w_i = e^{m_i - M}\,\ell_i$, each split's share of the softmax's denominator,

    $$
    O = \frac{\sum_i w_i\, O_i}{\sum_i w_i}.
    $$

    Every sum is a `fixed_order_sum`, every maximum exact, and a row keeps only
    the splits that hold a key it may see, each padded to the split size with
    keys it may not see (which add exact zeros). So a row's bits depend on its
    own scores and on the boundaries alone: with ``split_size`` and a causal
    mask, on its position and the split size, whatever the other rows, the
    batch, or how the prompt was chunked.

    Args:
        query: ``(B, H, L, d_k)``.
        key: ``(B, H_kv, S, d_k)``.
        value: ``(B, H_kv, S, d_v)``.
        allowed: ``(L, S)`` boolean, ``True`` where a query may see a key.
        split_size: Keys per split.
        num_splits: Splits (give exactly one of the two).
        cuts: Extra boundaries, each in ``(0, S)``.

    Returns:
        ``(B, H, L, d_v)``, in ``query``'s dtype (computed in float32 for
        half-precision inputs); 0 for a query that may see no key.

    Examples:
        The row of the last query, alone and with other queries beside it:

        >>> g = torch.Generator().manual_seed(0)
        >>> q = torch.randn(1, 2, 5, 8, generator=g)
        >>> k, v = torch.randn(2, 1, 2, 40, 8, generator=g)
        >>> causal = torch.ones(40, 40, dtype=torch.bool).tril()[35:]  # (5, 40)
        >>> out = split_kv_attention(q, k, v, causal, split_size=16)
        >>> alone = split_kv_attention(q[:, :, 4:], k, v, causal[4:], split_size=16)
        >>> torch.equal(out[:, :, 4:], alone)
        True
        >>> from attn_ref.functional import scaled_dot_product_attention
        >>> expected, _ = scaled_dot_product_attention(q, k, v, attn_mask=causal)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
    """
    _validate.tensor("query", query)
    _validate.shape("query", query, (None, None, None, None), "(B, H, L, d_k)")
    B, H, L, d_k = query.shape
    _validate.shape("key", key, (B, None, None, d_k), "(B, H_kv, S, d_k)")
    S = key.shape[2]
    _validate.shape("value", value, (B, key.shape[1], S, None), "(B, H_kv, S, d_v)")
    _validate.boolean("allowed", allowed)
    _validate.shape("allowed", allowed, (L, S), "(L, S): queries by keys")
    for cut in cuts:
        if isinstance(cut, bool) or not isinstance(cut, int) or not 0 < cut < S:
            raise ValueError(f"cuts must lie in (0, S) = (0, {S}), got {list(cuts)}")
    bounds = sorted({*split_bounds(S, split_size=split_size, num_splits=num_splits), *cuts})
    width = split_size or max(b - a for a, b in itertools.pairwise(bounds))
    dtype = compute_dtype(query.dtype)
    q = query.to(dtype) / d_k**0.5  # (B, H, L, d_k): scaled once, before the products
    k = repeat_kv_heads(key.to(dtype), H)  # (B, H_kv, S, d_k) -> (B, H, S, d_k)
    v = repeat_kv_heads(value.to(dtype), H)  # (B, H_kv, S, d_v) -> (B, H, S, d_v)
    out = torch.zeros(B, H, L, v.shape[-1], dtype=dtype)
    starts = torch.tensor(bounds[:-1])  # (n,): each split's first key
    stops = torch.tensor(bounds[1:])  # (n,)
    for row in range(L):
        seen = allowed[row].nonzero().flatten()  # keys this query may see
        if not len(seen):
            continue
        used = int((starts <= seen[-1]).sum())  # splits up to the last key it may see
        slots = starts[:used, None] + torch.arange(width)  # (n, width): key index of each slot
        real = slots < stops[:used, None]  # (n, width): False for padding
        index = slots.clamp(max=S - 1)  # (n, width): padding reads a real key, then is masked
        visible = real & allowed[row][index]  # (n, width)
        for b in range(B):
            out[b, :, row] = _merged_splits(
                q[b, :, row], k[b][:, index], v[b][:, index], visible, query.dtype
            )
    return out.to(query.dtype)


def _merged_splits(q: Tensor, k: Tensor, v: Tensor, visible: Tensor, stored: torch.dtype) -> Tensor:
    """One query row over its splits: ``q`` (H, d_k), ``k`` (H, n, width, d_k), ``v`` (H, n, width,
    d_v), ``visible`` (n, width); each split's output stored in ``stored``. Returns (H, d_v)."""
    scores = fixed_order_sum(q[:, None, None, :] * k, dim=-1)  # (H, n, width)
    scores = scores.masked_fill(~visible, NEG_INF)
    m = scores.amax(dim=-1)  # (H, n): each split's maximum, exact in any order
    p = (scores - finite_or_zero(m)[..., None]).exp()  # (H, n, width); 0 where not visible
    ell = fixed_order_sum(p, dim=-1)  # (H, n)
    o = fixed_order_sum(p[..., None] * v, dim=-2)  # (H, n, width, d_v) -> (H, n, d_v)
    o = (o / ell.clamp(min=1)[..., None]).to(stored).to(o.dtype)  # each split's output, as stored
    top = m.amax(dim=-1, keepdim=True)  # (H, 1)
    share = (m - finite_or_zero(top)).exp() * ell  # (H, n): e^(m_i - M) l_i, 0 for an empty split
    return fixed_order_sum(share[..., None] * o, dim=-2) / fixed_order_sum(share, dim=-1)[:, None]


class FixedOrderLinear(nn.Module):
    r"""A linear layer whose every output is a `fixed_order_sum`: $y_j = \sum_c x_c W_{jc} + b_j$.

    Each product is one IEEE multiplication and the sum over ``c`` has a fixed
    order, so a row's output does not depend on how many rows go through with
    it (a library's matrix product may change its order with the number of
    rows). Computed in float32 for half-precision inputs.

    Examples:
        >>> layer = nn.Linear(4, 3)
        >>> fixed = FixedOrderLinear(layer)
        >>> x = torch.randn(5, 4)
        >>> torch.equal(fixed(x)[:1], fixed(x[:1])), torch.allclose(fixed(x), layer(x))
        (True, True)
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias  # shared with ``linear``
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: Tensor) -> Tensor:
        dtype = compute_dtype(x.dtype)
        products = x.to(dtype)[..., None, :] * self.weight.to(dtype)  # (..., out, in)
        y = fixed_order_sum(products, dim=-1)  # (..., out)
        if self.bias is not None:
            y = y + self.bias.to(dtype)
        return y.to(x.dtype)


class FixedOrderLayerNorm(nn.Module):
    r"""Layer norm over the last dimension with its mean and variance summed in a fixed order.

    $\mu = \frac{1}{C}\sum_c x_c$, $\sigma^2 = \frac{1}{C}\sum_c (x_c - \mu)^2$,
    $y = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}\,\gamma + \beta$, each sum a
    `fixed_order_sum`. The same map as ``nn.LayerNorm``, rounded differently.

    Examples:
        >>> norm = nn.LayerNorm(6)
        >>> x = torch.randn(3, 6)
        >>> torch.allclose(FixedOrderLayerNorm(norm)(x), norm(x), atol=1e-6)
        True
    """

    def __init__(self, norm: nn.LayerNorm) -> None:
        super().__init__()
        self.weight, self.bias, self.eps = norm.weight, norm.bias, norm.eps

    def forward(self, x: Tensor) -> Tensor:
        dtype = compute_dtype(x.dtype)
        h = x.to(dtype)
        C = h.shape[-1]
        centred = h - (fixed_order_sum(h, dim=-1) / C)[..., None]  # (..., C)
        variance = fixed_order_sum(centred * centred, dim=-1) / C  # (...)
        y = centred / torch.sqrt(variance + self.eps)[..., None]
        if self.weight is not None:
            y = y * self.weight.to(dtype) + self.bias.to(dtype)
        return y.to(x.dtype)


class RowwiseGELU(nn.Module):
    """GELU applied to one row (last dimension) at a time.

    The exact GELU needs ``erf``, which PyTorch may compute by another code
    path for a value depending on the tensor it sits in (a single value, a
    vectorised run of them), and the paths may round differently. Applied
    row by row, every row goes through the same call on a tensor of the same
    shape, whatever the batch.
    """

    def forward(self, x: Tensor) -> Tensor:
        rows = x.reshape(-1, x.shape[-1])  # (N, C)
        return torch.stack([F.gelu(r) for r in rows]).reshape(x.shape)


def batch_invariant(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose linear layers, layer norms and GELUs compute each row in a fixed order.

    Every ``nn.Linear`` becomes a `FixedOrderLinear`, every ``nn.LayerNorm`` a
    `FixedOrderLayerNorm` and every ``nn.GELU`` a `RowwiseGELU`, sharing the
    original's weights. Embeddings are look-ups and residual additions are
    elementwise, so with them a token's computation no longer depends on which
    tokens share its forward pass. Attention is the one reduction left: run it
    with a fixed split size (`split_kv_attention`, ``serve(..., split_size=)``).

    Examples:
        >>> from attn_ref.decoder import TinyDecoder
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16, num_layers=1,
        ...     num_heads=2,
        ... )
        >>> fixed = batch_invariant(model)
        >>> [type(m.blocks[0].mlp[0]).__name__ for m in (fixed, model)]
        ['FixedOrderLinear', 'Linear']
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    copied = copy.deepcopy(model)
    replacements = {nn.Linear: FixedOrderLinear, nn.LayerNorm: FixedOrderLayerNorm}
    for parent in list(copied.modules()):
        for name, child in parent.named_children():
            if type(child) in replacements:
                setattr(parent, name, replacements[type(child)](child))
            elif type(child) is nn.GELU:
                if child.approximate != "none":
                    raise ValueError(
                        f"{name}: only the exact GELU is supported, got approximate={child.approximate!r}"
                    )
                setattr(parent, name, RowwiseGELU())
    return copied

r"""Scaled dot-product attention and its pieces, written out in PyTorch.

`scaled_dot_product_attention` takes its first four arguments (``query``,
``key``, ``value``, ``attn_mask``) in the order of
`torch.nn.functional.scaled_dot_product_attention`, and ``is_causal`` and
``scale`` by name, as PyTorch's function also accepts them. It differs from
PyTorch's in three ways: it returns the attention weights as well as the output,
``(output, weights)``, so that pages can print and plot them; it has no
``dropout_p`` (dropout belongs to training, which these pages do not do); and it
has no ``enable_gqa`` (repeat the key/value heads with
`attn_ref.multihead.repeat_kv_heads` instead). The masks it takes are built
in `attn_ref.masks`.
"""

from __future__ import annotations

import math

import torch  # noqa: F401 (the examples below use it)
from torch import Tensor

from attn_ref import _validate
from attn_ref._numerics import additive_mask, compute_dtype
from attn_ref.masks import causal_mask

__all__ = ["scaled_dot_product_attention", "softmax"]


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    r"""Numerically stable softmax along ``dim``.

    $$
    \operatorname{softmax}(x)_i = \frac{e^{x_i - m}}{\sum_j e^{x_j - m}},
    \qquad m = \max_j x_j
    $$

    Subtracting the maximum $m$ changes nothing mathematically (it cancels
    between numerator and denominator) but keeps every exponent $\le 0$, so
    ``exp`` never overflows. A slice whose entries are all ``-inf`` has no
    maximum to subtract and gives ``nan``, exactly as `torch.softmax`
    does; `scaled_dot_product_attention` handles that case itself.

    Args:
        x: Logits of any floating dtype.
        dim: The dimension that sums to one.

    Returns:
        A tensor of the shape and dtype of ``x``.

    Examples:
        >>> softmax(torch.tensor([1.0, 2.0, 3.0]))
        tensor([0.0900, 0.2447, 0.6652])
        >>> softmax(torch.tensor([1e4, 1e4 + 1.0]))  # no overflow at large logits
        tensor([0.2689, 0.7311])
    """
    _validate.tensor("x", x)
    shifted = x - x.amax(dim=dim, keepdim=True)
    exps = shifted.exp()
    return exps / exps.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Attention of each query over all keys, returning output and weights.

    $$
    \operatorname{Attention}(Q, K, V) =
    \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V
    $$

    Masks follow PyTorch's conventions. A boolean ``attn_mask`` is ``True``
    where a query **may** attend to a key; a floating ``attn_mask`` is added
    to the scores (use ``-inf`` to block). ``is_causal=True`` lets query $i$
    see keys $0, \dots, i$ only, and cannot be combined with ``attn_mask``
    (combine masks yourself with ``&``, as PyTorch also requires).

    A query whose scores are all ``-inf`` (every key masked) gets weights of
    zero and an output of zero, as PyTorch's function returns since version
    2.5; a plain softmax gives ``nan`` there. Only those rows are zeroed: a
    ``nan`` or ``inf`` in the inputs propagates exactly as in PyTorch's math
    backend. A boolean mask is added as $0$ or $-\infty$, as PyTorch does, so
    a ``nan`` score stays ``nan`` even where its key is masked. Half-precision
    inputs are computed in float32 and the results cast back to the input dtype.

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``, same leading dimensions as ``query``.
        value: ``(..., S, d_v)``, same leading dimensions as ``query``.
        attn_mask: Boolean or floating, broadcastable to ``(..., L, S)``.
        is_causal: Apply a lower-triangular (top-left aligned) mask.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.

    Returns:
        ``(output, weights)`` with shapes ``(..., L, d_v)`` and ``(..., L, S)``.

    Raises:
        TypeError: An argument is not a floating tensor, or dtypes differ.
        ValueError: A shape does not fit; the message names the argument,
            the shape it got and the shape it needs.

    Examples:
        The three tokens of the worked example, with identity projections so
        that ``Q = K = V = X``:

        >>> from attn_ref.examples import THREE_TOKENS
        >>> X = torch.tensor(THREE_TOKENS)
        >>> output, weights = scaled_dot_product_attention(X, X, X)
        >>> weights
        tensor([[0.4223, 0.1554, 0.4223],
                [0.0159, 0.8668, 0.1173],
                [0.1554, 0.4223, 0.4223]])
        >>> output
        tensor([[0.8446, 0.7330, 0.8446, 0.7330],
                [0.1332, 1.8509, 0.1332, 1.8509],
                [0.5777, 1.2670, 0.5777, 1.2670]])
        >>> torch.allclose(weights.sum(dim=-1), torch.ones(3))  # each row sums to one
        True
    """
    _, L, S, d_k = _validate.attention_inputs(query, key, value, attn_mask, is_causal)
    if is_causal:
        attn_mask = causal_mask(L, S, device=query.device)

    q, k, v = (t.to(compute_dtype(query.dtype)) for t in (query, key, value))
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)

    scores = q @ k.transpose(-2, -1) * scale  # (..., L, d_k) @ (..., d_k, S) -> (..., L, S)
    if attn_mask is not None:
        scores = scores + additive_mask(attn_mask, scores)  # (..., L, S)
    # A row with every score -inf has no maximum: softmax gives nan there, PyTorch gives 0.
    # Such rows go through softmax as zeros (no nan, so no nan gradient either), then are zeroed.
    no_key = (scores == float("-inf")).all(dim=-1, keepdim=True)  # (..., L, 1)
    scores = scores.masked_fill(no_key, 0.0)  # replaces the scores: one (..., L, S) matrix, not two
    weights = softmax(scores, dim=-1).masked_fill(no_key, 0.0)
    output = weights @ v  # (..., L, S) @ (..., S, d_v) -> (..., L, d_v)
    return output.to(query.dtype), weights.to(query.dtype)

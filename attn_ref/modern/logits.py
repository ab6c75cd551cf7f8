r"""Keeping attention logits in range: a smooth cap, and normalized queries and keys.

`softcap` squashes a logit into $(-c, c)$ as $c \tanh(s / c)$ (Gemma 2: 50 on the
attention logits, 30 on the final ones); `softcap_score_mod` is the same cap as a
``score_mod`` for `attn_ref.serving.flex_attention` and PyTorch's ``flex_attention``.
`qk_norm` RMS-normalizes each query and key before the dot product (Dehghani et al.,
2023; Gemma 3 in place of the cap), which bounds every score by the learned gains.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from attn_ref import _validate

__all__ = ["qk_norm", "softcap", "softcap_score_mod"]


def softcap(x: Tensor, cap: float) -> Tensor:
    r"""Squash logits smoothly into $(-c, c)$: $c \tanh(x / c)$.

    Near zero it is the identity (slope 1 at 0); far from zero it flattens,
    so no logit reaches $\pm c$, however large it was. Gemma 2 caps its
    attention logits at 50 and its final logits at 30
    (``attn_logit_softcapping``, ``final_logit_softcapping``).

    Args:
        x: Logits of any floating dtype.
        cap: $c > 0$.

    Returns:
        A tensor of the shape of ``x``.

    Examples:
        >>> softcap(torch.tensor([0.0, 1.0, 50.0, 1e6]), cap=50.0)
        tensor([ 0.0000,  0.9999, 38.0797, 50.0000])
    """
    _validate.tensor("x", x)
    cap = _validate.number("cap", cap, 0.0, above=True)
    return cap * torch.tanh(x / cap)


def softcap_score_mod(cap: float) -> Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]:
    """`softcap` as a ``score_mod(score, b, h, q_idx, kv_idx)``, FlexAttention's interface.

    The cap ignores where a score sits, so the function uses only ``score``.
    `attn_ref.serving.flex_attention` and PyTorch's ``flex_attention`` both
    apply it to the scaled scores before the mask.

    Args:
        cap: $c > 0$.

    Returns:
        The ``score_mod`` function.

    Examples:
        >>> from attn_ref.masks import causal_mask
        >>> from attn_ref.serving import create_block_mask, flex_attention
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v = (8 * torch.randn(1, 1, 4, 2, generator=g) for _ in "qkv")
        >>> causal = create_block_mask(
        ...     lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, 1, 1, 4, 4
        ... )
        >>> capped, _ = flex_attention(
        ...     q, k, v, score_mod=softcap_score_mod(5.0), block_mask=causal
        ... )
        >>> scores = softcap(q @ k.transpose(-1, -2) / 2**0.5, 5.0)
        >>> scores = scores.masked_fill(~causal_mask(4), float("-inf"))
        >>> torch.allclose(capped, scores.softmax(-1) @ v, atol=1e-5)
        True
    """
    cap = _validate.number("cap", cap, 0.0, above=True)

    def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return cap * torch.tanh(score / cap)

    return score_mod


def qk_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    r"""RMS-normalize each query or key over its ``d_k`` features, then scale by ``weight``.

    $$
    \hat{x} = \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2 + \epsilon}} \odot g
    $$

    A normalized vector has norm about $\sqrt{d}$ times the gains, so a
    scaled score $\hat q \cdot \hat k / \sqrt{d}$ is at most about
    $\sqrt{d}\, \max_i |g^q_i|\, \max_i |g^k_i|$ (Cauchy-Schwarz), whatever
    the layer's input: the logits grow only as fast as the learned gains.

    Args:
        x: ``(..., d_k)`` queries or keys.
        weight: ``(d_k,)`` learned gains $g$; ``None`` for none (nanochat).
        eps: $\epsilon$, added to the mean square.

    Returns:
        A tensor of the shape of ``x``.

    Examples:
        >>> qk_norm(torch.tensor([[3.0, 4.0], [30.0, 40.0]]))  # norm sqrt(2)
        tensor([[0.8485, 1.1314],
                [0.8485, 1.1314]])
    """
    _validate.tensor("x", x, min_ndim=1)
    d = x.shape[-1]
    if weight is not None:
        _validate.tensor("weight", weight)
        _validate.shape("weight", weight, (d,), "(d_k,), one gain per feature")
    eps = _validate.number("eps", eps, 0.0)
    return F.rms_norm(x, (d,), weight=weight, eps=eps)

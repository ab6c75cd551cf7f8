r"""A linear layer rewritten, input by input, as one query attending over keys.

For one input row $x \in \mathbb{R}^{d_\text{in}}$ and a weight
$W \in \mathbb{R}^{d_\text{out} \times d_\text{in}}$, the linear layer's output
is a sum over the input features, $x W^\top = \sum_i x_i\, W_{:, i}^\top$.
Writing $x_i = a_i \cdot \lVert x \rVert_1 \operatorname{sign}(x_i)$ with
$a_i = |x_i| / \lVert x \rVert_1$ turns that sum into an attention output: one
query, one key per input feature, weights $a$ and values
$v_i = \lVert x \rVert_1 \operatorname{sign}(x_i)\, W_{:, i}^\top$.
``linear_as_attention`` builds such ``q``, ``k`` and ``v`` (and a mask for zero
features) so that ``torch.nn.functional.scaled_dot_product_attention`` returns
``x @ weight.T``.

The query and the values depend on ``x``; only the keys can be fixed. The
construction therefore shows that *each* output of a linear layer is *some*
attention output, not that a linear layer is an attention layer with fixed
projections.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attn_ref import _validate

__all__ = ["linear_as_attention"]


def linear_as_attention(
    x: Tensor,
    weight: Tensor,
    key: Tensor | None = None,
    *,
    d_k: int | None = None,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Queries, keys, values and a mask whose attention output is ``x @ weight.T``.

    Each row $x$ of the batch becomes one query over $d_\text{in}$ keys, one
    key per input feature. With $a_i = |x_i| / \lVert x \rVert_1$:

    $$
    v_i = \lVert x \rVert_1 \operatorname{sign}(x_i)\, W_{:, i}^\top,
    \qquad
    \ell_i = \log |x_i| - \operatorname{mean}_{j: x_j \ne 0} \log |x_j|,
    \qquad
    q k^\top = \sqrt{d_k}\, \ell ,
    $$

    so that $\operatorname{softmax}(\ell) = a$ and $a v = x W^\top$. Features
    with $x_i = 0$ would need $\ell_i = -\infty$; they are masked out instead
    (their value is zero anyway). A row of zeros has zero values, so its
    output is zero whatever the weights; none of its keys is masked.

    Without ``key``, a random key with orthonormal rows is drawn (its
    condition number is 1): $k k^\top = I$, and $q = \sqrt{d_k}\,\ell\, k$.
    The smallest size that works for a key fixed in advance is
    ``d_k = d_in - 1``: the key's orthonormal columns then span the vectors
    orthogonal to $(1, \dots, 1)$, which hold every centred $\ell$, and
    softmax ignores the missing constant. With ``key`` given, $q$ is the
    minimum-norm solution of $q k^\top = \sqrt{d_k}\,\ell$ (through a QR
    factorisation of $k^\top$), exact when ``key`` has rank ``d_in``; its
    rounding error grows with the condition number of ``key``.

    Args:
        x: ``(B, d_in)`` inputs, one row per query.
        weight: ``(d_out, d_in)`` weight of the linear layer, as in
            ``torch.nn.Linear``; same dtype as ``x``.
        key: Optional ``(d_in, d_k)`` key of rank ``d_in`` (so ``d_k >= d_in``),
            shared by every row; drawn at random when omitted.
        d_k: Size of the drawn key, at least ``max(1, d_in - 1)``; defaults
            to ``d_in``. Leave it out when passing ``key``.
        generator: Random generator for the drawn key.

    Returns:
        ``(q, k, v, attn_mask)`` with shapes ``(B, 1, d_k)``, ``(B, d_in, d_k)``,
        ``(B, d_in, d_out)`` and ``(B, 1, d_in)``. ``k`` is one key expanded
        over the batch (a view); ``attn_mask`` is boolean, ``True`` where the
        query may attend. Pass all four to
        ``torch.nn.functional.scaled_dot_product_attention``.

    Raises:
        TypeError: ``x``, ``weight`` or ``key`` is not a floating tensor, or
            their dtypes differ.
        ValueError: A shape does not fit, ``d_k`` is too small, or ``key``
            does not have rank ``d_in``.

    Examples:
        One row with a negative and a zero feature, and a row of zeros:

        >>> import torch.nn.functional as F
        >>> from attn_ref.examples import LINEAR_WEIGHT, LINEAR_X
        >>> x = torch.tensor(LINEAR_X, dtype=torch.float64)
        >>> W = torch.tensor(LINEAR_WEIGHT, dtype=torch.float64)
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v, mask = linear_as_attention(x, W, generator=g)
        >>> q.shape, k.shape
        (torch.Size([2, 1, 4]), torch.Size([2, 4, 4]))
        >>> v.shape, mask.shape
        (torch.Size([2, 4, 3]), torch.Size([2, 1, 4]))
        >>> mask
        tensor([[[ True,  True, False,  True]],
        <BLANKLINE>
                [[ True,  True,  True,  True]]])
        >>> y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[:, 0]
        >>> x @ W.T
        tensor([[ 1.0000, -1.5000,  6.0000],
                [ 0.0000,  0.0000,  0.0000]], dtype=torch.float64)
        >>> bool((y - x @ W.T).abs().max() < 1e-13)
        True
    """
    _validate.tensor("x", x)
    _validate.tensor("weight", weight)
    _validate.shape("x", x, (None, None), "(B, d_in)")
    B, d_in = x.shape
    _validate.shape("weight", weight, (None, d_in), "(d_out, d_in)")
    _validate.same_dtype(x=x, weight=weight)
    if key is None:
        d_k = _validate.count("d_k", d_in if d_k is None else d_k, minimum=max(1, d_in - 1))
    else:
        _check_key(key, x, d_in, d_k)
        d_k = key.shape[1]

    nonzero = x != 0  # (B, d_in)
    all_zero = ~nonzero.any(dim=-1, keepdim=True)  # (B, 1)
    l1 = x.abs().sum(dim=-1, keepdim=True)  # (B, 1)
    value = weight.T * (l1 * x.sign())[..., None]  # (d_in, d_out) * (B, d_in, 1) -> (B, d_in, d_out)

    log_abs = torch.where(nonzero, x.abs().log(), 0.0)  # (B, d_in), log|x_i| or 0
    count = nonzero.sum(dim=-1, keepdim=True).clamp(min=1)  # (B, 1)
    logits = torch.where(nonzero, log_abs - log_abs.sum(dim=-1, keepdim=True) / count, 0.0)  # (B, d_in)
    scores = logits * math.sqrt(d_k)  # (B, d_in), the target of q @ k.T
    if key is None:
        key = _orthonormal_key(d_in, d_k, x, generator)  # (d_in, d_k)
        query = scores @ key  # (B, d_in) @ (d_in, d_k) -> (B, d_k)
    else:
        query = _min_norm_query(key, scores)  # (B, d_k)

    attn_mask = (nonzero | all_zero)[:, None, :]  # (B, d_in) -> (B, 1, d_in)
    return query[:, None, :], key.expand(B, d_in, d_k), value, attn_mask  # q: (B, d_k) -> (B, 1, d_k)


def _min_norm_query(key: Tensor, scores: Tensor) -> Tensor:
    """The smallest ``q`` (per row) with ``q @ key.T == scores``, for ``key`` of rank ``d_in``.

    With the reduced QR factorisation ``key.T = Q R``, ``q = z Q.T`` where
    ``z R = scores``: one triangular solve, backward stable, and the same
    result on every run (LAPACK's default least-squares driver is not).
    """
    Q, R = torch.linalg.qr(key.T)  # (d_k, d_in) = (d_k, d_in) @ (d_in, d_in)
    z = torch.linalg.solve_triangular(R.T, scores.T, upper=False)  # (d_in, B)
    return (Q @ z).T  # (d_k, d_in) @ (d_in, B) -> (d_k, B) -> (B, d_k)


def _orthonormal_key(d_in: int, d_k: int, like: Tensor, generator: torch.Generator | None) -> Tensor:
    """A random ``(d_in, d_k)`` key with orthonormal columns (or rows).

    ``d_k >= d_in``: orthonormal rows, ``k @ k.T = I``. ``d_k = d_in - 1``:
    orthonormal columns orthogonal to the all-ones vector.
    """
    if d_k >= d_in:
        gaussian = torch.randn(d_k, d_in, generator=generator, dtype=like.dtype, device=like.device)
        return torch.linalg.qr(gaussian).Q.T  # (d_k, d_in) -> (d_in, d_k)
    gaussian = torch.randn(d_in, d_k, generator=generator, dtype=like.dtype, device=like.device)
    centred = gaussian - gaussian.mean(dim=0, keepdim=True)  # (d_in, d_k), columns orthogonal to ones
    return torch.linalg.qr(centred).Q  # (d_in, d_k)


def _check_key(key: Tensor, x: Tensor, d_in: int, d_k: int | None) -> None:
    _validate.tensor("key", key)
    _validate.same_dtype(x=x, key=key)
    if key.ndim != 2 or key.shape[0] != d_in or key.shape[1] < d_in:
        raise ValueError(f"key has shape {tuple(key.shape)}, expected (d_in={d_in}, d_k) with d_k >= d_in")
    if d_k is not None and d_k != key.shape[1]:
        raise ValueError(f"d_k={d_k} does not match key of shape {tuple(key.shape)}; leave d_k out")
    rank = int(torch.linalg.matrix_rank(key.double()))
    if rank < d_in:
        raise ValueError(f"key of shape {tuple(key.shape)} has rank {rank}, expected rank d_in={d_in}")

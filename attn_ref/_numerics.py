"""Small pieces of arithmetic that several attention functions share."""

from __future__ import annotations

import torch
from torch import Tensor

NEG_INF = float("-inf")


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype to compute in: float32 for half-precision inputs, else the inputs' own."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def additive_mask(attn_mask: Tensor, scores: Tensor) -> Tensor:
    """``attn_mask`` as numbers to add to ``scores``: a boolean mask becomes 0 (may attend) or -inf."""
    if attn_mask.dtype == torch.bool:
        return torch.zeros(attn_mask.shape, dtype=scores.dtype, device=scores.device).masked_fill(
            ~attn_mask, NEG_INF
        )
    return attn_mask.to(scores.dtype)


def finite_or_zero(row_max: Tensor) -> Tensor:
    """The maximum to subtract: 0 where it is still -inf, so that exp(-inf - m) is 0, not nan."""
    return row_max.masked_fill(row_max == NEG_INF, 0.0)


def logsumexp(row_max: Tensor, row_sum: Tensor) -> Tensor:
    r"""$m + \log \ell$: the log of $\sum_j e^{x_j}$ from the running maximum $m$ and sum $\ell$."""
    return row_max + row_sum.log()

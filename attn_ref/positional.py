r"""Sinusoidal positional encoding (Vaswani et al., 2017, section 3.5)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["sinusoidal_positional_encoding"]


def sinusoidal_positional_encoding(num_positions: int, d_model: int, base: float = 10000.0) -> Tensor:
    r"""The fixed encoding that tells attention where each token sits.

    $$
    PE_{p,\,2i} = \sin\!\left(\frac{p}{b^{2i/d}}\right), \qquad
    PE_{p,\,2i+1} = \cos\!\left(\frac{p}{b^{2i/d}}\right)
    $$

    with $b = 10000$ and $d$ = ``d_model``. Each pair of columns is a sine
    and cosine of one frequency, from one turn every $2\pi$ positions down
    to one turn every $2\pi b$ positions.

    Args:
        num_positions: Number of positions $T$.
        d_model: Width of the encoding; an odd width drops the last cosine.
        base: The constant $b$.

    Returns:
        A ``(num_positions, d_model)`` float32 tensor, to be added to the embeddings.

    Examples:
        >>> sinusoidal_positional_encoding(3, 4)
        tensor([[ 0.0000,  1.0000,  0.0000,  1.0000],
                [ 0.8415,  0.5403,  0.0100,  0.9999],
                [ 0.9093, -0.4161,  0.0200,  0.9998]])
    """
    for name, size in (("num_positions", num_positions), ("d_model", d_model)):
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"{name} must be a positive int, got {size!r}")
    positions = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (T, 1)
    even = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),)
    angles = positions / base ** (even / d_model)  # (T, ceil(d/2))
    encoding = torch.empty(num_positions, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angles)
    encoding[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return encoding.float()

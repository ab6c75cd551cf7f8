"""The summation order of attn_ref.serving.fixed_order_sum, written out on NumPy float32 scalars, for
tests that check its bits rather than its size."""

from __future__ import annotations

import numpy as np


def halving_sum(terms) -> np.float32:
    """Pad with zeros to a power of two, then add the second half to the first, elementwise, until one
    term is left: for eight terms ((x0 + x4) + (x2 + x6)) + ((x1 + x5) + (x3 + x7)). Each addition is
    one IEEE float32 addition, as NumPy does it."""
    values = [np.float32(t) for t in terms]
    width = 1
    while width < len(values):
        width *= 2
    values += [np.float32(0.0)] * (width - len(values))
    while len(values) > 1:
        half = len(values) // 2
        values = [np.float32(values[i] + values[i + half]) for i in range(half)]
    return values[0]

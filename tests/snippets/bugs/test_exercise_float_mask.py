"""An additive mask made boolean with .bool() (True where non-zero) and with == 0, recomputed in float64
NumPy (tests/reference.py) from the snippet's random draws."""

import numpy as np
import torch

from tests.printed import block_after, flag
from tests.reference import attention, causal

T = 4


def test_the_boolean_mask_marks_the_future(printed):
    # bool() is True for every non-zero entry: the blocked ones.
    np.testing.assert_array_equal(
        block_after(printed, "the boolean mask, 1 = may attend for SDPA:", rows=T), ~causal(T)
    )


def test_the_check(printed):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, T, 8).double().numpy() for _ in range(3))
    right, _ = attention(q, k, v, allowed=causal(T))
    inverted, _ = attention(q, k, v, allowed=~causal(T))
    assert np.abs(inverted - right).max() > 0.1
    assert flag(printed, "to_sdpa_mask, same as is_causal=True:") is False
    assert flag(printed, "to_sdpa_mask_fixed, same as is_causal=True:") is True

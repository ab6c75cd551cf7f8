"""An additive mask made boolean with .bool() (True where non-zero) and with == 0, recomputed in float64
NumPy (tests/reference.py) from the snippet's random draws."""

import numpy as np
import torch

from tests.printed import block_after, line_after, numbers
from tests.reference import attention

T, C, D_K = 4, 16, 8


def _future(n):
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def test_the_boolean_mask_marks_the_future(printed):
    assert line_after(printed, "dtype and shape:").strip() == f"torch.bool ({T}, {T})"
    # bool() is True for every non-zero entry: the blocked ones.
    np.testing.assert_array_equal(
        block_after(printed, "the boolean mask, 1 = may attend for SDPA:", rows=T), _future(T)
    )


def test_the_check(printed):
    torch.manual_seed(0)
    W_Q, W_K, W_V = ((torch.randn(C, D_K) / C**0.5).double().numpy() for _ in range(3))
    g = torch.Generator().manual_seed(1)
    worst = {"to_sdpa_mask": 0.0, "to_sdpa_mask_fixed": 0.0}
    for _ in range(20):
        n = int(torch.randint(2, 9, (), generator=g))
        x = torch.randn(1, n, C, generator=g)
        j = int(torch.randint(1, n, (), generator=g))
        y = x.clone()
        y[:, j] = torch.randn(C, generator=g)
        for name, allowed in (("to_sdpa_mask", _future(n)), ("to_sdpa_mask_fixed", ~_future(n))):
            a, b = (
                attention(z @ W_Q, z @ W_K, z @ W_V, allowed=allowed)[0]
                for z in (x.double().numpy(), y.double().numpy())
            )
            worst[name] = max(worst[name], np.abs(b[:, :j] - a[:, :j]).max())
    assert worst["to_sdpa_mask_fixed"] == 0.0
    buggy = line_after(printed, "to_sdpa_mask: largest change before the changed token")
    assert abs(numbers(buggy)[0] - worst["to_sdpa_mask"]) < 0.05 * worst["to_sdpa_mask"] and buggy.endswith(
        "FAILS"
    )
    fixed = line_after(printed, "to_sdpa_mask_fixed: largest change before the changed token")
    assert numbers(fixed)[0] < 1e-6 and fixed.endswith("passes")

"""Top-left and bottom-right causal masks for L new queries against S keys, written out with
np.tri and recomputed in float64 NumPy (tests/reference.py) from the snippet's random draws."""

import numpy as np
import torch

from tests.printed import line_after, numbers
from tests.reference import attention, causal

S, D_K = 5, 4


def _full(q, k, v):
    """The causal pass over every token at once."""
    return attention(q, k, v, allowed=causal(q.shape[1]))[0]


def _new(q, k, v, L, lower_right):
    """The last L queries alone against every key. Query i (0-based) sees keys 0..i (top-left), or
    0..S-L+i (bottom-right: the queries are the last L)."""
    return attention(q[:, -L:], k, v, allowed=causal(L, k.shape[1], lower_right=lower_right))[0]


def test_the_new_query(printed):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, S, D_K).double().numpy() for _ in range(3))
    full = _full(q, k, v)
    top_left = _new(q, k, v, 1, lower_right=False)
    bottom_right = _new(q, k, v, 1, lower_right=True)
    np.testing.assert_allclose(
        numbers(line_after(printed, "all at once, last token:")), full[0, -1], atol=6e-4
    )
    np.testing.assert_allclose(numbers(line_after(printed, "new query alone:")), top_left[0, 0], atol=6e-4)
    np.testing.assert_allclose(numbers(line_after(printed, "value of token 0:")), v[0, 0], atol=6e-4)
    np.testing.assert_allclose(top_left[0, 0], v[0, 0], atol=1e-12)  # it sees key 0 only
    np.testing.assert_allclose(
        numbers(line_after(printed, "with a bottom-right mask:")), bottom_right[0, 0], atol=6e-4
    )
    np.testing.assert_allclose(bottom_right[0, 0], full[0, -1], atol=1e-12)


def test_the_check(printed):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(20, S, D_K, generator=g).double().numpy() for _ in range(3))
    full = _full(q, k, v)
    worst = 0.0
    for L in range(1, S):
        top_left = _new(q, k, v, L, lower_right=False)
        bottom_right = _new(q, k, v, L, lower_right=True)
        assert np.abs(bottom_right - full[:, -L:]).max() < 1e-12
        worst = max(worst, np.abs(top_left - full[:, -L:]).max())
    buggy = line_after(printed, "is_causal=True: largest difference from the full pass")
    assert abs(numbers(buggy)[0] - worst) < 0.05 * worst and buggy.endswith("FAILS")
    fixed = line_after(printed, "bottom-right mask: largest difference from the full pass")
    assert numbers(fixed)[0] < 1e-5 and fixed.endswith("passes")

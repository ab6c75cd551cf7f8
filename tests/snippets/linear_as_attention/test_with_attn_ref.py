"""linear_as_attention/with_attn_ref.py: attn_ref's construction masks zero features, gives the
weights |x| / ||x||_1 and is exact up to rounding."""

from __future__ import annotations

import numpy as np

from tests.printed import line_after, line_starting, list_after, number_after, numbers
from tests.snippets.linear_as_attention.helpers import bound, float64_data


def test_with_attn_ref_masks_zeros_reproduces_the_weights_and_is_exact_to_rounding(printed):
    _, x, W = float64_data()
    x[0, [1, 5]] = 0.0
    x[3] = 0.0
    assert list_after(printed, "mask of row 0:") == (x[0] != 0).tolist()
    wanted = np.abs(x[0]) / np.abs(x[0]).sum()
    np.testing.assert_allclose(numbers(line_after(printed, "weights of row 0:")), wanted, atol=5.1e-5)
    np.testing.assert_allclose(numbers(line_after(printed, "|x_0| / ||x_0||_1:")), wanted, atol=5.1e-5)
    # The error in units of eps ||x||_1 max|W|, per row, within the page's estimate (row 3 is 0).
    spread = bound(x, W, 1.0) / (16 * np.maximum(np.abs(x).sum(-1), 1e-300) * np.abs(W).max())
    for dtype in ("float64", "float32"):
        assert 0 <= number_after(printed, f"torch.{dtype}: error") <= 16 * spread.max()
        assert line_starting(printed, f"torch.{dtype}:").endswith("row 3 is 0: True")

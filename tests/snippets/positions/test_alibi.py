"""ALiBi's printed slopes and mask against the paper (Press et al., 2022, section 3), and the
bias-only weights against a float64 softmax."""

import numpy as np

from tests.printed import block_after, line_after, number_after, numbers
from tests.reference import softmax

T = 5


def test_slopes_are_the_papers_for_8_heads(printed):
    """'For our models with 8 heads, the slopes that we used are the geometric sequence:
    1/2^1, 1/2^2, ..., 1/2^8.'"""
    np.testing.assert_allclose(
        numbers(line_after(printed, "slopes:")), [1 / 2**k for k in range(1, 9)], atol=5e-5
    )


def test_head_0_mask_is_minus_half_the_distance_below_the_diagonal(printed):
    expected = [[-0.5 * (i - j) if j <= i else -np.inf for j in range(T)] for i in range(T)]
    np.testing.assert_allclose(block_after(printed, "mask of head 0:", rows=T), expected)


def test_attn_ref_agrees_with_pytorch(printed):
    assert number_after(printed, "max |attn_ref - PyTorch|:") < 1e-6


def test_bias_only_weights_of_the_last_query(printed):
    distance = np.arange(7, -1, -1)  # the last of 8 queries to keys 0..7
    for h, slope in ((0, 0.5), (7, 1 / 256)):
        kept = softmax(-slope * distance)[-1]
        label = f"head {h}, slope {slope:g}: last query keeps"
        assert abs(number_after(printed, label) - kept) < 6e-4

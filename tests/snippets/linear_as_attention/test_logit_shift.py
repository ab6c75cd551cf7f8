"""linear_as_attention/logit_shift.py: one number added to every logit changes only rounding."""

from __future__ import annotations

import numpy as np
import torch

from attn_ref.examples import LINEAR_SEED
from tests.printed import block_after, line_starting, number_after
from tests.reference import softmax
from tests.snippets.linear_as_attention.helpers import D_IN, EPS32, EPS64


def test_logit_shift_changes_only_rounding_and_noise_changes_the_weights(printed):
    torch.manual_seed(LINEAR_SEED)
    x = torch.randn(D_IN).double().numpy()
    shift = -torch.randn(1).item()
    noise = torch.randn(D_IN).double().numpy()
    weights = np.abs(x) / np.abs(x).sum()
    assert abs(number_after(printed, "the blog post's shift:") - shift) < 1e-4
    rows = block_after(printed, line_starting(printed, "   c "), rows=5)  # c and the change it makes
    assert rows.shape == (5, 2)
    for c, change in rows:
        # Only rounding: logits + c is rounded to the spacing of floats near c (float64 here).
        size = 1 + abs(c) + np.abs(np.log(weights)).max()
        assert np.abs(softmax(np.log(weights) + c) - weights).max() <= 4 * EPS64 * size
        assert change <= 4 * EPS32 * size
    expected = np.abs(softmax(np.log(weights) + noise) - weights).max()
    assert (
        abs(number_after(printed, "one random number per logit: max change") - expected) <= 0.051 * expected
    )

"""linear_as_attention/zero_entries.py: zero entries of x give the post nan; attn_ref masks them."""

from __future__ import annotations

import numpy as np

from attn_ref.examples import LINEAR_SEED
from tests.printed import flag, line_after, list_after, number_after, numbers
from tests.snippets.linear_as_attention.helpers import D_IN, EPS32, bound, post_data


def test_zero_entries_break_the_post_and_not_attn_ref(printed):
    x, W, _ = post_data(LINEAR_SEED)  # the snippet draws x and W as the post does
    x[0, 2] = 0.0
    x[1] = 0.0
    with np.errstate(divide="ignore"):
        logits = np.log(np.abs(x[0]) / np.abs(x[0]).sum())
    shown = numbers(line_after(printed, "post, logits of row 0:"))
    assert shown[2] == -np.inf
    np.testing.assert_allclose(np.delete(shown, 2), np.delete(logits, 2), atol=5.1e-3)
    q = numbers(line_after(printed, "post, q of row 0:"))
    assert q.shape == (D_IN,)
    assert (np.isinf(q) | np.isnan(q)).all()
    assert numbers(line_after(printed, "post, rows of y2 with nan:")).tolist() == [
        0,
        1,
    ]  # the rows with zeros
    assert list_after(printed, "attn_ref, mask of row 0:") == (x[0] != 0).tolist()
    assert list_after(printed, "attn_ref, mask of row 1:") == [True] * D_IN  # zero row: nothing masked
    assert number_after(printed, "attn_ref, max |y - x W^T| =") <= bound(x, W, EPS32).max()
    assert flag(printed, "attn_ref, row 1 of y is exactly zero:")

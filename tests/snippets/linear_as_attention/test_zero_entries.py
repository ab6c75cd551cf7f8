"""linear_as_attention/zero_entries.py: zero entries of x give the blog post's steps nan."""

from __future__ import annotations

import numpy as np

from attn_ref.examples import LINEAR_SEED
from tests.printed import line_after, list_after, numbers
from tests.snippets.linear_as_attention.helpers import D_IN, post_data


def test_zero_entries_break_the_blog_posts_steps(printed):
    x, _, _ = post_data(LINEAR_SEED)  # the snippet draws x as the blog post does
    x[0, 2] = 0.0
    x[1] = 0.0
    with np.errstate(divide="ignore"):
        logits = np.log(np.abs(x[0]) / np.abs(x[0]).sum())
    shown = numbers(line_after(printed, "logits of row 0:"))
    assert shown[2] == -np.inf
    np.testing.assert_allclose(np.delete(shown, 2), np.delete(logits, 2), atol=5.1e-3)
    q = numbers(line_after(printed, "q of row 0:"))
    assert q.shape == (D_IN,)
    assert np.isinf(q).all()  # the -inf logit reaches every entry of q
    assert (q > 0).any() and (q < 0).any()  # both signs: +inf - inf in the scores
    # The rows with a zero (0 and 1) have nan scores; the others do not.
    assert list_after(printed, "nan in the scores, per row:") == [True, True, False, False]

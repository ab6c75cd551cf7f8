"""The bias row of a new query after a cache, at its own position (and, wrongly, at 0), against the
paper's -m_h (i - j) (Press et al., 2022, section 3)."""

import numpy as np

from tests.support.printed import assert_printed_in_order, decimals, printed_flags


def row_of_the_query_at(position: int, H: int, S: int) -> np.ndarray:
    """-m_h |position - j| for keys j = 0 .. S - 1, m_h = 2^(-8 (h + 1) / H): (H, 1, S)."""
    slopes = 2.0 ** (-8 * np.arange(1, H + 1) / H)
    return -slopes[:, None, None] * np.abs(position - np.arange(S))[None, None, :]


def test_rows(values, printed):
    H, S = values["H"], values["S"]
    right, wrong = values["right"].numpy(), values["wrong"].numpy()
    # The new token is the last of S, at position S - 1: it penalises the oldest key most.
    np.testing.assert_allclose(right, row_of_the_query_at(S - 1, H, S), rtol=1e-7, atol=0)
    assert (right.argmax(axis=-1) == S - 1).all()
    # Taken to sit at 0, it penalises the newest key most and rewards the oldest.
    np.testing.assert_allclose(wrong, row_of_the_query_at(0, H, S), rtol=1e-7, atol=0)
    assert (wrong.argmax(axis=-1) == 0).all()
    assert values["oldest_first"] is True
    # By hand, the exercise's head 0 of 8 (slope 1/2) after 4 cached tokens: -2, -1.5, -1, -0.5, 0.
    assert (H, S) == (8, 4 + 1)
    np.testing.assert_array_equal(right[0, 0], [-2, -1.5, -1, -0.5, 0])
    np.testing.assert_array_equal(wrong[0, 0], [0, -0.5, -1, -1.5, -2])
    # What is printed: head 0's two rows, then whether the wrong one rewards the oldest key most.
    assert_printed_in_order(printed, [decimals(b, 4) for b in [*right[0, 0], *wrong[0, 0]]])
    assert printed_flags(printed) == [values["oldest_first"]]

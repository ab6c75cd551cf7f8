"""linear_as_attention/key_size.py: a fixed key needs d_k = d_in - 1; a smaller one is refused."""

from __future__ import annotations

from tests.printed import line_after, number_after
from tests.snippets.linear_as_attention.helpers import D_IN, EPS64, B, bound, float64_data


def test_key_size_d_in_minus_one_works_and_smaller_fixed_keys_do_not(printed):
    _, x, W = float64_data()
    # The label holds the key's printed shape, (B, d_in, d_in - 1).
    error = number_after(printed, f"d_k = {D_IN - 1}: k ({B}, {D_IN}, {D_IN - 1}), max |y - x W^T| =")
    assert error <= bound(x, W, EPS64).max()
    message = line_after(printed, f"d_k = {D_IN - 2}: ValueError: ")
    assert message.startswith("d_k must be")
    assert f"got {D_IN - 2}" in message

"""A table of 8 learned positions of width 4 (hand count), and what happens past it."""

from tests.printed import line_after, number_after


def test_one_vector_per_position(printed):
    assert number_after(printed, "parameters:") == 8 * 4
    assert line_after(printed, "T = 6:").strip() == "(6, 4)"


def test_no_vector_past_the_table(printed):
    assert line_after(printed, "T = 10:").startswith(" IndexError:")

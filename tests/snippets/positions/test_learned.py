"""A table of learned positions: one vector per position (a hand count), and none past it."""

import pytest
import torch

from tests.support.printed import assert_printed_in_order, exact


def test_one_vector_per_position(values, printed):
    table, max_len, C = values["table"], values["max_len"], values["C"]
    assert table.weight.shape == (max_len, C)
    # The sequence of T tokens gets rows 0 .. T - 1 of the table added, exactly (one float32 sum).
    X, X_pos = values["X"], values["X_pos"]
    T = len(X)
    assert max_len >= T and X_pos.shape == X.shape == (T, C)
    assert torch.equal(X_pos, X + table.weight[:T])
    # What is printed: the number of parameters, then the shape of the result.
    assert_printed_in_order(printed, [exact(max_len * C), *(exact(n) for n in X_pos.shape)])


def test_no_vector_past_the_table(values):
    table = values["table"]
    with pytest.raises(IndexError):
        table(torch.arange(values["max_len"] + 1))  # position max_len has no row

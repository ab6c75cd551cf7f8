"""Sinusoidal positional encoding against the formula of Vaswani et al. (2017), written as loops."""

import math

import pytest
import torch

from attn_ref import sinusoidal_positional_encoding


@pytest.mark.parametrize(("T", "d"), [(1, 2), (7, 10), (50, 16), (5, 7)])
def test_matches_the_papers_formula(T, d):
    expected = torch.zeros(T, d)
    for pos in range(T):
        for i in range(0, d, 2):
            expected[pos, i] = math.sin(pos / 10000 ** (i / d))
            if i + 1 < d:
                expected[pos, i + 1] = math.cos(pos / 10000 ** (i / d))
    torch.testing.assert_close(sinusoidal_positional_encoding(T, d), expected)


def test_every_position_is_distinct():
    encoding = sinusoidal_positional_encoding(100, 16)
    distances = torch.cdist(encoding, encoding) + torch.eye(100)
    assert distances.min() > 0.1


@pytest.mark.parametrize(("T", "d"), [(0, 4), (4, 0), (2.5, 4)])
def test_rejects_bad_sizes(T, d):
    with pytest.raises(ValueError, match="must be a positive int"):
        sinusoidal_positional_encoding(T, d)

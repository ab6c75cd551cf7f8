"""linear_as_attention/key_size.py: a fixed key needs d_k = d_in - 1; a smaller one is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_ref.linear_as_attention import linear_as_attention
from tests.support.linear_as_attention_bound import bound
from tests.support.printed import assert_printed_in_order, exact, significant
from tests.support.reference import EPS64, as64


def test_key_size_d_in_minus_one_works(values):
    x, W, k = as64(values["x"]), as64(values["W"]), as64(values["k"])
    B, d_in = x.shape
    assert k.shape == (B, d_in, d_in - 1)
    # One key for every row: orthonormal columns, orthogonal to (1, ..., 1).
    key = k[0]
    assert (k == key).all()
    np.testing.assert_allclose(key.T @ key, np.eye(d_in - 1), rtol=0, atol=4 * d_in * EPS64)
    np.testing.assert_allclose(key.sum(axis=0), 0, rtol=0, atol=4 * d_in * EPS64)
    # And still x W^T, up to rounding.
    error = np.abs(as64(values["y"]) - x @ W.T).max(-1)  # per row
    assert (error <= bound(x, W, EPS64)).all()
    assert values["error"] == pytest.approx(error.max(), rel=1e-6, abs=4 * EPS64 * np.abs(x @ W.T).max())


def test_key_size_smaller_fixed_keys_are_refused(values):
    x, W = values["x"], values["W"]
    with pytest.raises(ValueError):
        linear_as_attention(x, W, d_k=x.shape[1] - 2, generator=torch.Generator().manual_seed(0))


def test_key_size_prints_the_key_the_error_and_the_refusal(values, printed):
    d_in = values["d_in"]
    assert_printed_in_order(
        printed,
        [
            exact(d_in - 1),
            *(exact(n) for n in values["k"].shape),
            significant(values["error"], 2),
            # the refusal: the d_k asked for, the smallest allowed, d_in - 1, and again the one given
            exact(d_in - 2),
            exact(d_in - 1),
            exact(d_in - 2),
        ],
    )

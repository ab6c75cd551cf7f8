"""The pipeline notebook, as the build executed it: the weights and the output it computed, against
float64 NumPy attention (tests/support/reference.py) and PyTorch's own, and what it displayed and printed."""

from __future__ import annotations

import numpy as np
import torch

from attn_ref.examples import THREE_TOKENS
from tests.support.reference import attention
from tests.support.shown import assert_printed, displayed, half_unit, verdicts


def test_the_weights_and_the_output_are_the_three_token_attention(values):
    X = np.array(THREE_TOKENS, dtype=np.float64)
    np.testing.assert_array_equal(values["X"].double().numpy(), np.float32(X))
    expected_output, expected_weights = attention(X, X, X)
    np.testing.assert_allclose(values["weights"].double().numpy(), expected_weights, atol=1e-6)
    np.testing.assert_allclose(values["output"].double().numpy(), expected_output, atol=1e-6)
    # Every row sums to one: three float32 weights, each at most one, summed with float32 rounding.
    np.testing.assert_allclose(values["weights"].double().sum(-1).numpy(), np.ones(3), atol=4e-7)


def test_pytorch_agrees_and_the_page_says_so(tutorial, values):
    X = torch.tensor(THREE_TOKENS)
    expected, _ = attention(*(X.double().numpy(),) * 3)
    theirs = torch.nn.functional.scaled_dot_product_attention(X, X, X).double().numpy()
    # Both within float32 rounding (a few units of 2**-24 on values below 4) of the float64 truth:
    # far inside torch.allclose's default tolerance, so its verdict is True on any machine.
    np.testing.assert_allclose(theirs, expected, atol=2e-6)
    np.testing.assert_allclose(values["output"].double().numpy(), expected, atol=2e-6)
    assert verdicts(tutorial) == [True]


def test_what_the_notebook_shows_is_what_it_computed(tutorial, values):
    weights = values["weights"].double().numpy()
    # The cell's last expression, displayed as a tensor with four decimals.
    assert_printed(tutorial, weights, atol=half_unit(4), texts=displayed(tutorial, "text/plain"))
    assert_printed(tutorial, weights.sum(-1), atol=half_unit(4))  # the printed row sums

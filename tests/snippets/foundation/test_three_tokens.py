"""foundation/three_tokens.py: self-attention on three tokens, against float64 NumPy and PyTorch."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import as64


def test_weights_and_output_are_the_float64_ones(values):
    X = as64(values["X"])
    np.testing.assert_array_equal(X, THREE_TOKENS)
    exact = float32_attention(X, X, X)
    assert_within(values["weights"], exact.weights, exact.weights_error, "weights")
    assert_within(values["output"], exact.output, exact.output_error, "output")
    np.testing.assert_allclose(exact.weights.sum(axis=-1), 1.0, rtol=1e-12)


def test_pytorchs_attention_gives_the_same_output(values):
    """PyTorch's own function is within float32 rounding of the exact output too, so within twice
    that of attn_ref's."""
    X = as64(values["X"])
    exact = float32_attention(X, X, X)
    assert_within(values["reference"], exact.output, exact.output_error, "PyTorch's output")
    assert_within(values["reference"], values["output"], 2 * exact.output_error, "PyTorch vs attn_ref")


def test_prints_the_weights_and_the_output(printed, values):
    assert_shown(printed, values["weights"], values["output"])

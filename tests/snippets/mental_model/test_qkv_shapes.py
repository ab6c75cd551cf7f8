"""mental_model/qkv_shapes.py: the shape of every step in one head, and its results against float64
NumPy and PyTorch's own attention."""

import numpy as np

from tests.support.float32_attention_bounds import (
    SAFETY,
    assert_within,
    float32_attention,
    product_error,
    softmax_error,
)
from tests.support.printed import assert_shown
from tests.support.reference import EPS32, as64


def test_every_shape(values):
    T, C, d_k, d_v = (values[name] for name in ("T", "C", "d_k", "d_v"))
    assert values["X"].shape == (T, C)
    assert (values["Q"].shape, values["K"].shape, values["V"].shape) == ((T, d_k), (T, d_k), (T, d_v))
    assert values["scores"].shape == values["weights"].shape == (T, T)
    assert values["output"].shape == values["reference"].shape == (T, d_v)


def test_each_step_against_float64(values):
    X, W_Q, W_K, W_V = (as64(values[name]) for name in ("X", "W_Q", "W_K", "W_V"))
    for name, W in [("Q", W_Q), ("K", W_K), ("V", W_V)]:
        assert_within(values[name], X @ W, product_error(X, W), name)
    Q, K, V = (as64(values[name]) for name in ("Q", "K", "V"))
    scale = 1 / np.sqrt(K.shape[-1])
    scores = Q @ K.T * scale
    score_error = product_error(Q, K.T) * scale + SAFETY * 2 * EPS32 * np.abs(scores)
    assert_within(values["scores"], scores, score_error, "scores")
    exact = float32_attention(Q, K, V)
    assert_within(values["weights"], exact.weights, softmax_error(scores, score_error), "weights")
    assert_within(values["output"], exact.output, exact.output_error, "output")
    np.testing.assert_allclose(exact.weights.sum(axis=-1), 1.0, rtol=1e-12)


def test_same_as_pytorch(values):
    """PyTorch's function is within float32 rounding of the exact output too."""
    exact = float32_attention(values["Q"], values["K"], values["V"])
    assert_within(values["reference"], exact.output, exact.output_error, "PyTorch's output")
    assert_within(values["reference"], values["output"], 2 * exact.output_error, "PyTorch vs by hand")


def test_prints_the_shapes(printed, values):
    names = ("Q", "K", "V", "scores", "weights", "output")
    assert_shown(printed, *(values[name].shape for name in names))

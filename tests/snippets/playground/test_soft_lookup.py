"""playground/soft_lookup.py: the playground's first state, against float64 NumPy."""

import numpy as np

from tests.support.float32_attention_bounds import SAFETY, assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import EPS32, as64


def test_the_temperature_is_sqrt_dk(values):
    assert np.isclose(values["tau"], np.sqrt(values["K"].shape[-1]), rtol=1e-15)


def test_dot_products_and_scores(values):
    q, K = as64(values["q"]), as64(values["K"])
    # Halves and quarters: every product and sum is exact in float32.
    np.testing.assert_array_equal(as64(values["dots"]), q @ K.T)
    exact = q @ K.T / values["tau"]
    assert_within(values["scores"], exact, SAFETY * 2 * EPS32 * np.abs(exact), "scores")


def test_weights_and_output(values):
    q, K, V = (as64(values[name]) for name in ("q", "K", "V"))
    exact = float32_attention(q, K, V, scale=1 / values["tau"])
    assert_within(values["weights"], exact.weights, exact.weights_error, "weights")
    assert_within(values["output"], exact.output, exact.output_error, "output")
    np.testing.assert_allclose(
        exact.output, exact.weights @ V, rtol=1e-12
    )  # a weighted average of the values


def test_prints_the_first_state(printed, values):
    assert_shown(printed, values["dots"], values["scores"], values["weights"], values["output"])

"""playground/exercise_origin.py: a query at the origin weighs every key equally, at any temperature."""

import numpy as np

from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import as64


def test_origin_gives_uniform_weights_and_the_mean_of_the_values(values):
    origin, K, V = (as64(values[name]) for name in ("origin", "K", "V"))
    assert not origin.any()  # q = 0: every score is 0 . k_j = 0
    S = len(K)
    results = values["results"]
    assert len(results) >= 2  # more than one temperature
    for tau, (output, weights) in results.items():
        exact = float32_attention(origin, K, V, scale=1 / tau)
        # By hand: equal scores give weights 1/S, whatever tau, and the output is the mean of the values.
        np.testing.assert_allclose(exact.weights, np.full((1, S), 1 / S), rtol=1e-15)
        np.testing.assert_allclose(exact.output[0], V.mean(axis=0), rtol=1e-14)
        assert_within(weights, exact.weights, exact.weights_error, f"weights at tau = {tau}")
        assert_within(output, exact.output, exact.output_error, f"output at tau = {tau}")


def test_prints_the_weights_the_outputs_and_the_mean(printed, values):
    rows = [row[0] for output, weights in values["results"].values() for row in (weights, output)]
    assert_shown(printed, *rows, as64(values["V"]).mean(axis=0))

"""playground/exercise_origin.py: a query at the origin weighs every key equally, at any temperature."""

import numpy as np

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_VALUES
from tests.printed import line_after, numbers
from tests.reference import attention


def test_origin_gives_uniform_weights_and_the_mean_of_the_values(printed):
    K, V = np.array(LOOKUP_KEYS), np.array(LOOKUP_VALUES)
    for tau in (0.25, 2**0.5, 16.0):
        output, weights = attention(np.zeros((1, 2)), K, V, scale=1 / tau)
        np.testing.assert_allclose(weights[0], np.full(len(K), 1 / len(K)))
        np.testing.assert_allclose(
            numbers(line_after(printed, f"tau = {tau:.2f}, weights:")), weights[0], atol=6e-5
        )
        np.testing.assert_allclose(
            numbers(line_after(printed, f"tau = {tau:.2f}, output:")), output[0], atol=6e-5
        )
    np.testing.assert_allclose(numbers(line_after(printed, "mean of the values:")), V.mean(axis=0), atol=6e-5)

"""playground/exercise_temperature.py: from nearly one-hot weights to nearly uniform ones."""

import numpy as np

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES
from tests.printed import line_after, numbers
from tests.reference import attention


def test_low_temperature_picks_v1_and_high_temperature_averages(printed):
    q, K, V = (np.array(x) for x in (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES))
    for tau in (0.25, 2**0.5, 16.0, 1000.0):
        output, weights = attention(q, K, V, scale=1 / tau)
        np.testing.assert_allclose(
            numbers(line_after(printed, f"tau = {tau:.2f}, weights:")), weights[0], atol=6e-5
        )
        np.testing.assert_allclose(
            numbers(line_after(printed, f"tau = {tau:.2f}, output:")), output[0], atol=6e-5
        )
    np.testing.assert_allclose(numbers(line_after(printed, "v1:")), V[0])
    np.testing.assert_allclose(numbers(line_after(printed, "mean of the values:")), V.mean(axis=0), atol=6e-5)
    # What the answer says: the ends of the slider approach v1 and the mean of the values.
    lowest = numbers(line_after(printed, "tau = 0.25, output:"))
    highest = numbers(line_after(printed, "tau = 1000.00, output:"))
    assert np.linalg.norm(V - lowest, axis=1).argmin() == 0  # nearest to v1 of all the values
    assert np.linalg.norm(highest - V.mean(axis=0)) < 0.01

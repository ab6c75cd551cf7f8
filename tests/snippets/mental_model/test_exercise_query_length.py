"""mental_model/exercise_query_length.py: a zero query averages the values; a long one picks one value."""

from __future__ import annotations

import numpy as np

from tests.printed import line_after, numbers
from tests.reference import attention
from tests.snippets.mental_model.helpers import seeded_randn


def test_zero_query_averages_and_long_query_picks_the_top_key(printed):
    q, K, V = seeded_randn((1, 4), (5, 4), (5, 4))
    for s in (0, 1, 100):
        output, weights = attention(s * q, K, V)
        shown = numbers(line_after(printed, f"s = {s:>3}: weights"))
        np.testing.assert_allclose(shown, np.concatenate([weights[0], output[0]]), atol=6e-4)
    # By hand: all scores equal -> weights 1/S for S = 5 keys, output the mean of the values.
    np.testing.assert_allclose(attention(0 * q, K, V)[1], np.full((1, 5), 1 / 5))
    np.testing.assert_allclose(numbers(line_after(printed, "mean of the values:")), V.mean(axis=0), atol=6e-4)
    top = int((q @ K.T).argmax())
    line = line_after(printed, f"value of key {top}, the top score:")
    np.testing.assert_allclose(numbers(line), V[top], atol=6e-4)
    np.testing.assert_allclose(attention(100 * q, K, V)[0][0], V[top], atol=1e-3)  # near one-hot

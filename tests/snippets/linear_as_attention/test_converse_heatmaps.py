"""linear_as_attention/converse_heatmaps.py: doubling X sharpens every row of the weights A(X)."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.printed import line_after, numbers
from tests.reference import attention


def test_converse_heatmaps_report_the_sharpened_weights(printed):
    X = np.array(THREE_TOKENS)
    largest = {}
    for label, scale in (("A(X):", 1), ("A(2X):", 2)):
        largest[label] = numbers(line_after(printed, f"largest weight in each row of {label}"))
        expected = attention(scale * X, scale * X, scale * X)[1].max(axis=1)
        np.testing.assert_allclose(largest[label], expected, atol=5.1e-5)
    # Doubling X quadruples the scores: every row's largest weight grows.
    assert (largest["A(2X):"] > largest["A(X):"]).all()

"""foundation/three_tokens_heatmap.py: each query's strongest key, against float64 NumPy."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.reference import attention


def test_three_tokens_heatmap_reports_each_querys_strongest_key(printed):
    X = np.array(THREE_TOKENS)
    _, weights = attention(X, X, X)
    # Rows 1 and 3 tie between two keys; argmax takes the first of a tie.
    assert printed.strip() == f"strongest key for each query: {weights.round(6).argmax(axis=1).tolist()}"

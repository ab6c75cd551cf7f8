"""The snippets of the pipeline page, each run in a fresh interpreter."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.conftest import run_snippet


def _hand_attention(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """softmax(X X^T / sqrt(d)) X, written out in float64 NumPy."""
    scores = X @ X.T / np.sqrt(X.shape[1])
    weights = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    return weights, weights @ X


def _printed_matrix(text: str, after: str) -> np.ndarray:
    block = text.split(after, 1)[1].split("])", 1)[0]
    numbers = block.replace("tensor(", "").replace("[", " ").replace("]", " ").replace(",", " ").split()
    return np.array([float(n) for n in numbers])


def test_three_tokens_prints_the_hand_computed_weights_and_output():
    out = run_snippet("foundation/three_tokens.py")
    weights, output = _hand_attention(np.array(THREE_TOKENS))
    np.testing.assert_allclose(_printed_matrix(out, "one row per query:"), weights.ravel(), atol=6e-5)
    np.testing.assert_allclose(_printed_matrix(out, "weights @ X:"), output.ravel(), atol=6e-5)
    assert out.strip().endswith("scaled_dot_product_attention: True")


def test_three_tokens_heatmap_reports_each_querys_strongest_key():
    out = run_snippet("foundation/three_tokens_heatmap.py")
    weights, _ = _hand_attention(np.array(THREE_TOKENS))
    # Rows 1 and 3 tie between two keys; argmax takes the first of a tie.
    assert out.strip() == f"strongest key for each query: {weights.round(6).argmax(axis=1).tolist()}"

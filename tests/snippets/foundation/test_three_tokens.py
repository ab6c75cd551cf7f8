"""foundation/three_tokens.py: self-attention on three tokens, against float64 NumPy."""

import numpy as np

from attn_ref.examples import THREE_TOKENS
from tests.printed import block_after, flag
from tests.reference import attention


def test_three_tokens_prints_the_hand_computed_weights_and_output(printed):
    X = np.array(THREE_TOKENS)
    output, weights = attention(X, X, X)
    np.testing.assert_allclose(
        block_after(printed, "weights, one row per query:"), weights.ravel(), atol=6e-5
    )
    np.testing.assert_allclose(block_after(printed, "output = weights @ X:"), output.ravel(), atol=6e-5)
    assert flag(printed, "same as torch.nn.functional.scaled_dot_product_attention:")

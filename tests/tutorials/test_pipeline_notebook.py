"""The pipeline notebook, as the build executed it: its displayed weights and printed checks,
against float64 NumPy attention (tests/reference.py) and PyTorch's own."""

from __future__ import annotations

import numpy as np
import torch

from attn_ref.examples import THREE_TOKENS
from tests.printed import flag, line_after, numbers
from tests.reference import attention


def test_the_displayed_weights_are_the_three_token_weights(tutorial):
    X = np.array(THREE_TOKENS, dtype=np.float64)
    _, expected = attention(X, X, X)
    shown = tutorial.result_of("weights")["text/plain"]  # the cell's last expression, as displayed
    np.testing.assert_allclose(numbers(shown).reshape(3, 3), expected, atol=6e-5)


def test_every_row_sums_to_one_and_pytorch_agrees(tutorial):
    printed = tutorial.printed()
    np.testing.assert_allclose(numbers(line_after(printed, "row sums:")), np.ones(3), atol=1e-6)
    X = torch.tensor(THREE_TOKENS)
    expected, _ = attention(X.double().numpy(), X.double().numpy(), X.double().numpy())
    reference = torch.nn.functional.scaled_dot_product_attention(X, X, X).double().numpy()
    assert np.allclose(reference, expected, atol=1e-5)  # so "matches PyTorch" must say True
    assert flag(printed, "matches PyTorch:")
    np.testing.assert_allclose(tutorial.values["output"].double().numpy(), expected, atol=1e-6)

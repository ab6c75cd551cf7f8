"""mental_model/from_memory_torch.py: self-attention from memory in PyTorch, against float64 NumPy."""

import numpy as np

from tests.printed import flag, numbers
from tests.reference import attention
from tests.snippets.mental_model.helpers import seeded_randn


def test_from_memory_torch_matches_numpy(printed):
    X, W_Q, W_K, W_V = seeded_randn((4, 6), (6, 3), (6, 3), (6, 3))
    expected, _ = attention(X @ W_Q, X @ W_K, X @ W_V)
    # The output is the only number printed: the line after it is a flag.
    np.testing.assert_allclose(numbers(printed).reshape(expected.shape), expected, atol=6e-5)
    assert flag(printed, "same as PyTorch:")

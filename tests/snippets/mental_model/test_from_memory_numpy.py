"""mental_model/from_memory_numpy.py: self-attention from memory in NumPy, against PyTorch."""

import numpy as np
import torch

from tests.printed import flag, numbers


def test_from_memory_numpy_matches_pytorch(printed):
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.standard_normal((4, 6)))
    W_Q, W_K, W_V = (torch.tensor(rng.standard_normal((6, 3))) for _ in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V)
    # The output is the only number printed: the line after it is a flag.
    np.testing.assert_allclose(numbers(printed).reshape(expected.shape), expected, atol=6e-5)
    assert flag(printed, "same as attn_ref.numpy_ref:")

"""linear_as_attention/exercise_single_token.py: linear for one token, not for two."""

import numpy as np
import torch

from tests.printed import line_after, numbers
from tests.reference import attention


def test_one_token_is_linear_and_two_are_not(printed):
    one = numbers(line_after(printed, "T = 1:"))  # the two gaps: scaling, then additivity
    two = numbers(line_after(printed, "T = 2:"))
    assert one.size == two.size == 2
    assert (one < 1e-14).all()  # rounding only: one weight, always 1
    # Recompute the T = 2 gaps independently, from the same draws, in float64 NumPy.
    generator = torch.Generator().manual_seed(0)
    W_Q, W_K, W_V = (torch.randn(4, 4, generator=generator, dtype=torch.float64).numpy() for _ in range(3))
    for T in (1, 2):
        X, Y = (torch.randn(T, 4, generator=generator, dtype=torch.float64).numpy() for _ in range(2))

    def F(Z):
        return attention(Z @ W_Q, Z @ W_K, Z @ W_V)[0]

    gaps = [np.abs(F(2 * X) - 2 * F(X)).max(), np.abs(F(X + Y) - F(X) - F(Y)).max()]
    np.testing.assert_allclose(two, gaps, rtol=0.06)
    assert min(gaps) > 1e-3

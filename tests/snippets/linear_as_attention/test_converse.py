"""linear_as_attention/converse.py: attention whose weights are recomputed from X is not linear."""

from __future__ import annotations

import numpy as np
import torch

from attn_ref.examples import THREE_TOKENS
from tests.printed import number_after
from tests.reference import attention


def test_converse_recomputed_weights_are_not_linear(printed):
    X = np.array(THREE_TOKENS)
    Y = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64).numpy()

    def f(Z):
        return attention(Z, Z, Z)[0]

    for label, expected in (
        ("|f(2X) - 2 f(X)| =", np.abs(f(2 * X) - 2 * f(X)).max()),
        ("|f(X + Y) - f(X) - f(Y)| =", np.abs(f(X + Y) - f(X) - f(Y)).max()),
    ):
        assert expected > 0.1
        assert abs(number_after(printed, label) - expected) <= 0.051 * expected
    for lam in (1.0, 0.1, 0.01, 0.001):
        expected = np.abs(f(lam * X) / lam - X.mean(axis=0)).max()
        shown = number_after(printed, f"lam = {lam:<6} |f(lam X) / lam - mean token| =")
        assert abs(shown - expected) <= 0.051 * expected
    assert number_after(printed, "lam = 0.001") < 1e-5  # the limit of the proof: the mean token

"""mental_model/permutation.py: self-attention is permutation-equivariant until positions are added."""

from __future__ import annotations

import numpy as np

from tests.printed import flag, line_after, numbers
from tests.reference import attention
from tests.snippets.mental_model.helpers import seeded_randn


def test_permutation_equivariance_and_how_positions_break_it(printed):
    X, W_Q, W_K, W_V = seeded_randn((5, 8), (8, 8), (8, 8), (8, 8))
    perm = [2, 0, 4, 1, 3]

    def layer(X):
        return attention(X @ W_Q, X @ W_K, X @ W_V)[0]

    out_x, out_px = layer(X), layer(X[perm])
    assert flag(printed, "f(P X) == P f(X), equivariant:") == bool(np.allclose(out_px, out_x[perm]))
    assert np.allclose(out_px, out_x[perm])
    assert not np.allclose(out_px, out_x)
    assert not flag(printed, "f(P X) == f(X), invariant:")
    assert flag(printed, "A(P X) == P A(X) P^T:")
    assert flag(printed, "mean over tokens unchanged:")

    # Sinusoidal encoding by hand: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...).
    positions = np.arange(5)[:, None]
    angles = positions / 10000 ** (np.arange(0, 8, 2) / 8)
    PE = np.zeros((5, 8))
    PE[:, 0::2], PE[:, 1::2] = np.sin(angles), np.cos(angles)
    difference = np.abs(layer(X[perm] + PE) - layer(X + PE)[perm]).max()
    assert difference > 1e-3
    assert not flag(printed, "with positions, f(P X + PE) == P f(X + PE):")
    np.testing.assert_allclose(numbers(line_after(printed, "largest difference:")), [difference], atol=2e-3)

"""mental_model/permutation.py: self-attention is permutation-equivariant until a causal mask or
positions are added; a mask shuffled with the tokens restores it."""

from __future__ import annotations

import numpy as np

from tests.printed import block_after, flag, line_after, numbers
from tests.reference import attention, causal
from tests.snippets.mental_model.helpers import seeded_randn

PERM = [2, 0, 4, 1, 3]
CAUSAL = causal(5)  # query i may see keys 0..i


def _layer():
    X, W_Q, W_K, W_V = seeded_randn((5, 8), (8, 8), (8, 8), (8, 8))

    def layer(X, allowed=None):
        return attention(X @ W_Q, X @ W_K, X @ W_V, allowed=allowed)[0]

    return X, layer


def test_permutation_equivariance_without_mask_or_positions(printed):
    X, layer = _layer()
    out_x, out_px = layer(X), layer(X[PERM])
    assert np.allclose(out_px, out_x[PERM]) and not np.allclose(out_px, out_x)
    assert flag(printed, "f(P X) == P f(X), equivariant:")
    assert not flag(printed, "f(P X) == f(X), invariant:")
    assert flag(printed, "A(P X) == P A(X) P^T:")
    assert flag(printed, "mean over tokens unchanged:")


def test_a_causal_mask_breaks_equivariance_but_not_for_the_last_token(printed):
    X, layer = _layer()
    out_c = layer(X, CAUSAL)
    assert not np.allclose(layer(X[PERM], CAUSAL), out_c[PERM])
    assert not flag(printed, "causal, f(P X) == P f(X):")
    swapped = layer(X[[1, 0, 2, 3, 4]], CAUSAL)
    assert np.allclose(swapped[-1], out_c[-1]) and not np.allclose(swapped[:2], out_c[[1, 0]])
    assert flag(printed, "causal, first two swapped, last output unchanged:")


def test_positions_break_equivariance(printed):
    X, layer = _layer()
    # Sinusoidal encoding by hand: PE[t, 2i] = sin(t / 10000^(2i/d)), PE[t, 2i+1] = cos(...).
    angles = np.arange(5)[:, None] / 10000 ** (np.arange(0, 8, 2) / 8)
    PE = np.zeros((5, 8))
    PE[:, 0::2], PE[:, 1::2] = np.sin(angles), np.cos(angles)
    difference = np.abs(layer(X[PERM] + PE) - layer(X + PE)[PERM]).max()
    assert difference > 1e-3
    assert not flag(printed, "with positions, f(P X + PE) == P f(X + PE):")
    np.testing.assert_allclose(numbers(line_after(printed, "largest difference:")), [difference], atol=5e-3)


def test_exercise_a_mask_moved_with_the_tokens_restores_equivariance(printed):
    X, layer = _layer()
    moved = CAUSAL[PERM][:, PERM]  # new query i is old token PERM[i]; it sees what that token saw
    assert np.allclose(layer(X[PERM], moved), layer(X, CAUSAL)[PERM])
    assert flag(printed, "f(P X, P M P^T) == P f(X, M):")
    np.testing.assert_array_equal(block_after(printed, "P M P^T:", rows=5), moved.astype(int))

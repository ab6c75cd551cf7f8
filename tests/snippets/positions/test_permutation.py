"""positions/permutation.py: self-attention is permutation-equivariant until a causal mask or
positions are added."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import SAFETY, assert_within
from tests.support.positions_reference import permutation, projected_attention
from tests.support.printed import assert_shown, printed_flags
from tests.support.reference import EPS32, as64, causal


def _apart(a, b, rows=slice(None)) -> float:
    """How far the outputs of ``a`` and the ``rows`` of ``b`` are, at most, beyond the float32
    rounding both may carry."""
    gap = np.abs(a.output - b.output[rows]) - a.output_error - b.output_error[rows]
    return float(gap.max())


def test_permutation_equivariance_without_mask_or_positions(values):
    X, perm = as64(values["X"]), permutation(values["P"])
    assert sorted(perm) != perm  # a real shuffle
    plain, shuffled = (
        projected_attention(values, X),
        projected_attention(values, X[perm]),
    )  # P @ X: exact in float32
    assert_within(values["out"], plain.output, plain.output_error, "f(X)")
    assert_within(values["A"], plain.weights, plain.weights_error, "A(X)")
    assert_within(values["out_p"], shuffled.output, shuffled.output_error, "f(P X)")
    assert_within(values["A_p"], shuffled.weights, shuffled.weights_error, "A(P X)")
    # Equivariant (exactly, up to float64 rounding): f(P X) = P f(X) and A(P X) = P A(X) P^T ...
    np.testing.assert_allclose(shuffled.output, plain.output[perm], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(shuffled.weights, plain.weights[perm][:, perm], rtol=1e-12, atol=1e-15)
    # ... so the mean over tokens is unchanged, in the snippet too, to rounding ...
    error = (plain.output_error + shuffled.output_error).mean(axis=0)
    error += SAFETY * 2 * (len(X) + 1) * EPS32 * np.abs(plain.output).mean(axis=0)  # the float32 means
    assert_within(values["out_p"].mean(dim=0), values["out"].mean(dim=0), error, "mean over tokens")
    # ... but not invariant: f(P X) != f(X), by more than rounding.
    assert _apart(shuffled, plain) > 0


def test_a_causal_mask_breaks_equivariance_but_not_for_the_last_token(values):
    X, perm, swap = as64(values["X"]), permutation(values["P"]), permutation(values["swap"])
    T = len(X)
    M = values["M"].numpy()
    np.testing.assert_array_equal(M, causal(T))  # query i sees keys 0..i
    out_c, out_c_p, out_c_swap = (projected_attention(values, X[p], M) for p in (slice(None), perm, swap))
    assert_within(values["out_c"], out_c.output, out_c.output_error, "f(X, M)")
    assert_within(values["out_c_p"], out_c_p.output, out_c_p.output_error, "f(P X, M)")
    assert_within(values["out_c_swap"], out_c_swap.output, out_c_swap.output_error, "f(swapped X, M)")
    # Shuffled under the mask, the outputs are not the shuffled outputs.
    assert _apart(out_c_p, out_c, perm) > 0
    # Swapping the first two tokens (swap is its own inverse) changes what they see, but the last
    # token sees all of them either way: its output is unchanged.
    assert sorted(swap[:2]) == [0, 1] and swap[2:] == list(range(2, T))
    np.testing.assert_allclose(out_c_swap.output[-1], out_c.output[-1], rtol=1e-12, atol=1e-12)
    assert _apart(out_c_swap, out_c, swap) > 0  # the first two outputs are not just swapped


def test_positions_break_equivariance(values):
    X, perm = as64(values["X"]), permutation(values["P"])
    T, C = X.shape
    # Sinusoidal encoding by hand: PE[t, 2i] = sin(t / 10000^(2i/C)), PE[t, 2i+1] = cos(...).
    angles = np.arange(T)[:, None] / 10000 ** (np.arange(0, C, 2) / C)
    expected = np.zeros((T, C))
    expected[:, 0::2], expected[:, 1::2] = np.sin(angles), np.cos(angles)
    PE = as64(values["pos"])
    assert_within(PE, expected, SAFETY * 8 * EPS32 * (1 + np.repeat(angles, 2, axis=1)), "PE")
    size = np.abs(X) + np.abs(PE)  # X + PE is one float32 rounding away from exact
    with_pe = projected_attention(values, X + PE, rounds=1, size=size)
    shuffled_pe = projected_attention(values, X[perm] + PE, rounds=1, size=np.abs(X[perm]) + np.abs(PE))
    assert_within(values["out_pe"], with_pe.output, with_pe.output_error, "f(X + PE)")
    assert_within(values["out_pe_p"], shuffled_pe.output, shuffled_pe.output_error, "f(P X + PE)")
    difference = np.abs(shuffled_pe.output - with_pe.output[perm]).max()
    assert difference > (shuffled_pe.output_error + with_pe.output_error[perm]).max()
    shown = np.abs(as64(values["out_pe_p"]) - as64(values["P"]) @ as64(values["out_pe"])).max()
    error = (shuffled_pe.output_error + with_pe.output_error[perm]).max()
    assert_within(shown, difference, error, "largest difference")


def test_prints_the_largest_difference(printed, values):
    difference = np.abs(as64(values["out_pe_p"]) - as64(values["P"]) @ as64(values["out_pe"])).max()
    assert_shown(printed, difference, decimals=2)


def test_prints_the_verdicts_the_page_reads_line_by_line(printed):
    """The lines the page reads, in order: equivariant, not invariant, the weights move with the
    tokens, the mean stays; under a causal mask not equivariant, but the last output survives a swap
    of the first two; with positions not equivariant."""
    assert printed_flags(printed) == [True, False, True, True, False, True, False]

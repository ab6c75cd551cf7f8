"""mental_model/order.py: swapping Alice and Bob leaves met's output as it was and reorders the
outputs like the tokens; a position vector added to each token makes the two orders differ. Against
float64 NumPy."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.positions_reference import sinusoidal
from tests.support.printed import assert_shown, line_after, printed_flags
from tests.support.reference import as64
from tests.support.sentence import W_K, W_Q, W_V, X


def _attend(rows):
    """The page's head on ``rows`` in float64, with the bounds of its float32 projections."""
    sizes = [np.abs(rows) @ np.abs(M) for M in (W_Q, W_K, W_V)]
    return float32_attention(rows @ W_Q, rows @ W_K, rows @ W_V, rounds=rows.shape[-1], sizes=sizes)


def test_swapping_the_names_reorders_the_outputs_and_leaves_met_as_it_was(values, printed):
    met_bob = X[:3]
    np.testing.assert_array_equal(as64(values["met_bob"]), met_bob)
    np.testing.assert_array_equal(as64(values["bob_met"]), met_bob[[2, 1, 0]])
    exact, swapped = _attend(met_bob), _attend(met_bob[[2, 1, 0]])
    np.testing.assert_allclose(swapped.output, exact.output[[2, 1, 0]], rtol=1e-15)
    assert_within(values["out"], exact.output, exact.output_error, "Alice met Bob")
    assert_within(values["out_swapped"], swapped.output, swapped.output_error, "Bob met Alice")
    # met (position 1 in both) gets the same output; its two names share its weight evenly.
    np.testing.assert_allclose(exact.output[1], swapped.output[1], rtol=1e-15)
    np.testing.assert_allclose(exact.weights[1, 0], exact.weights[1, 2], rtol=1e-15)
    assert_shown(line_after(printed, "met's output, Alice met Bob:"), exact.output[1], decimals=3)
    assert_shown(line_after(printed, "met's output, Bob met Alice:"), swapped.output[1], decimals=3)


def test_positions_make_the_orders_differ(values, printed):
    P = sinusoidal(3, X.shape[-1])
    np.testing.assert_allclose(as64(values["P"]), P, atol=1e-6)
    placed, placed_swapped = _attend(X[:3] + P), _attend(X[:3][[2, 1, 0]] + P)
    gap = np.abs(placed.output[1] - placed_swapped.output[1]).max()
    assert gap > 1e-3 + placed.output_error[1].max() + placed_swapped.output_error[1].max()
    assert printed_flags(printed) == [True, True]


def test_the_picture_draws_mets_weights_outputs_and_alice_at_two_positions(grids, values):
    cells = grids()
    exact, swapped = _attend(X[:3]), _attend(X[:3][[2, 1, 0]])
    expected = [exact.weights[1], exact.output[1], swapped.weights[1], swapped.output[1]]
    for grid, drawn in zip(cells[:4], expected, strict=True):
        assert_within(grid.numbers(), drawn[None], 0.005 + 1e-6, "written")
    P = sinusoidal(3, X.shape[-1])
    for grid, position in zip(cells[4:], (0, 2), strict=True):
        assert_within(grid.numbers(), (X[0] + P[position])[None], 0.05 + 1e-6, f"Alice + p{position}")
    assert len(cells) == 6

"""mental_model/weighted_average.py: the picture of the output as a weighted average of the values,
against float64 NumPy."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Polygon

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.reference import as64

V = as64(LOOKUP_VALUES)
EXACT = float32_attention(as64(LOOKUP_QUERY), as64(LOOKUP_KEYS), V)
W, OUT = EXACT.weights[0], EXACT.output[0]


def _cross(a, b) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def test_the_values_are_a_convex_pentagon_in_order_and_the_output_is_inside():
    edges = np.roll(V, -1, axis=0) - V  # (S, 2): corner j to corner j + 1
    turns = [_cross(edges[j], edges[(j + 1) % len(V)]) for j in range(len(V))]
    assert all(turn > 0 for turn in turns)  # every corner turns left: convex, counter-clockwise
    # The output is left of every edge, by more than its rounding: strictly inside.
    margins = [_cross(edges[j], OUT - V[j]) / np.linalg.norm(edges[j]) for j in range(len(V))]
    assert min(margins) > 10 * EXACT.output_error.max()


def test_the_picture_draws_the_region_the_output_the_lines_and_the_weights(figure):
    (ax,) = figure.axes
    (region,) = [patch for patch in ax.patches if isinstance(patch, Polygon)]
    np.testing.assert_array_equal(region.get_xy()[: len(V)], V)
    lines = ax.get_lines()
    diamond = [line for line in lines if line.get_marker() == "D"]
    assert len(diamond) == 1
    assert_within(np.ravel(diamond[0].get_xydata()), OUT, EXACT.output_error[0], "the output")
    spokes = [line for line in lines if len(line.get_xdata()) == 2]
    assert len(spokes) == len(V)
    for j, spoke in enumerate(spokes):  # from the output to v_j, as thick as w_j
        assert_within(spoke.get_xydata()[0], OUT, EXACT.output_error[0], f"spoke {j}")
        np.testing.assert_array_equal(spoke.get_xydata()[1], V[j])
        assert_within(spoke.get_linewidth(), 0.5 + 6 * W[j], 6 * EXACT.weights_error[0, j], "width")
    labels = {
        t.get_text().split(":")[0]: float(t.get_text().split(":")[1]) for t in ax.texts if ":" in t.get_text()
    }
    assert sorted(labels) == [f"v{j}" for j in range(len(V))]
    written = [labels[f"v{j}"] for j in range(len(V))]
    assert_within(written, W, 0.005 + EXACT.weights_error[0], "weights written")


def test_what_the_page_says_the_output_sits_by_the_values_with_the_two_largest_weights():
    assert set(np.argsort(W)[-2:]) == {0, 1}
    assert set(np.argsort(np.linalg.norm(V - OUT, axis=1))[:2]) == {0, 1}
    assert (W > 0).all()  # no weight is exactly zero

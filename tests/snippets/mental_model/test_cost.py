"""mental_model/cost.py: attention's FLOPs and weight bytes, against the counts written out by hand."""

from __future__ import annotations

import numpy as np

from tests.support.printed import assert_shown


def hand_count(T: int, H: int, d_k: int) -> tuple[float, float]:
    """GFLOP of Q K^T and A V (an (m, n) @ (n, p) product is 2 m n p), and MiB of the (H, T, T) float32 weights."""
    flops = H * (2 * T * d_k * T + 2 * T * T * d_k)
    return flops / 1e9, 4 * H * T * T / 2**20


def test_every_count_is_the_hand_count(values):
    assert values["costs"]
    for (T, H, d_k), counted in values["costs"].items():
        assert counted == hand_count(T, H, d_k)  # integer counts, divided alike: exact


def test_doubling_t_multiplies_both_by_four(values):
    """Among the rows with the same heads, FLOPs and memory grow as T^2."""
    costs = values["costs"]
    for (T, H, d_k), (gflop, mib) in costs.items():
        if (2 * T, H, d_k) in costs:
            np.testing.assert_allclose(costs[2 * T, H, d_k], [4 * gflop, 4 * mib], rtol=1e-12)
    assert any((2 * T, H, d_k) in costs for T, H, d_k in costs)


def test_prints_every_count(printed, values):
    """Each row's GFLOP to 2 places and MiB to 0, in the order they were counted."""
    counts = [count for row in values["costs"].values() for count in row]  # GFLOP, MiB, GFLOP, ...
    assert_shown(printed, *counts, decimals=[2, 0] * len(values["costs"]))

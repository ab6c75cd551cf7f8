"""mental_model/cost.py: attention's FLOPs and weight bytes, against the counts written out by hand."""

from __future__ import annotations

import numpy as np

from tests.printed import block_after, line_starting


def hand_count(T: int, H: int, d_k: int) -> tuple[float, float]:
    """GFLOP of Q K^T and A V (an (m, n) @ (n, p) product is 2 m n p), and MiB of the (H, T, T) float32 weights."""
    flops = H * (2 * T * d_k * T + 2 * T * T * d_k)
    return flops / 1e9, 4 * H * T * T / 2**20


def test_cost_grows_as_t_squared(printed):
    lengths = [1024, 2048, 4096, 8192, 16384]
    table = block_after(printed, line_starting(printed, "     T"), rows=len(lengths))
    assert table[:, 0].tolist() == lengths
    for (_, gflop, mib), T in zip(table, lengths, strict=True):
        np.testing.assert_allclose([gflop, mib], hand_count(T, 1, 64), atol=0.006)
    # Doubling T multiplies both by four.
    np.testing.assert_allclose(table[1:, 1:] / table[:-1, 1:], 4, rtol=0.01)


def test_cost_of_heads_same_flops_h_times_the_memory(printed):
    table = block_after(printed, line_starting(printed, "     H"), rows=2)
    assert table[:, :2].tolist() == [[1, 768], [12, 64]]
    for H, d_k, gflop, mib in table:
        np.testing.assert_allclose([gflop, mib], hand_count(1024, int(H), int(d_k)), atol=0.006)
    assert table[0, 2] == table[1, 2] and table[1, 3] == 12 * table[0, 3]

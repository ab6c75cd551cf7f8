"""bugs/exercise_split_heads.py: self-attention with the single-view split and with view + transpose,
recomputed exactly in float64 from the snippet's own inputs and weights, each float32 result within
its rounding bound (tests/support/worst_case_rounding.py)."""

import numpy as np

from tests.support.printed import assert_shows, rounded_significant
from tests.support.worst_case_rounding import assert_largest_difference, attention, exact, matmul


def _self_attention(x, values, fixed: bool):
    """x (B, T, C) through W_Q, W_K, W_V, split into H heads, attention, heads merged back."""
    B, T, C = x.value.shape
    H = values["H"]
    d_k = C // H

    def split(a):
        if fixed:  # token t of head h: features h d_k to (h + 1) d_k of token t
            return a.reshape(B, T, H, d_k).transpose(0, 2, 1, 3).reshape(B * H, T, d_k)
        return a.reshape(B * H, T, d_k)  # consecutive chunks of d_k numbers, across tokens

    q, k, v = (matmul(x, exact(values[name])).map(split) for name in ("W_Q", "W_K", "W_V"))
    out, _ = attention(q, k, v)  # (B * H, T, d_k)
    return out.map(lambda a: a.reshape(B, H, T, d_k).transpose(0, 2, 1, 3).reshape(B, T, C))


def test_the_check(printed, values):
    x, perm = values["x"].numpy(), values["perm"].numpy()
    assert sorted(perm) == list(range(x.shape[1]))  # a shuffle of the tokens
    buggy, fixed = values["worst"].values()
    ranges = []
    for worst, split_fixed in ((buggy, False), (fixed, True)):
        shuffled_in = _self_attention(exact(x[:, perm]), values, split_fixed)
        shuffled_out = _self_attention(exact(x), values, split_fixed).map(lambda a: a[:, perm])
        ranges.append(assert_largest_difference(worst, (shuffled_in, shuffled_out)))
        if split_fixed:  # self-attention without positions is permutation-equivariant
            np.testing.assert_allclose(shuffled_in.value, shuffled_out.value, rtol=0, atol=1e-12)
    # The single view breaks equivariance by more than the fix's rounding could, on every machine.
    assert ranges[0][0] > ranges[1][1]
    assert_shows(printed, rounded_significant([buggy, fixed], 2))

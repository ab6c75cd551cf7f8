"""playground/exercise_mask_one.py: masking one key rescales the others by one common factor."""

import numpy as np

from tests.support.float32_attention_bounds import SAFETY, assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import EPS32, as64


def test_masking_key_0_renormalises_the_others(values):
    q, K, V = (as64(values[name]) for name in ("q", "K", "V"))
    allowed = values["allowed"].numpy()
    assert allowed.tolist() == [[False] + [True] * (len(K) - 1)]  # only key 0 masked
    before = float32_attention(q, K, V)
    after = float32_attention(q, K, V, allowed=allowed)
    assert_within(values["before"], before.weights, before.weights_error, "weights, every key")
    assert_within(values["after"], after.weights, after.weights_error, "weights, key 0 masked")
    assert values["after"][0, 0] == 0  # exp(-inf) = 0: exact

    # By hand: masking removes exp(s_0) from the denominator and nothing else, so every other weight
    # is divided by the same 1 - w_0.
    w = before.weights[0]
    np.testing.assert_allclose(after.weights[0, 1:], w[1:] / (1 - w[0]), rtol=1e-12)

    # The snippet's own division, w_j / (1 - w_0) from its float32 weights: their relative error r
    # becomes r w_0 / (1 - w_0) in the denominator, plus the subtraction and the division.
    r = (before.weights_error / np.maximum(before.weights, np.finfo(float).tiny))[0]
    relative = r[1:] + (r[0] * w[0] + EPS32) / (1 - w[0]) + EPS32
    error = SAFETY * relative * after.weights[0, 1:]
    assert_within(values["renormalised"], after.weights[0, 1:], error, "renormalised")
    assert_within(values["renormalised"], values["after"][0, 1:], error + after.weights_error[0, 1:])


def test_prints_the_three_rows_of_weights(printed, values):
    assert_shown(printed, values["before"][0], values["after"][0], values["renormalised"])

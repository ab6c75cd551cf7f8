"""mental_model/exercise_shift.py: adding one number to every score leaves the weights as they are;
a naive exp overflows float32."""

from __future__ import annotations

import numpy as np

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY
from tests.support.float32_attention_bounds import SAFETY, softmax_error
from tests.support.printed import assert_shown, line_after
from tests.support.reference import EPS32, as64, softmax

q, K = as64(LOOKUP_QUERY), as64(LOOKUP_KEYS)
SCORES = q @ K.T / np.sqrt(K.shape[-1])  # (1, S)
SCORES_ERROR = SAFETY * (K.shape[-1] + 2) * EPS32 * (np.abs(q) @ np.abs(K).T) / np.sqrt(K.shape[-1])


def test_every_shift_gives_the_same_weights(values):
    weights = softmax(SCORES)
    assert len(values["shifted"]) >= 2
    for c, shown in values["shifted"].items():
        # By hand: e^(s + c) / sum e^(s + c) = e^s / sum e^s; in float32, s + c is rounded once more,
        # by up to EPS32 |s + c|.
        error = softmax_error(SCORES + c, SCORES_ERROR + SAFETY * EPS32 * np.abs(SCORES + c))
        assert np.abs(as64(shown) - weights).max() <= error.max(), f"c = {c}"


def test_the_printed_weights_are_the_same_to_three_decimals(printed, values):
    weights = softmax(SCORES)[0]
    for c in values["shifted"]:
        assert_shown(line_after(printed, f"scores + {c:<6}: weights"), weights, decimals=3)


def test_a_naive_exp_overflows(values, printed):
    largest = float(np.finfo(np.float32).max)
    assert (np.exp(SCORES + 100.0) > largest).all()  # float64: e^(s + 100) is beyond float32
    assert np.isinf(as64(values["naive"])).all()
    assert line_after(printed, "exp(scores + 100):").strip() == "tensor([inf, inf, inf, inf, inf])"

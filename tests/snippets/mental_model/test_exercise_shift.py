"""mental_model/exercise_shift.py: adding one number to every score leaves the weights as they are;
a naive exp overflows float32."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import SAFETY, softmax_error
from tests.support.printed import assert_shown, line_after
from tests.support.reference import EPS32, as64, softmax
from tests.support.sentence import SHE, K, Q

SCORES = K @ Q[SHE] / np.sqrt(K.shape[-1])  # (T,)
SCORES_ERROR = SAFETY * (K.shape[-1] + 2) * EPS32 * (np.abs(K) @ np.abs(Q[SHE])) / np.sqrt(K.shape[-1])


def test_the_exercises_vectors_are_the_sentences(values):
    np.testing.assert_array_equal(as64(values["K"]), K)
    np.testing.assert_array_equal(as64(values["q"]), Q[SHE])


def test_every_shift_gives_the_same_weights(values):
    weights = softmax(SCORES)
    assert len(values["shifted"]) >= 2
    for c, shown in values["shifted"].items():
        # By hand: e^(s + c) / sum e^(s + c) = e^s / sum e^s; in float32, s + c is rounded once more.
        error = softmax_error(SCORES + c, SCORES_ERROR + SAFETY * EPS32 * np.abs(SCORES + c))
        assert np.abs(as64(shown) - weights).max() <= error.max(), f"c = {c}"


def test_the_printed_weights_are_the_same_to_three_decimals(printed, values):
    weights = softmax(SCORES)
    for c in values["shifted"]:
        assert_shown(line_after(printed, f"scores + {c:<5}: weights"), weights, decimals=3)


def test_a_naive_exp_overflows(values, printed):
    largest = float(np.finfo(np.float32).max)
    assert (np.exp(SCORES + 100.0) > largest).all()  # float64: e^(s + 100) is beyond float32
    assert np.isinf(as64(values["naive"])).all()
    assert line_after(printed, "exp(scores + 100):").strip() == "tensor([inf, inf, inf, inf])"

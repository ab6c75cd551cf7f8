"""mental_model/exercise_find_bob.py: a query for a name that is not female finds Bob."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import float32_attention
from tests.support.printed import assert_shown, line_after
from tests.support.reference import as64
from tests.support.sentence import BOB, K, V, leads


def test_the_exercises_keys_and_values_are_the_sentences(values):
    np.testing.assert_array_equal(as64(values["K"]), K)
    np.testing.assert_array_equal(as64(values["V"]), V)


def test_the_query_finds_bob_and_takes_his_value(values, printed):
    q = as64(values["q"])
    exact = float32_attention(q[None], K, V)
    assert leads(exact.weights[0], exact.weights_error, BOB)
    assert exact.weights[0, BOB] > 0.85 and np.abs(exact.output[0] - V[BOB]).max() < 0.15
    assert_shown(line_after(printed, "scores: "), K @ q / np.sqrt(2), decimals=2)
    assert_shown(line_after(printed, "weights:"), exact.weights[0], decimals=3)
    assert_shown(line_after(printed, "output (Alice, Bob):"), exact.output[0], decimals=3)
    assert line_after(printed, "attends most to:").strip() == "Bob"

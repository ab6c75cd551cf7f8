"""mental_model/context.py: the same word gets different outputs in two sentences."""

from __future__ import annotations

import numpy as np

from tests.printed import flag, line_after, numbers
from tests.reference import attention
from tests.snippets.mental_model.helpers import seeded_randn


def test_context_changes_the_same_word_in_two_sentences(printed):
    vocab = ["a", "cat", "mat", "on", "ran", "sat", "the"]
    W_E, W_Q, W_K, W_V = seeded_randn((7, 4), (4, 4), (4, 4), (4, 4))

    def layer(words):
        X = W_E[[vocab.index(w) for w in words]]
        return attention(X @ W_Q, X @ W_K, X @ W_V)[0]

    Y1 = layer(["the", "cat", "sat", "on", "the", "mat"])
    Y2 = layer(["a", "cat", "ran"])
    assert line_after(printed, "inputs:").strip() == "(6, 4) and (3, 4)"
    assert line_after(printed, "outputs:").strip() == "(6, 4) and (3, 4)"
    np.testing.assert_allclose(numbers(line_after(printed, "'cat' output in sentence 1:")), Y1[1], atol=1e-4)
    np.testing.assert_allclose(numbers(line_after(printed, "'cat' output in sentence 2:")), Y2[1], atol=1e-4)
    assert flag(printed, "'cat' has the same embedding in both:")
    assert flag(printed, "'cat' has the same output in both:") == bool(np.allclose(Y1[1], Y2[1]))
    assert not np.allclose(Y1[1], Y2[1])
    assert flag(printed, "the two 'the' of sentence 1, same output:") == bool(np.allclose(Y1[0], Y1[4]))

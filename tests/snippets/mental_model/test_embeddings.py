"""mental_model/embeddings.py: one-hot vectors times W_E are a row lookup; attention then gives
the same word different outputs in two sentences."""

from __future__ import annotations

import numpy as np

from tests.printed import flag, line_after, numbers
from tests.reference import attention
from tests.snippets.mental_model.helpers import seeded_randn


def test_embeddings_shapes_and_lookup(printed):
    sentence_length, vocab_size, width = 6, 7, 4  # the sentence, the vocabulary, C
    assert (
        line_after(printed, "raw:").strip()
        == f"{(sentence_length, vocab_size)}  X: {(sentence_length, width)}"
    )
    assert flag(printed, "one-hot @ W_E == nn.Embedding lookup:")
    assert flag(printed, "both 'the' get the same vector:")


def test_context_changes_the_same_word_in_two_sentences(printed):
    vocab = ["a", "cat", "mat", "on", "ran", "sat", "the"]
    W_E, W_Q, W_K, W_V = seeded_randn((7, 4), (4, 4), (4, 4), (4, 4))

    def layer(words):
        X = W_E[[vocab.index(w) for w in words]]
        return attention(X @ W_Q, X @ W_K, X @ W_V)[0]

    Y1 = layer(["the", "cat", "sat", "on", "the", "mat"])
    Y2 = layer(["a", "cat", "ran"])
    assert line_after(printed, "outputs:").strip() == "(6, 4) and (3, 4)"
    np.testing.assert_allclose(numbers(line_after(printed, "'cat' in sentence 1:")), Y1[1], atol=1e-4)
    np.testing.assert_allclose(numbers(line_after(printed, "'cat' in sentence 2:")), Y2[1], atol=1e-4)
    assert not np.allclose(Y1[1], Y2[1])
    assert np.allclose(Y1[0], Y1[4]) and flag(printed, "the two 'the' of sentence 1, same output:") is True

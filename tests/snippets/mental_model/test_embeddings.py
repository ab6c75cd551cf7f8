"""mental_model/embeddings.py: one-hot vectors times W_E are a row lookup; attention then gives
the same word different outputs in two sentences."""

from __future__ import annotations

import numpy as np

from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown, printed_flags
from tests.support.reference import as64


def test_one_hot_times_w_e_is_a_row_lookup(values):
    vocab, sentence = values["vocab"], values["sentence"]
    ids = [vocab.index(word) for word in sentence]
    assert values["ids"].tolist() == ids
    raw, W_E, X = (as64(values[name]) for name in ("raw", "W_E", "X"))
    np.testing.assert_array_equal(raw, np.eye(len(vocab))[ids])  # (T, D): one-hot rows
    assert X.shape == (len(sentence), values["C"])
    # One 1 and zeros in each product: exact in float32, so equal to the looked-up rows bit for bit.
    np.testing.assert_array_equal(X, W_E[ids])
    np.testing.assert_array_equal(as64(values["embedding"].weight), W_E)
    # The same word, the same row.
    for i, j in _repeats(sentence):
        np.testing.assert_array_equal(X[i], X[j])


def _repeats(words: list[str]) -> list[tuple[int, int]]:
    """The pairs of positions (i, j), j < i, that hold the same word."""
    return [(i, j) for i in range(len(words)) for j in range(i) if words[i] == words[j]]


def _layer(values, words):
    """The snippet's self_attention in float64, with the error bounds of its float32 projections."""
    W_E, W_Q, W_K, W_V = (as64(values[name]) for name in ("W_E", "W_Q", "W_K", "W_V"))
    X = W_E[[values["vocab"].index(word) for word in words]]
    sizes = [np.abs(X) @ np.abs(W) for W in (W_Q, W_K, W_V)]
    return float32_attention(X @ W_Q, X @ W_K, X @ W_V, rounds=X.shape[-1], sizes=sizes)


def test_context_changes_the_same_word_in_two_sentences(values):
    sentences = {"Y1": values["sentence"], "Y2": values["sentence_2"]}
    exact = {name: _layer(values, words) for name, words in sentences.items()}
    for name, words in sentences.items():
        assert values[name].shape == (len(words), values["C"])
        assert_within(values[name], exact[name].output, exact[name].output_error, name)
    # 'cat', identical on the way in, comes out different: by more than rounding.
    i, j = sentences["Y1"].index("cat"), sentences["Y2"].index("cat")
    gap = np.abs(exact["Y1"].output[i] - exact["Y2"].output[j]).max()
    assert gap > (exact["Y1"].output_error[i] + exact["Y2"].output_error[j]).max()


def test_the_same_word_in_one_sentence_gets_the_same_output(values):
    """Same input row, same query: the same output exactly in exact arithmetic, and within float32
    rounding of it in the snippet."""
    words = values["sentence"]
    exact = _layer(values, words)
    pairs = _repeats(words)
    assert pairs
    for i, j in pairs:
        np.testing.assert_allclose(exact.output[i], exact.output[j], rtol=1e-12, atol=1e-12)
        assert_within(values["Y1"][i], values["Y1"][j], exact.output_error[i] + exact.output_error[j])


def test_prints_both_cats(printed, values):
    i, j = values["sentence"].index("cat"), values["sentence_2"].index("cat")
    assert_shown(printed, values["Y1"][i], values["Y2"][j])


def test_prints_the_verdicts(printed):
    """The lookup is the one-hot product, both 'the' get one vector, and the same output."""
    assert printed_flags(printed) == [True, True, True]

"""mental_model/embeddings.py: one-hot vectors times W_E are a row lookup."""

from tests.printed import flag, line_after


def test_embeddings_shapes_and_lookup(printed):
    sentence_length, vocab_size, width = 6, 7, 4  # the sentence, the vocabulary, C
    assert line_after(printed, "raw:").split() == [
        f"({sentence_length},",
        f"{vocab_size})",
        "W_E:",
        f"({vocab_size},",
        f"{width})",
        "X:",
        f"({sentence_length},",
        f"{width})",
    ]
    assert flag(printed, "one-hot @ W_E is the row lookup W_E[ids]:")
    assert flag(printed, "nn.Embedding with the same table agrees:")
    assert flag(printed, "both 'the' tokens get the same vector:")

"""attn_ref.training.corpus, .text, .text_heads and the text playground's file: the corpus, the model and the head scores, against references written out here.

The model is checked against float64 NumPy written out in this file and against PyTorch's own
`torch.nn.TransformerEncoderLayer`; the scores and the text masks against plain-Python loops
that find the same positions another way (regular expressions, scanning backwards); the n-gram
baselines against counts made with `collections.Counter`. Nothing here trains a model for more
than a few steps: the trained models' claims are checked in
`tests/tutorials/test_attention_on_text.py`, on the models the tutorial's execution trained.
"""

from __future__ import annotations

import base64
import collections
import copy
import hashlib
import itertools
import json
import math
import re
import string

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attn_ref.training import (
    ALPHABET,
    AttentionOnlyDecoder,
    CharTransformer,
    ablated_losses,
    bigram_window_bits,
    char_model_from_playground_json,
    char_playground_json,
    closing_predictions,
    context_losses,
    copy_predictions,
    decode,
    encode,
    induction_targets,
    load_corpus,
    ngram_bits,
    opener_targets,
    playground_json,
    previous_char_targets,
    repeated_documents,
    sample,
    split_documents,
    target_scores,
    to_alphabet,
    train_char_model,
    verbatim_windows,
    window_losses,
    windows,
    without_heads,
    word_start_targets,
)
from tests.support import reference

SETTINGS = settings(max_examples=40, deadline=None)
MODEL_SETTINGS = settings(max_examples=20, deadline=None)  # each example runs the float64 model
LN2 = math.log(2)


# --- references -------------------------------------------------------------------------------


def forward64(model: CharTransformer, tokens: np.ndarray, zeroed=()) -> tuple[np.ndarray, list[np.ndarray]]:
    """The model written out in float64: logits and each layer's (B, H, T, T) weights.

    ``zeroed`` lists (layer, head) pairs whose output is dropped before the output projection.
    """
    B, T = tokens.shape
    x = (
        reference.as64(model.token_embedding.weight)[tokens]
        + reference.as64(model.position_embedding.weight)[:T]
    )
    allowed = reference.causal(T)
    all_weights = []
    for layer, block in enumerate(model.blocks):
        attn = block.attn
        H, d_k = attn.num_heads, attn.head_dim
        h = reference.layer_norm(x, block.norm1)

        def heads(y, projection, H=H, d_k=d_k):  # (B, T, C) -> (B, H, T, d_k)
            return reference.linear(y, projection).reshape(B, T, H, d_k).transpose(0, 2, 1, 3)

        out, weights = reference.attention(
            heads(h, attn.q_proj), heads(h, attn.k_proj), heads(h, attn.v_proj), allowed
        )
        for zl, zh in zeroed:
            if zl == layer:
                out[:, zh] = 0.0
        concat = out.transpose(0, 2, 1, 3).reshape(B, T, H * d_k)
        x = x + reference.linear(concat, attn.out_proj)
        mlp_in = reference.layer_norm(x, block.norm2)
        x = x + reference.linear(reference.gelu(reference.linear(mlp_in, block.mlp[0])), block.mlp[2])
        all_weights.append(weights)
    return reference.linear(reference.layer_norm(x, model.norm), model.head), all_weights


def nll_bits(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    z = logits[:, :-1] - logits[:, :-1].max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0] / LN2


@st.composite
def models(draw, max_T: int = 10):
    num_heads = draw(st.integers(1, 4))
    config = {
        "context_length": draw(st.integers(2, max_T)),
        "embed_dim": num_heads * draw(st.integers(1, 4)),
        "num_layers": draw(st.integers(1, 3)),
        "num_heads": num_heads,
    }
    torch.manual_seed(draw(st.integers(0, 2**31 - 1)))
    return CharTransformer(**config).double().eval()


@st.composite
def models_and_batches(draw):
    model = draw(models())
    B = draw(st.integers(1, 3))
    T = draw(st.integers(1, model.context_length))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    return model, torch.randint(0, len(ALPHABET), (B, T), generator=g)


bracketed_texts = st.text(alphabet=st.sampled_from('ab (x)[y]{z}"q"\n'), min_size=2, max_size=60)


# --- the alphabet and the corpus --------------------------------------------------------------


def test_the_alphabet_is_the_newline_and_printable_ascii():
    assert len(ALPHABET) == 96 and len(set(ALPHABET)) == 96
    assert set(ALPHABET) == {"\n"} | (set(string.printable) - set("\t\r\x0b\x0c\n")) | {" "}
    assert list(ALPHABET) == sorted(ALPHABET)  # ids follow code points


@SETTINGS
@given(st.text(max_size=50))
def test_to_alphabet_keeps_ascii_and_writes_only_the_alphabet(text):
    mapped = to_alphabet(text)
    assert set(mapped) <= set(ALPHABET)
    kept = "".join(c for c in text if c in ALPHABET)
    if kept == text:
        assert mapped == text


def test_to_alphabet_on_typographic_characters():
    assert to_alphabet("\u201cx\u201d \u2018y\u2019 a\u2013b\u2014c\u2026\tß") == "\"x\" 'y' a-b-c..."


def test_split_documents_cuts_each_document_at_a_line():
    documents = {"a": "".join(f"line {i}\n" for i in range(50)), "b": "x\n" * 7}
    train, held = split_documents(documents, 0.1)
    for text, first, rest in zip(documents.values(), train, held, strict=True):
        assert first + rest == text
        assert first == "" or first.endswith("\n")
        # the cut is the start of the line where the last tenth begins
        cut = math.floor(len(text) * 0.9)
        assert len(first) <= cut < len(first) + max(len(line) + 1 for line in text.split("\n"))


def test_the_corpus_is_pythons_own_documentation():
    from pydoc_data.topics import topics

    raw = "".join(topics[name] for name in sorted(topics))
    corpus = load_corpus()
    assert corpus.raw_chars == len(raw) and 400_000 < len(raw) < 600_000
    assert corpus.sha256 == hashlib.sha256(raw.encode()).hexdigest()
    assert set(corpus.train + corpus.held_out) <= set(ALPHABET)
    # every document contributes to both parts; about a tenth is held out
    share = len(corpus.held_out) / (len(corpus.train) + len(corpus.held_out))
    assert 0.09 < share < 0.12
    ascii_only = "".join(c for c in raw if c in ALPHABET)
    assert corpus.dropped == len(raw) + 2 * raw.count("\u2026") - len(to_alphabet(raw))
    assert len(ascii_only) > 0.99 * len(raw)


@SETTINGS
@given(st.text(alphabet=st.sampled_from(ALPHABET), max_size=40))
def test_encode_decode_round_trip(text):
    ids = encode(text)
    assert ids.dtype == torch.long and ids.shape == (len(text),)
    assert [ALPHABET[i] for i in ids.tolist()] == list(text)
    assert decode(ids) == text


def test_windows_against_numpy():
    ids = torch.arange(23) % 96
    np.testing.assert_array_equal(windows(ids, 5).numpy(), ids.numpy()[:20].reshape(4, 5))


# --- the model --------------------------------------------------------------------------------


@MODEL_SETTINGS
@given(models_and_batches())
def test_model_matches_float64_numpy(case):
    model, tokens = case
    logits, weights = model(tokens)
    expected_logits, expected_weights = forward64(model, tokens.numpy())
    np.testing.assert_allclose(reference.as64(logits), expected_logits, atol=1e-9)
    for ours, theirs in zip(weights, expected_weights, strict=True):
        np.testing.assert_allclose(reference.as64(ours), theirs, atol=1e-12)


@MODEL_SETTINGS
@given(models_and_batches())
def test_model_matches_pytorchs_encoder_layers(case):
    """Each block is TransformerEncoderLayer(norm_first=True, activation="gelu") with a causal mask."""
    model, tokens = case
    T = tokens.shape[1]
    theirs = []
    for block in model.blocks:
        C, H = block.attn.embed_dim, block.attn.num_heads
        layer = nn.TransformerEncoderLayer(
            C, H, dim_feedforward=4 * C, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        ).double()
        with torch.no_grad():
            projections = (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj)
            layer.self_attn.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
            layer.self_attn.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
            layer.self_attn.out_proj.load_state_dict(block.attn.out_proj.state_dict())
            layer.linear1.load_state_dict(block.mlp[0].state_dict())
            layer.linear2.load_state_dict(block.mlp[2].state_dict())
            layer.norm1.load_state_dict(block.norm1.state_dict())
            layer.norm2.load_state_dict(block.norm2.state_dict())
        theirs.append(layer.eval())
    masked = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # PyTorch: True = may not attend
    with torch.no_grad():
        x = model.token_embedding(tokens) + model.position_embedding(torch.arange(T))
        for layer in theirs:
            x = layer(x, src_mask=masked)
        expected = model.head(model.norm(x))
        ours, _ = model(tokens)
    torch.testing.assert_close(ours, expected, atol=1e-9, rtol=0)


@MODEL_SETTINGS
@given(models_and_batches(), st.data())
def test_without_heads_drops_exactly_those_heads(case, data):
    model, tokens = case
    pairs = [(layer, head) for layer in range(len(model.blocks)) for head in range(model.num_heads)]
    zeroed = data.draw(st.lists(st.sampled_from(pairs), max_size=3, unique=True))
    ablated = without_heads(model, zeroed)
    expected, _ = forward64(model, tokens.numpy(), zeroed)
    np.testing.assert_allclose(reference.as64(ablated(tokens)[0]), expected, atol=1e-9)
    # the original is left as it was
    np.testing.assert_allclose(
        reference.as64(model(tokens)[0]), forward64(model, tokens.numpy())[0], atol=1e-9
    )


def test_window_losses_against_numpy():
    torch.manual_seed(0)
    model = CharTransformer(12, 8, 2, 2).double().eval()
    batch = torch.randint(0, 96, (70, 12))  # more rows than one chunk of 64
    expected = nll_bits(forward64(model, batch.numpy())[0], batch.numpy())
    np.testing.assert_allclose(reference.as64(window_losses(model, batch)) / LN2, expected, atol=1e-9)


def test_context_losses_read_only_the_last_characters():
    torch.manual_seed(2)
    model = CharTransformer(12, 8, 2, 2).double().eval()
    ids = torch.randint(0, 96, (200,))
    positions = torch.tensor([12, 50, 51, 199])
    for context in (1, 5, 12):
        got = reference.as64(context_losses(model, ids, positions, context)) / LN2
        for k, p in enumerate(positions.tolist()):
            rows = ids[p - context : p + 1].numpy()[None]  # the context, then the character
            logits, _ = forward64(model, rows[:, :-1])
            z = logits[0, -1] - logits[0, -1].max()
            expected = -(z[rows[0, -1]] - np.log(np.exp(z).sum())) / LN2
            assert got[k] == pytest.approx(expected, abs=1e-9)


def test_ablated_losses_zero_one_head_at_a_time():
    torch.manual_seed(1)
    model = CharTransformer(8, 8, 2, 2).double().eval()
    batch = torch.randint(0, 96, (3, 8))
    losses = ablated_losses(model, batch)
    assert sorted(losses) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for pair, got in losses.items():
        expected = nll_bits(forward64(model, batch.numpy(), [pair])[0], batch.numpy())
        np.testing.assert_allclose(reference.as64(got) / LN2, expected, atol=1e-9)


def test_training_is_seeded_and_lowers_the_loss():
    ids = encode("the cat sat on the mat. " * 40)

    def trained(seed):
        torch.manual_seed(seed)
        model = CharTransformer(16, 16, 1, 2)
        history = train_char_model(model, ids, steps=40, batch_size=8, lr=1e-2, seed=seed, warmup=5)
        return model, history

    (a, history_a), (b, history_b) = trained(3), trained(3)
    assert history_a == history_b
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)
    # A 24-character cycle: far below ln 96 (4.56 nats) per character after 40 steps.
    assert np.mean(history_a[-5:]) < 0.5 * math.log(96) and not a.training


def test_sampling_is_seeded_and_cold_sampling_is_greedy():
    torch.manual_seed(0)
    model = CharTransformer(16, 16, 1, 2).eval()
    assert sample(model, "ab", 10, 1.0, seed=4) == sample(model, "ab", 10, 1.0, seed=4)
    ids = encode("ab").tolist()
    for _ in range(10):  # greedy decoding written out: the most likely character each time
        logits, _ = model(torch.tensor([ids[-16:]]))
        ids.append(int(logits[0, -1].argmax()))
    assert sample(model, "ab", 10, 1e-4, seed=0) == decode(ids[2:])


# --- baselines --------------------------------------------------------------------------------


def test_ngram_bits_against_counts():
    train, test = "abracadabra\n", "cabbage a"
    V = len(ALPHABET)
    assert ngram_bits(encode(train), encode(test), 0) == pytest.approx(math.log2(96))
    unigram = collections.Counter(train)
    expected = -np.mean([math.log2((unigram[c] + 1) / (len(train) + V)) for c in test])
    assert ngram_bits(encode(train), encode(test), 1) == pytest.approx(expected)
    pairs = collections.Counter(itertools.pairwise(train))
    firsts = collections.Counter(train[:-1])
    expected = -np.mean(
        [math.log2((pairs[(a, b)] + 1) / (firsts[a] + V)) for a, b in itertools.pairwise(test)]
    )
    assert ngram_bits(encode(train), encode(test), 2) == pytest.approx(expected)


@SETTINGS
@given(
    st.text(alphabet="ab\n(", min_size=2, max_size=30),
    st.lists(st.text(alphabet="ab\n(", min_size=2, max_size=8), min_size=1, max_size=4),
)
def test_bigram_window_bits_against_counts(train, rows):
    length = min(len(r) for r in rows)
    batch = torch.stack([encode(r[:length]) for r in rows])
    pairs = collections.Counter(itertools.pairwise(train))
    firsts = collections.Counter(train[:-1])
    V = len(ALPHABET)
    expected = [
        [-math.log2((pairs[(a, b)] + 1) / (firsts[a] + V)) for a, b in itertools.pairwise(r[:length])]
        for r in rows
    ]
    np.testing.assert_allclose(bigram_window_bits(encode(train), batch).numpy(), expected, rtol=1e-12)


# --- the corpus: repeats and leaks ------------------------------------------------------------


def passages_by_slicing(text: str, length: int) -> set[str]:
    return {text[i : i + length] for i in range(len(text) - length + 1)}


@SETTINGS
@given(
    st.dictionaries(st.sampled_from("pqrstu"), st.text(alphabet="ab", min_size=0, max_size=24), max_size=5)
)
def test_repeated_documents_keep_no_repeat_and_drop_only_repeats(documents):
    """Visiting the documents from the longest: a dropped one has more than half of its 4-character
    passages in the longer kept ones, a kept one at most half (or none, if it has no passage)."""
    repeats = repeated_documents(documents, length=4)
    assert repeats == sorted(repeats) and set(repeats) <= set(documents)
    order = sorted(documents, key=lambda name: (-len(documents[name]), name))
    for position, name in enumerate(order):
        earlier = [other for other in order[:position] if other not in repeats]
        seen = set().union(*(passages_by_slicing(documents[o], 4) for o in earlier))
        own = passages_by_slicing(documents[name], 4)
        assert (name in repeats) == (len(own & seen) > len(own) / 2)


def test_repeated_documents_on_a_case_by_hand():
    documents = {
        "loops": "The for statement. The while statement.",
        "for": "The for statement.",  # wholly inside "loops"
        "if": "The if statement.",  # shares " statement." only
        "while": "The while statement. More.",  # most of it inside "loops"
    }
    assert repeated_documents(documents, length=8) == ["for", "while"]
    assert repeated_documents(documents, length=8, share=0.9) == ["for"]


@SETTINGS
@given(
    st.text(alphabet="abc", min_size=3, max_size=40), st.text(alphabet="abc", max_size=40), st.integers(1, 3)
)
def test_verbatim_windows_against_str_find(text, reference, length):
    found = verbatim_windows(text, reference, length).tolist()
    expected = [reference.find(text[w * length : (w + 1) * length]) >= 0 for w in range(len(text) // length)]
    assert found == expected


def test_the_corpus_without_repeats_dropped_is_the_plain_split():
    """load_corpus(drop_repeats=False) is every topic split, as split_documents splits it."""
    from pydoc_data.topics import topics

    corpus = load_corpus(drop_repeats=False)
    train, held = split_documents({name: to_alphabet(topics[name]) for name in sorted(topics)})
    assert corpus.repeats == () and corpus.documents == tuple(sorted(topics))
    assert (corpus.train, corpus.held_out) == ("\n\n".join(train), "\n\n".join(held))


# --- scores and the positions they look at ---------------------------------------------------


def scores_by_loops(weights: np.ndarray, targets: np.ndarray) -> np.ndarray:
    B, H, T, _ = weights.shape
    totals, count = np.zeros(H), 0
    for b in range(B):
        for i in range(T):
            if targets[b, i].any():
                count += 1
                for h in range(H):
                    totals[h] += sum(weights[b, h, i, j] for j in range(T) if targets[b, i, j])
    return totals / count


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(2, 8), st.integers(0, 2**31 - 1))
def test_target_scores_against_loops(B, H, T, seed):
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand(B, H, T, T, generator=g, dtype=torch.float64).tril()
    weights = weights / weights.sum(-1, keepdim=True)
    targets = torch.rand(B, T, T, generator=g) < 0.3
    targets[0, -1, 0] = True  # at least one query has a target
    np.testing.assert_allclose(
        reference.as64(target_scores(weights, targets)),
        scores_by_loops(weights.numpy(), targets.numpy()),
        atol=1e-12,
    )


def test_a_head_on_its_targets_scores_one_and_uniform_attention_its_share():
    T = 6
    previous = torch.eye(T).roll(-1, dims=1).tril()  # query i: key i - 1
    previous[0, 0] = 1.0
    uniform = torch.tril(torch.ones(T, T)) / torch.arange(1.0, T + 1)[:, None]
    targets = previous_char_targets(torch.zeros(1, T, dtype=torch.long))
    scores = target_scores(torch.stack([previous, uniform])[None], targets)
    expected_uniform = np.mean([1 / (i + 1) for i in range(1, T)])  # query i sees i + 1 keys
    np.testing.assert_allclose(scores.numpy(), [1.0, expected_uniform], atol=1e-6)


def word_starts_by_regex(text: str, min_offset: int) -> dict[int, int]:
    """query -> the first letter of its word, found with a regular expression."""
    found = {}
    for word in re.finditer(r"[A-Za-z]+", text):
        if word.start() == 0:
            continue  # the word may have begun before the window
        for i in range(word.start() + min_offset, word.end()):
            found[i] = word.start()
    return found


@SETTINGS
@given(st.text(alphabet=st.sampled_from("abZ _-1\n"), min_size=1, max_size=30), st.integers(1, 3))
def test_word_start_targets_against_a_regex(text, min_offset):
    targets = word_start_targets(encode(text)[None], min_offset)[0]
    expected = np.zeros((len(text), len(text)), dtype=bool)
    for i, j in word_starts_by_regex(text, min_offset).items():
        expected[i, j] = True
    np.testing.assert_array_equal(targets.numpy(), expected)


def innermost_open_by_scanning_back(text: str, i: int, kinds: str) -> int:
    """The innermost bracket still open at ``i``, found by scanning backwards; -1 if none.

    Valid for strings whose brackets nest properly (each closer meets its own opener) and that
    have no blank line: going back, a closer pushes, its opener pops, an opener that meets no
    closer is the one still open.
    """
    pending = []
    for j in range(i - 1, -1, -1):
        c = text[j]
        if c in ")]}" and "([{"[")]}".index(c)] in kinds:
            pending.append(c)
        elif c in kinds and c in "([{":
            if pending:
                pending.pop()
            else:
                return j
    return -1


@st.composite
def nested(draw, depth=0):
    """Properly nested brackets with letters between them."""
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        if depth < 3 and draw(st.booleans()):
            opener = draw(st.sampled_from("([{"))
            inner = draw(nested(depth + 1))
            parts.append(opener + inner + ")]}"["([{".index(opener)])
        else:
            parts.append(draw(st.sampled_from("ab c")))
    return "".join(parts)


@SETTINGS
@given(nested(), st.sampled_from(["([{", "(", "[{"]), st.integers(1, 3))
def test_bracket_targets_against_a_backward_scan(text, kinds, min_offset):
    if len(text) < 2:
        return
    targets = opener_targets(encode(text), len(text), kinds, min_offset)[0]
    expected = np.zeros((len(text), len(text)), dtype=bool)
    for i in range(len(text)):
        j = innermost_open_by_scanning_back(text, i, kinds)
        if j >= 0 and i - j >= min_offset:
            expected[i, j] = True
    np.testing.assert_array_equal(targets.numpy(), expected)


@SETTINGS
@given(st.lists(st.text(alphabet=st.sampled_from('ab "'), max_size=12), min_size=1, max_size=4))
def test_quote_targets_pair_quotes_within_a_paragraph(paragraphs):
    text = "\n\n".join(paragraphs) + " "
    targets = opener_targets(encode(text), len(text), '"', min_offset=1)[0]
    expected = np.zeros((len(text), len(text)), dtype=bool)
    start = 0
    for paragraph in paragraphs:  # quotes pair up in order: 1st with 2nd, 3rd with 4th
        quotes = [start + k for k, c in enumerate(paragraph) if c == '"']
        # an unclosed quote's span ends at the paragraph's first newline; with an even number
        # of quotes that last closer is one too many, and zip leaves it out
        for opener, closer in zip(quotes[0::2], [*quotes[1::2], start + len(paragraph)], strict=False):
            for i in range(opener + 1, closer + 1):
                if i < len(text):
                    expected[i, opener] = True
        start += len(paragraph) + 2
    np.testing.assert_array_equal(targets.numpy(), expected)


def test_brackets_inside_quotes_close_with_the_quotes():
    text = 'x "(" y (a "b" c) d'
    brackets = opener_targets(encode(text), len(text), "([{", min_offset=1)[0]
    by_query = {i: row.nonzero().flatten().tolist() for i, row in enumerate(brackets)}
    # the "(" at 3 is inside quotes: once they close at 4, it is no longer open
    assert by_query[4] == [3] and by_query[5] == [] and by_query[8] == []
    assert all(by_query[i] == [8] for i in range(9, 17)) and by_query[17] == []
    quotes = opener_targets(encode(text), len(text), '"', min_offset=1)[0]
    assert quotes[3:5, 2].all() and quotes[12:14, 11].all() and not quotes[14:].any()
    assert closing_predictions(encode(text), len(text), "([{")[0].nonzero().flatten().tolist() == [15]
    assert closing_predictions(encode(text), len(text), '"')[0].nonzero().flatten().tolist() == [3, 12]


def test_opener_targets_follow_the_text_across_windows():
    text = '(ab"cd"ef)gh'  # windows of 4: "(ab"  'cd"e'  "f)gh"
    targets = opener_targets(encode(text), 4, "([{", min_offset=1)
    # the "(" at position 0 is outside the later windows: no target there
    assert targets.shape == (3, 4, 4) and targets[0, 1:, 0].all() and not targets[1:].any()
    quotes = opener_targets(encode(text), 4, '"', min_offset=1)
    assert not quotes[0].any() and quotes[1, :3].any(-1).tolist() == [False, False, False]
    closes = closing_predictions(encode(text), 4, '"')
    assert closes.tolist() == [[False, False, False], [False, False, False], [False, False, False]]
    closes = closing_predictions(encode('a"b"c)d'), 7, '"')
    assert closes.tolist() == [[False, False, True, False, False, False]]


def induction_by_loops(tokens: list[int], k: int) -> set[tuple[int, int]]:
    T = len(tokens)
    out = set()
    for i in range(k - 1, T):
        for j in range(k, T):
            if j - 1 < i - k + 1 and tokens[j - k : j] == tokens[i - k + 1 : i + 1]:
                out.add((i, j))
    return out


@SETTINGS
@given(st.lists(st.integers(0, 2), min_size=1, max_size=16), st.integers(1, 3))
def test_induction_and_copy_targets_against_loops(tokens, k):
    batch = torch.tensor([tokens])
    targets = induction_targets(batch, k)[0]
    expected = induction_by_loops(tokens, k)
    assert {tuple(p) for p in targets.nonzero().tolist()} == expected
    if len(tokens) >= 2:
        copy = copy_predictions(batch, k)[0].tolist()
        assert copy == [
            any(i == q and tokens[j] == tokens[i + 1] for q, j in expected) for i in range(len(tokens) - 1)
        ]


# --- bad arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: encode("caf\u00e9"), ValueError, "'\u00e9' at position 3"),
        (lambda: encode(b"x"), TypeError, "text must be a str"),
        (lambda: to_alphabet(3), TypeError, "text must be a str"),
        (lambda: split_documents({"a": "x"}, 1.0), ValueError, "held_out must be a number in (0, 1)"),
        (lambda: windows(torch.arange(5), 6), ValueError, "length must be an int in [1, 5]"),
        (lambda: windows(torch.arange(5.0), 2), ValueError, "ids must be a 1-D integer tensor"),
        (lambda: CharTransformer(0, 8, 1, 2), ValueError, "context_length must be an int of at least 1"),
        (lambda: CharTransformer(8, 8, 1, 3), ValueError, "num_heads=3 must divide embed_dim=8"),
        (lambda: CharTransformer(4, 8, 1, 2)(torch.zeros(1, 5, dtype=torch.long)), ValueError, "tokens' T"),
        (lambda: CharTransformer(4, 8, 1, 2)(torch.full((1, 2), 96)), ValueError, "must lie in [0, 95]"),
        (
            lambda: without_heads(CharTransformer(4, 8, 1, 2), [(1, 0)]),
            ValueError,
            "layer must be an int in [0, 0]",
        ),
        (
            lambda: without_heads(CharTransformer(4, 8, 1, 2), [(0, 2)]),
            ValueError,
            "head must be an int in [0, 1]",
        ),
        (lambda: ngram_bits(encode("ab"), encode("ab"), 3), ValueError, "order must be an int in [0, 2]"),
        (lambda: bigram_window_bits(encode("ab"), encode("ab")), ValueError, "batch must be"),
        (lambda: repeated_documents({"a": "x"}, share=1.0), ValueError, "share must be a number in (0, 1)"),
        (lambda: repeated_documents({"a": "x"}, length=0), ValueError, "length must be an int of at least 1"),
        (lambda: verbatim_windows(b"ab", "ab", 1), TypeError, "text must be a str"),
        (lambda: verbatim_windows("ab", "ab", 3), ValueError, "length must be an int in [1, 2]"),
        (
            lambda: sample(CharTransformer(4, 8, 1, 2), "a", 2, 0.0),
            ValueError,
            "temperature must be above 0",
        ),
        (lambda: sample(CharTransformer(4, 8, 1, 2), "", 2, 1.0), ValueError, "prompt's length"),
        (lambda: opener_targets(encode("ab"), 2, "<"), ValueError, "kinds must be"),
        (
            lambda: target_scores(torch.zeros(1, 1, 2, 2), torch.zeros(1, 2, 3, dtype=torch.bool)),
            ValueError,
            "(1, 2, 2)",
        ),
        (lambda: induction_targets(torch.zeros(1, 3, dtype=torch.long), 0), ValueError, "k must be an int"),
        (
            lambda: context_losses(CharTransformer(4, 8, 1, 2), encode("abcdef"), torch.tensor([3]), 4),
            ValueError,
            "positions must lie in [4, 5]",
        ),
        (
            lambda: context_losses(CharTransformer(4, 8, 1, 2), encode("abcdef"), torch.tensor([5]), 5),
            ValueError,
            "context must be an int in [1, 4]",
        ),
        (
            lambda: train_char_model(CharTransformer(4, 8, 1, 2), encode("abcdefgh"), 5, 2, 1e-2, warmup=5),
            ValueError,
            "warmup",
        ),
    ],
)
def test_bad_arguments_are_named(call, error, words):
    with pytest.raises(error) as raised:
        call()
    assert words in str(raised.value)


# --- the playground's file ------------------------------------------------------------------------


def decoded_levels(stored: dict) -> np.ndarray:
    """A stored tensor by the documented rule: signed bytes, row after row, times the scale (float64)."""
    levels = np.frombuffer(base64.b64decode(stored["int8"]), dtype=np.int8)
    return (levels.astype(np.float64) * stored["scale"]).reshape(stored["shape"])


def test_char_playground_json_decodes_by_its_documented_format():
    torch.manual_seed(0)
    model = CharTransformer(32, embed_dim=32, num_layers=2, num_heads=4)  # the tutorial's shape
    heads = {(1, 3): ("open quote", 0.41234567), (0, 2): ("previous character", 0.5)}
    text = char_playground_json(model, heads)
    assert len(text.encode()) <= 64 * 1024
    document = json.loads(text)
    assert document["format"] == "attn_ref character model, int8" and document["version"] == 1
    assert document["alphabet"] == ALPHABET
    sizes = {key: document[key] for key in ("context_length", "embed_dim", "num_layers", "num_heads")}
    assert sizes == {"context_length": 32, "embed_dim": 32, "num_layers": 2, "num_heads": 4}
    assert document["heads"] == [  # in (layer, head) order, scores to 6 decimals
        {"layer": 0, "head": 2, "role": "previous character", "score": 0.5},
        {"layer": 1, "head": 3, "role": "open quote", "score": 0.412346},
    ]
    state = model.state_dict()
    assert sorted(document["tensors"]) == sorted(state)  # every parameter: the page runs the whole model
    reloaded = char_model_from_playground_json(text)
    assert not reloaded.training
    for name, stored in document["tensors"].items():
        original = state[name].double().numpy()
        decoded = decoded_levels(stored)
        # One scale per tensor, the largest entry over 127 (6 digits kept; 1 for a tensor of zeros,
        # such as a fresh bias); each entry rounds to the nearest level, so it moves by at most half
        # a step (and a float32 hair).
        assert stored["scale"] == pytest.approx(np.abs(original).max() / 127 or 1.0, rel=1e-5)
        assert np.abs(decoded - original).max() <= stored["scale"] * (0.5 + 1e-4)
        np.testing.assert_allclose(reloaded.state_dict()[name].double().numpy(), decoded, rtol=1e-6, atol=0)


def test_the_reloaded_model_computes_what_its_decoded_weights_compute():
    """Its logits and weights are those of the original model with the decoded weights put in,
    in float64: what a browser reading the file computes."""
    torch.manual_seed(1)
    model = CharTransformer(16, embed_dim=8, num_layers=2, num_heads=2)
    text = char_playground_json(model, {})
    decoded = copy.deepcopy(model).double()
    with torch.no_grad():
        for name, stored in json.loads(text)["tensors"].items():
            decoded.get_parameter(name).copy_(torch.from_numpy(decoded_levels(stored)))
    ids = encode('x = f("a", b)')[None]
    logits, weights = char_model_from_playground_json(text).double()(ids)
    expected_logits, expected_weights = decoded(ids)
    torch.testing.assert_close(logits, expected_logits, rtol=0, atol=1e-6)  # float32 levels times scale
    for ours, expected in zip(weights, expected_weights, strict=True):
        torch.testing.assert_close(ours, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: char_playground_json(nn.Linear(2, 2), {}), TypeError, "model must be a CharTransformer"),
        (
            lambda: char_playground_json(CharTransformer(4, 8, 1, 2), [(0, 0)]),
            TypeError,
            "heads must be a mapping",
        ),
        (
            lambda: char_playground_json(CharTransformer(4, 8, 1, 2), {(0, 2): ("quote", 0.3)}),
            ValueError,
            "heads' key (0, 2): model has layers 0-0, heads 0-1",
        ),
        (
            lambda: char_playground_json(CharTransformer(4, 8, 1, 2), {(0, 1): ("", 0.3)}),
            ValueError,
            "heads[(0, 1)] must be (role, score) with a non-empty role",
        ),
        (
            lambda: char_playground_json(CharTransformer(4, 8, 1, 2), {(0, 1): ("quote", float("nan"))}),
            ValueError,
            "heads[(0, 1)]'s score must be a finite number",
        ),
        (lambda: char_model_from_playground_json(b"{}"), TypeError, "text must be a str"),
        (
            lambda: char_model_from_playground_json(playground_json(AttentionOnlyDecoder(8, 4, 8, 2, 2))),
            ValueError,
            "text is not version 1 of 'attn_ref character model, int8'",
        ),
        (
            lambda: char_model_from_playground_json(
                char_playground_json(CharTransformer(4, 8, 1, 2), {}).replace(
                    '"alphabet":"\\n', '"alphabet":"\\t'
                )
            ),
            ValueError,
            "text's alphabet is not ALPHABET",
        ),
    ],
)
def test_the_playground_files_bad_arguments_are_named(call, error, words):
    with pytest.raises(error) as raised:
        call()
    assert words in str(raised.value)


# --- what the trained models learned -----------------------------------------------------------

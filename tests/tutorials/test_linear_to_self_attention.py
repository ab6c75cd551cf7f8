"""The tutorial "From nn.Linear to self-attention" (page 2 of the core path), as the build executed
it: the hand-set head on the sentence, checked against float64 NumPy (tests/support/sentence.py,
float32_attention_bounds), against PyTorch, and against the hand-set matrices of attn_ref.examples.
That the page shows the computed values is checked without its labels (tests/support/shown.py): the
numbers its cells printed and its pictures drew, in order."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attn_ref.examples import SENTENCE_TOKENS
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import allclose_decided
from tests.support.reference import as64, softmax
from tests.support.sentence import ALICE, BOB, MET, SHE, W_K, W_Q, W_V, K, Q, V, X, leads
from tests.support.shown import assert_printed, drawn, half_unit, printed_by_cell, verdicts

TWO, THREE = half_unit(2), half_unit(3)
EXACT = float32_attention(Q, K, V)  # the head, in float64 with float32's bounds
PLAIN = float32_attention(X, X, X)  # no projections: X X^T / sqrt(C)


@pytest.fixture(scope="module")
def pictures(tutorial) -> list[str]:
    found = drawn(tutorial)
    # Q, K, V from X; no projections against projected; she's softmax; the head's flow of shapes.
    assert len(found) == 4
    return found


def test_the_notebook_ran_cleanly(tutorial):
    assert "".join(printed_by_cell(tutorial, "stderr")) == ""


def test_the_layers_hold_the_hand_set_matrices(values):
    for name, W in (("to_query", W_Q), ("to_key", W_K), ("to_value", W_V)):
        layer = values[name]
        assert layer.bias is None
        np.testing.assert_array_equal(as64(layer.weight), W.T)  # nn.Linear stores W^T
    np.testing.assert_array_equal(as64(values["X"]), X)


def test_projections_are_x_times_w(tutorial, values):
    """Small integers: X W is exact in float32, so the layers give it bit for bit."""
    for name, expected in (("Q", Q), ("K", K), ("V", V)):
        np.testing.assert_array_equal(as64(values[name]), expected)
    # to_query.weight (W_Q transposed, a row per output), then Q, K and V, row by row.
    assert_printed(tutorial, [*W_Q.T.ravel(), *Q.ravel(), *K.ravel(), *V.ravel()])


def test_without_projections_she_finds_herself_and_with_them_alice(tutorial, values):
    assert_within(values["plain"], PLAIN.weights, PLAIN.weights_error, "plain weights")
    assert_within(values["projected"], EXACT.weights, EXACT.weights_error, "projected weights")
    assert leads(PLAIN.weights[SHE], PLAIN.weights_error[SHE], SHE)
    assert leads(EXACT.weights[SHE], EXACT.weights_error[SHE], ALICE)
    (text,) = [text for text in printed_by_cell(tutorial) if "attends most to" in text]
    assert re.search(r"no projections, attends most to:\s+she\b", text)
    assert re.search(r"projected, attends most to:\s+Alice\b", text)
    assert (X @ X.T == (X @ X.T).T).all() and not (Q @ K.T == (Q @ K.T).T).all()


def test_the_four_steps_on_she(tutorial, values):
    scores = Q @ K.T / np.sqrt(2)
    np.testing.assert_allclose(as64(values["scores"]), scores, rtol=1e-6)
    assert_within(values["weights"], EXACT.weights, EXACT.weights_error, "weights")
    assert_within(values["output"], EXACT.output, EXACT.output_error, "output")
    assert_printed(tutorial, scores[SHE], atol=TWO)
    assert_printed(tutorial, EXACT.weights[SHE], atol=THREE + EXACT.weights_error[SHE])
    assert_printed(tutorial, EXACT.output[SHE], atol=THREE + EXACT.output_error[SHE])
    # What the page says: she now carries Alice; met carries both names.
    assert EXACT.output[SHE, 0] > 0.85 and EXACT.output[SHE, 1] < 0.1
    assert EXACT.output[MET, 0] == EXACT.output[MET, 1] > 0.45


def test_the_head_is_pytorchs(values):
    sdpa = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(M) for M in (Q, K, V)))
    np.testing.assert_allclose(EXACT.output, sdpa.numpy(), rtol=1e-12, atol=1e-15)
    assert allclose_decided(EXACT.output, as64(values["reference"]), atol=1e-8) is True


def test_pictures_draw_the_computed_numbers(tutorial, pictures, values):
    qkv, heads, steps, flow = pictures
    # X, then each matrix (drawn transposed) followed by its product: W_Q^T, Q, W_K^T, K, W_V^T, V.
    shown = [*X.ravel()]
    for W in (W_Q, W_K, W_V):
        shown += [*W.T.ravel(), *(X @ W).ravel()]
    assert_printed(tutorial, shown, texts=[qkv])
    assert_printed(
        tutorial, [*PLAIN.weights.ravel(), *EXACT.weights.ravel()], atol=TWO + 1e-6, gaps=True, texts=[heads]
    )
    row = Q[SHE] @ K.T / np.sqrt(2)
    e = np.exp(row)
    assert_printed(
        tutorial,
        [*row, *e, *(e / e.sum())],
        atol=[TWO] * 4 + [0.05 + 1e-4] * 4 + [TWO] * 4,
        gaps=True,
        texts=[steps],
    )
    assert_printed(tutorial, [e.sum()], atol=0.05 + 1e-4, texts=[steps])
    assert "(4, 6)" in flow and flow.count("(4, 2)") == 4 and flow.count("(4, 4)") == 2


def test_pitfall_the_transposed_weight(tutorial, values):
    (text,) = [text for text in printed_by_cell(tutorial) if "X @ to_query.weight" in text]
    assert "X @ to_query.weight:" in text and "cannot be multiplied" in text
    square = as64(values["square"].weight)
    wrong, right = X @ square, X @ square.T
    assert allclose_decided(wrong, right) is False


def test_pitfall_the_softmax_over_the_queries(tutorial, values):
    scores = as64(values["scores"])
    over_queries = softmax(scores, axis=0)
    sums = over_queries.sum(axis=-1)
    assert np.abs(sums - 1).max() > 0.1  # rows no longer sum to one
    assert_printed(tutorial, sums, atol=TWO + 1e-6)
    assert_printed(tutorial, np.ones(len(X)), atol=TWO)


def test_exercise_1_doubling_squares_the_weights(tutorial, values):
    doubled = softmax(2 * Q @ K.T / np.sqrt(2))
    squared = EXACT.weights**2 / (EXACT.weights**2).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(doubled, squared, rtol=1e-12)
    assert_within(values["doubled"], doubled, 3 * EXACT.weights_error + 1e-6, "doubled")
    assert_printed(tutorial, [*doubled[SHE], *squared[SHE]], atol=half_unit(4) + 1e-5)


def test_exercise_2_a_key_without_female(tutorial, values):
    blind = W_K.copy()
    blind[3] = 0  # the feature "female"
    exact = float32_attention(Q, X @ blind, V)
    assert exact.weights[SHE, ALICE] == exact.weights[SHE, BOB]  # an exact tie: she takes half of each
    assert_within(values["weights_blind"][SHE], exact.weights[SHE], exact.weights_error[SHE], "she's weights")
    assert_printed(tutorial, exact.weights[SHE], atol=THREE + exact.weights_error[SHE])
    assert_printed(tutorial, exact.output[SHE], atol=THREE + exact.output_error[SHE])


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial):
    expected = [
        True,  # X X^T symmetric
        False,  # Q K^T not symmetric
        True,  # same as PyTorch's
        False,  # a square layer: X @ weight is not layer(X)
        True,  # exercise 1: doubled equals squared, renormalised
        True,  # exercise 3: reversed tokens, reversed outputs
    ]
    assert verdicts(tutorial) == expected


def test_the_tokens_are_the_sentences():
    assert SENTENCE_TOKENS == ["Alice", "met", "Bob", "she"]


def test_links_inside_the_page_land(built_site):
    html = (built_site.path / "tutorials" / "linear_to_self_attention" / "index.html").read_text()
    article = re.search(r"<article.*?</article>", html, re.S)[0]
    targets = set(re.findall(r'href="#([^"]+)"', article))
    assert [t for t in targets if f'id="{t}"' not in article] == []
    assert article.rindex("Next:") > article.index('id="references"') > article.index('id="exercises"')

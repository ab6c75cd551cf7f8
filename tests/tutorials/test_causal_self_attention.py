"""The tutorial "Self-attention with a causal mask" (page 3 of the core path), as the build executed
it: page 2's hand-set head on the sentence and on a batch of two sentences, under the causal mask,
checked against float64 NumPy with float32's bounds and against PyTorch's own causal attention.
That the page shows the computed values is checked without its labels (tests/support/shown.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import allclose_decided
from tests.support.reference import as64, causal, softmax
from tests.support.sentence import ALICE, BOB, MET, SHE, W_K, W_Q, W_V, K, Q, V, X, leads
from tests.support.shown import assert_printed, drawn, half_unit, printed_by_cell, verdicts

TWO, THREE = half_unit(2), half_unit(3)
T = len(X)
MASK = causal(T)
ORDER = [2, 1, 0, 3]  # Bob met Alice she
CAROL = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]  # a name, female, neither Alice nor Bob


def head(rows, allowed=MASK):
    """The page's head on ``rows`` in float64, with float32's bounds (projections of small
    integers are exact in float32)."""
    return float32_attention(rows @ W_Q, rows @ W_K, rows @ W_V, allowed=allowed)


SENTENCE, SWAPPED = head(X), head(X[ORDER])


@pytest.fixture(scope="module")
def pictures(tutorial) -> list[str]:
    found = drawn(tutorial)
    # The mask in three steps; met's row with and without it; the batch; what moved.
    assert len(found) == 4
    return found


def test_the_notebook_ran_cleanly(tutorial):
    assert "".join(printed_by_cell(tutorial, "stderr")) == ""


def test_the_head_is_page_2s(values):
    for name, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        np.testing.assert_array_equal(as64(values[name]), W)


def test_the_mask_is_the_lower_triangle(values):
    np.testing.assert_array_equal(as64(values["allowed"]).astype(bool), MASK)


def test_the_masked_weights_of_the_sentence(tutorial, values):
    """Above the diagonal exactly 0, rows summing to one; printed as the first cell's matrix."""
    masked = as64(values["masked"])
    assert np.isneginf(masked[~MASK]).all()
    np.testing.assert_allclose(masked[MASK], (Q @ K.T / np.sqrt(2))[MASK], rtol=1e-6)
    np.testing.assert_allclose(SENTENCE.weights.sum(axis=-1), 1.0, rtol=1e-15)
    assert (SENTENCE.weights[~MASK] == 0).all()
    assert_printed(tutorial, SENTENCE.weights, atol=TWO + SENTENCE.weights_error)


def test_what_the_mask_changes(tutorial, values):
    """Alice sees only herself; she still finds Alice; met, which split its weight between the
    names, may not see Bob yet and takes Alice."""
    w = SENTENCE.weights
    np.testing.assert_array_equal(w[ALICE], [1, 0, 0, 0])
    assert leads(w[SHE], SENTENCE.weights_error[SHE], ALICE)
    unmasked = float32_attention(Q, K, V)
    assert abs(unmasked.weights[MET, ALICE] - unmasked.weights[MET, BOB]) < 1e-15  # split: a tie
    assert w[MET, ALICE] - SENTENCE.weights_error[MET, ALICE] > 0.9 and w[MET, BOB] == 0
    assert_within(values["unmasked"], unmasked.weights, unmasked.weights_error, "page 2's weights")


def test_the_batch(tutorial, values):
    x = np.stack([X, X[ORDER]])
    np.testing.assert_array_equal(as64(values["x"]), x)
    assert tuple(values["scores"].shape) == (2, T, T) and tuple(values["out"].shape) == (2, T, 2)
    for b, exact in enumerate((SENTENCE, SWAPPED)):
        assert_within(values["weights"][b], exact.weights, exact.weights_error, f"weights {b}")
        assert_within(values["out"][b], exact.output, exact.output_error, f"out {b}")
    # met takes the name before it: Alice in sentence 0, Bob in sentence 1; she finds Alice in both.
    assert SENTENCE.output[MET, 0] > 0.9 > 0.1 > SENTENCE.output[MET, 1]
    assert SWAPPED.output[MET, 1] > 0.9 > 0.1 > SWAPPED.output[MET, 0]
    assert leads(SWAPPED.weights[SHE], SWAPPED.weights_error[SHE], ORDER.index(ALICE))
    assert_printed(tutorial, [2, 4, 6, 2, 4, 4, 2, 4, 2], gaps=True)  # the shapes printed
    assert_printed(tutorial, [*SENTENCE.output[MET], *SWAPPED.output[MET]], atol=THREE + 1e-6)


def test_the_head_is_pytorchs_causal_attention(values):
    x = np.stack([X, X[ORDER]])
    q, k, v = (torch.tensor(x @ W) for W in (W_Q, W_K, W_V))
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(sdpa.numpy(), np.stack([SENTENCE.output, SWAPPED.output]), atol=1e-15)
    assert allclose_decided(as64(values["reference"]), sdpa.numpy(), atol=1e-8) is True


def test_the_causal_property(tutorial, values):
    carol = X.copy()
    carol[2] = CAROL
    np.testing.assert_array_equal(as64(values["x_carol"])[0], carol)
    before, after = head(X), head(carol)
    moved = np.abs(after.output - before.output).max(axis=-1)
    np.testing.assert_array_equal(moved[:2], [0, 0])  # exactly: the new key has weight exactly 0
    np.testing.assert_array_equal(as64(values["moved"])[:2], [0, 0])
    bound = (after.output_error + before.output_error).max(axis=-1)
    assert (moved[2:] - bound[2:] > 0.1).all()
    assert_within(values["moved"][2:], moved[2:], bound[2:], "what moved")
    # she now has two female names: she splits between Alice and Carol, and takes less of Alice.
    assert after.weights[SHE, ALICE] == after.weights[SHE, 2]
    assert_printed(tutorial, [*before.output[SHE], *after.output[SHE]], atol=THREE + 1e-6, gaps=True)


def test_pictures_draw_the_computed_numbers(tutorial, pictures, values):
    steps, met, batch, moved = pictures
    scores = Q @ K.T / np.sqrt(2)
    assert_printed(tutorial, scores, atol=TWO, texts=[steps])
    assert_printed(tutorial, scores[MASK], atol=TWO, texts=[steps])
    assert_printed(tutorial, SENTENCE.weights[MASK], atol=TWO + 1e-6, texts=[steps])
    unmasked = softmax(scores)
    assert_printed(
        tutorial, [*unmasked[MET], *SENTENCE.weights[MET, :2]], atol=TWO + 1e-6, gaps=True, texts=[met]
    )
    for exact in (SENTENCE, SWAPPED):
        assert_printed(tutorial, exact.weights[MASK], atol=TWO + 1e-6, texts=[batch])
    assert_printed(tutorial, as64(values["moved"]), atol=TWO, texts=[moved])


def test_pitfall_masking_after_the_softmax(tutorial, values):
    x = np.stack([X, X[ORDER]])
    after = softmax(x @ W_Q @ np.swapaxes(x @ W_K, -1, -2) / np.sqrt(2)) * MASK
    sums = after[0].sum(axis=-1)
    assert sums[MET] < 0.6 and sums[SHE] == pytest.approx(1)  # met loses Bob's share
    assert_printed(tutorial, sums, atol=TWO + 1e-6)


def test_pitfall_the_leaky_mask(tutorial):
    """With diagonal=1, met sees Carol: it moves; with tril, only Carol and she move."""
    carol = X.copy()
    carol[2] = CAROL
    leaky = np.tri(T, T, k=1, dtype=bool)
    moved = np.abs(head(carol, leaky).output - head(X, leaky).output).max(axis=-1)
    assert moved[0] == 0 and moved[MET] > 0.1
    (text,) = [text for text in printed_by_cell(tutorial) if "diagonal=1:" in text]
    assert "diagonal=1: outputs that moved: ['met', 'Carol', 'she']" in text
    assert "tril: outputs that moved: ['Carol', 'she']" in text


def test_exercises(tutorial, values):
    # 1. The first output is the first value, exactly.
    np.testing.assert_array_equal(as64(values["out"])[:, 0], as64(values["v"])[:, 0])
    # 2. All scores zero: the running mean of the values.
    v = as64(values["v"])
    running = np.cumsum(v, axis=1) / np.arange(1, T + 1)[:, None]
    np.testing.assert_allclose(as64(values["average"]) @ v, running, rtol=1e-6, atol=1e-7)
    assert_printed(tutorial, np.tri(T) / np.arange(1, T + 1)[:, None], atol=TWO)
    # 3. met's weights at lambda = 0, 1, 10: an even split, then towards Alice.
    row = (Q @ K.T / np.sqrt(2))[MET]
    shown = []
    for factor in (0, 1, 10):
        z = np.where(MASK[MET], factor * row, -np.inf)
        shown += list(np.exp(z - z.max()) / np.exp(z - z.max()).sum())
    assert_printed(tutorial, shown, atol=THREE + 1e-6, gaps=True)


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial):
    expected = [
        True,  # same as PyTorch's
        True,  # Alice and met exactly unchanged
        True,  # exercise 1: equal
        True,  # exercise 2: the running mean
    ]
    assert verdicts(tutorial) == expected


def test_links_inside_the_page_land(built_site):
    html = (built_site.path / "tutorials" / "causal_self_attention" / "index.html").read_text()
    article = re.search(r"<article.*?</article>", html, re.S)[0]
    targets = set(re.findall(r'href="#([^"]+)"', article))
    assert [t for t in targets if f'id="{t}"' not in article] == []
    assert article.rindex("Next:") > article.index('id="references"') > article.index('id="exercises"')

"""The induction playground (docs/playground_induction.md) in headless Chromium, offline.

The page runs the trained induction model of docs/tutorials/induction_heads.py, from the JSON file
the build publishes, on the tokens a reader types. Each test types, edits or clears the tokens,
then reads the ``data-state`` the script keeps on the view's root and checks its attention weights
against the model `attn_ref.training.model_from_playground_json` reads from the same file, run by
PyTorch on the same tokens: in float64 (JavaScript's numbers), with the int8 levels times their
scale computed in float64 as the page does, and in float32 as the function builds it. The heads the
page names are the tutorial's induction heads by the tutorial's criterion (prefix matching on the
typed tokens, copying by the tutorial model's OV circuits); each map's cells are coloured exactly as
matplotlib's viridis colours those weights, in both schemes, and labelled with the tokens.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from matplotlib import colormaps
from matplotlib.colors import to_hex

from attn_ref.training import model_from_playground_json, prefix_matching_scores
from sitelook.browsing import Tab
from tests.support.playground_files import float64_from_levels
from tests.support.playground_state import SETTLE_MS, assert_accessible_before_and_after, read_state
from tests.support.readers import DESKTOP, PHONE, SIDEWAYS_SCROLL, screenshot
from tests.support.training_claims import COPYING, ROLE, ov_copying  # the tutorial's criterion

pytestmark = pytest.mark.browser

PAGE = "playground_induction/"
MODEL = "tutorials/induction_heads/induction_heads.json"  # beside the tutorial's page
ROOT = ".pgi[data-state]"

# Both computations round each operation once (float64): their weights agree to a few thousand
# ulps of 1. float32's own rounding is 2**29 times coarser, and a wrong formula far more.
FLOAT64_TOLERANCE = 2**12 * float(np.finfo(np.float64).eps)
# Against PyTorch in float32, the reference's own rounding dominates: each score is a sum of
# d_k products of projections that are sums of C products, so a few hundred ulps of 1.
FLOAT32_TOLERANCE = 512 * float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def model_text(built_site) -> str:
    return (built_site.path / MODEL).read_text()


@pytest.fixture(scope="module")
def references(model_text):
    """The model in float32 as model_from_playground_json builds it, and in float64 from the same
    int8 levels and scales."""
    float32 = model_from_playground_json(model_text)
    float64 = float64_from_levels(model_from_playground_json(model_text), model_text)
    return float32, float64


@pytest.fixture
def view(browser, server):
    visit = Tab(browser, server, **DESKTOP).open(PAGE)
    visit.page.wait_for_selector(ROOT)
    yield visit
    assert visit.outside == [], "a request left the site"
    assert visit.console_errors == []
    visit.close()


def field(page):
    return page.get_by_label("Tokens", exact=False)


def check_weights(state: dict, references) -> list[np.ndarray]:
    """The page's weights are the model's on the state's tokens; returns the float64 weights."""
    float32, float64 = references
    tokens = torch.tensor([state["tokens"]])
    with torch.no_grad():
        _, weights64 = float64(tokens)
        _, weights32 = float32(tokens)
    shown = [np.array(layer) for layer in state["weights"]]  # (H, T, T) per layer
    for layer, (page, w64, w32) in enumerate(zip(shown, weights64, weights32, strict=True)):
        assert page.shape == tuple(w64.shape[1:]), f"layer {layer}"
        np.testing.assert_allclose(
            page, w64[0].numpy(), rtol=0, atol=FLOAT64_TOLERANCE, err_msg=f"layer {layer}"
        )
        np.testing.assert_allclose(
            page, w32[0].double().numpy(), rtol=0, atol=FLOAT32_TOLERANCE, err_msg=f"layer {layer}"
        )
    return [w[0].numpy() for w in weights64]


def check_scores(state: dict, weights: list[np.ndarray]) -> None:
    """The prefix-matching scores are attn_ref's, and the page names every layer-1 head that the
    tutorial's criterion names: prefix matching above ROLE on these tokens, copying above COPYING."""
    tokens = torch.tensor([state["tokens"]])
    scores = [prefix_matching_scores(torch.from_numpy(w)[None], tokens) for w in weights]
    if any(s.isnan().any() for s in scores):  # no query has an earlier copy
        assert state["prefix"] is None and state["induction"] == []
        return
    np.testing.assert_allclose(state["prefix"], [s.numpy() for s in scores], rtol=0, atol=1e-9)
    named = [h for h in range(len(scores[1])) if scores[1][h] > ROLE and state["copying"][h] > COPYING]
    assert state["induction"] == named


def check_colours_and_labels(page, state: dict) -> None:
    """Every cell's fill is matplotlib's viridis of its weight (the tutorials' colour map, exactly),
    and every map is labelled with the tokens, queries down the side and keys below."""
    viridis = colormaps["viridis"]
    tokens = [str(t) for t in state["tokens"]]
    maps = page.locator(".pgi-head svg")
    for k, layer_weights in enumerate(w for layer in state["weights"] for w in layer):
        fills = (
            maps.nth(k).locator(".pgi-cell").evaluate_all("cells => cells.map(c => c.getAttribute('fill'))")
        )
        weights = np.array(layer_weights)
        expected = [to_hex(viridis(weights[i, j])) for i in range(len(tokens)) for j in range(i + 1)]
        assert fills == expected, f"map {k}"
        labels = maps.nth(k).locator(".pgi-labels text").all_text_contents()
        assert labels[0::2] == tokens and labels[1::2] == tokens  # one row label and one key label each


def repeated(first: list[int], length: int) -> list[int]:
    return [first[i % len(first)] for i in range(length)]


def say(tokens: list[int]) -> str:
    return " ".join(map(str, tokens))


def test_the_published_model_is_the_tutorials_and_small(model_text, executed_tutorials):
    values = executed_tutorials["induction_heads"].values
    assert model_text == values["exported"]
    assert len(model_text.encode()) <= 50 * 1024
    # The copying scores the page names heads by: the tutorial model's, against NumPy's eigenvalues.
    np.testing.assert_allclose(json.loads(model_text)["copying"], ov_copying(values["model"], 1), atol=1e-6)
    assert (values["ROLE"], values["COPYING"]) == (ROLE, COPYING)


def test_the_first_state_is_a_repeat_and_the_induction_head_lights_up(view, references):
    page = view.page
    state = read_state(page, ROOT)
    assert state["error"] is None
    assert say(state["tokens"]) == page.get_attribute(".pgi", "data-tokens") == field(page).input_value()
    weights = check_weights(state, references)
    check_scores(state, weights)
    check_colours_and_labels(page, state)
    # The tutorial's claim, on this one sequence: both layer-1 heads are induction heads; each puts
    # most of its weight, on the repeated part, on the token after the earlier copy (the tutorial
    # asserts > 0.8 on average over its batch), and copies.
    assert state["induction"] == [0, 1]
    assert min(state["prefix"][1]) > 0.6
    assert page.locator(".pgi-induction").count() == 2
    captions = page.locator(".pgi-induction .pgi-caption").all_inner_texts()
    assert captions == ["Layer 1, head 0, induction head", "Layer 1, head 1, induction head"]
    page.wait_for_timeout(SETTLE_MS + 50)
    assert "Layer 1 heads 0 and 1 are induction heads" in page.locator(".pgi-status").inner_text()


def test_typing_editing_and_clearing(view, references):
    page = view.page
    box = field(page)
    box.fill("")
    state = read_state(page, ROOT)
    assert state["tokens"] is None and state["weights"] is None
    assert "at least one token" in state["error"]
    assert page.get_by_role("alert").inner_text() == state["error"]
    assert page.locator(".pgi-maps").is_hidden()

    # Typed key by key: a run of 9 tokens, then its repeat.
    typed = repeated([12, 40, 3, 57, 21, 8, 33, 61, 19], 25)
    box.press_sequentially(say(typed))
    state = read_state(page, ROOT)
    assert state["tokens"] == typed and state["error"] is None
    assert page.locator(".pgi-maps").is_visible() and page.get_by_role("alert").count() == 0
    check_scores(state, check_weights(state, references))
    check_colours_and_labels(page, state)
    assert state["induction"] and all(state["prefix"][1][h] > 0.6 for h in state["induction"])

    # Edited: one token of the repeat changed, then the last two deleted with the keyboard.
    edited = list(typed)
    edited[14] = 0
    box.fill(say(edited))
    state = read_state(page, ROOT)
    assert state["tokens"] == edited
    check_scores(state, check_weights(state, references))
    box.press("End")
    for _ in range(len(say(edited[-2:])) + 1):
        box.press("Backspace")
    state = read_state(page, ROOT)
    assert state["tokens"] == edited[:-2]
    check_scores(state, check_weights(state, references))

    # No token repeats: nothing to match, and the page says so.
    distinct = [5, 9, 2, 44, 17, 30]
    box.fill(say(distinct))
    state = read_state(page, ROOT)
    check_scores(state, check_weights(state, references))
    assert state["prefix"] is None and state["induction"] == []
    assert page.locator(".pgi-induction").count() == 0
    page.wait_for_timeout(SETTLE_MS + 50)
    assert "none repeats" in page.locator(".pgi-status").inner_text()

    # Cleared with the keyboard, then one token.
    box.press("Control+a")
    box.press("Backspace")
    assert "at least one token" in read_state(page, ROOT)["error"]
    box.press_sequentially("7")
    state = read_state(page, ROOT)
    assert state["tokens"] == [7] and state["error"] is None
    check_weights(state, references)


@pytest.mark.parametrize(
    "typed, says",
    [
        ("", "Type at least one token"),
        ("   ", "Type at least one token"),
        ("3 x 5", '"x" is not a token'),
        ("3 64 5", '"64" is not a token'),
        ("3 -1 5", '"-1" is not a token'),
        ("2.5", '"2.5" is not a token'),
        (say(list(range(33))), "That is 33 tokens. The model reads at most 32: remove 1."),
    ],
)
def test_bad_input_gets_a_message_not_a_broken_view(view, references, typed, says):
    page = view.page
    field(page).fill(typed)
    state = read_state(page, ROOT)
    assert says in state["error"] and state["weights"] is None
    assert page.get_by_role("alert").inner_text() == state["error"]
    assert field(page).get_attribute("aria-invalid") == "true"
    assert page.locator(".pgi-maps").is_hidden()
    field(page).fill("1 2 3 1 2 3")  # and back
    state = read_state(page, ROOT)
    assert state["error"] is None and field(page).get_attribute("aria-invalid") is None
    check_weights(state, references)


def test_the_limits_in_the_messages_are_the_models(model_text, view):
    document = json.loads(model_text)
    assert (document["vocab_size"], document["context_length"]) == (64, 32)  # as the cases above say
    label = view.page.locator(".pgi-controls label").first.inner_text()
    assert (
        f"from 0 to {document['vocab_size'] - 1}" in label
        and f"at most {document['context_length']}" in label
    )


def test_keyboard_alone(view):
    page = view.page
    field(page).focus()
    page.keyboard.press("Control+a")
    page.keyboard.type("4 8 15 16 23 42 4 8 15")
    assert read_state(page, ROOT)["tokens"] == [4, 8, 15, 16, 23, 42, 4, 8, 15]
    page.keyboard.press("Tab")
    slider = page.get_by_role("slider", name="Query shown in the readouts")
    assert slider.evaluate("e => e === document.activeElement")
    page.keyboard.press("End")
    assert slider.input_value() == "8"
    readouts = page.locator(".pgi-readout").all_inner_texts()
    assert len(readouts) == 4 and all(text.startswith("Query 8 (token 15)") for text in readouts)
    page.keyboard.press("ArrowLeft")
    assert page.locator(".pgi-readout").first.inner_text().startswith("Query 7 (token 8)")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_accessibility_violation_before_and_after_changes(browser, server, scheme):
    assert_accessible_before_and_after(
        browser, server, PAGE, ROOT, scheme, lambda page: field(page).fill("3 x")
    )


LABELS = "[...document.querySelectorAll('.pgi-labels text')].map(t => t.getBoundingClientRect().height)"


@pytest.mark.parametrize(
    "mode, options",
    [
        ("narrow", PHONE),
        ("narrow-dark", {**PHONE, "color_scheme": "dark"}),
        ("wide", DESKTOP),
        ("dark", {**DESKTOP, "color_scheme": "dark"}),
    ],
)
def test_fits_a_phone_and_a_desktop_and_reads_on_both(browser, server, mode, options):
    """No sideways scroll; each map as wide as a phone's column allows (one a row) or half a
    desktop's (two a row); its token labels at least 9 px tall with the page's 24 tokens (a cell
    of 12 px or more), and still 7 px with the most tokens the model reads; the colours those of
    the tutorials' plots in both schemes, never filtered."""
    visit = Tab(browser, server, **options).open(PAGE)
    page = visit.page
    page.wait_for_selector(ROOT)
    if "dark" in mode:
        page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    assert page.evaluate(SIDEWAYS_SCROLL) <= 0
    column = page.locator(".pgi-maps").bounding_box()["width"]
    maps = page.locator(".pgi-head svg")
    width = maps.first.bounding_box()["width"]
    per_row = 1 if options["viewport"]["width"] < 600 else 2
    assert width >= column / per_row - 40 and width >= 280
    assert min(page.evaluate(LABELS)) >= 9
    state = read_state(page, ROOT)
    check_colours_and_labels(page, state)
    assert maps.first.evaluate("svg => getComputedStyle(svg).filter") == "none"
    field(page).fill(say(repeated([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 32)))
    assert page.evaluate(SIDEWAYS_SCROLL) <= 0
    assert min(page.evaluate(LABELS)) >= 7
    page.locator(".pgi").scroll_into_view_if_needed()
    screenshot(page, f"playground-induction-{mode}")
    assert visit.outside == [] and visit.console_errors == []
    visit.close()

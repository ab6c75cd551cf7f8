"""The text playground (docs/playground_text.md) in headless Chromium, offline.

The page runs the character model of docs/tutorials/attention_on_text.py, from the JSON file the
build publishes, on the text a reader types. Each test types, edits or clears the text, then reads
the ``data-state`` the script keeps on the view's root and checks its next-character probabilities
and every layer's attention weights against the model that
`attn_ref.training.char_model_from_playground_json` reads from the same file, run by PyTorch on the
same characters: in float64 (JavaScript's numbers), with the int8 levels times their scale computed
in float64 as the page does, and in float32 as the function builds it. The heads the page labels
are the file's; each map's cells are coloured as matplotlib's viridis colours those weights, and
labelled with the characters.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from matplotlib import colormaps
from matplotlib.colors import to_hex

from attn_ref.training import ALPHABET, char_model_from_playground_json
from sitelook.browsing import Tab
from sitelook.budgets import FIRST_VISIT_BUDGET
from tests.support.looks import TRANSFERRED
from tests.support.playground_files import float64_from_levels
from tests.support.playground_state import SETTLE_MS, assert_accessible_before_and_after, read_state
from tests.support.readers import DESKTOP, PHONE, SIDEWAYS_SCROLL, screenshot

pytestmark = pytest.mark.browser

PAGE = "playground_text/"
MODEL = "tutorials/attention_on_text/attention_on_text.json"  # beside the tutorial's page
ROOT = ".pgt[data-state]"
SHOWN = {" ": "\u2423", "\n": "\u21b5"}  # how the maps label the space and the newline

# Both computations round every operation once; they differ in the order of their sums and in
# their exp, sqrt and erf. Each number the page reports comes out of a chain of at most 2**4
# stages (two blocks of norm, projections, scores, softmax, values, output, norm, MLP, then the
# final norm, the head and the softmax), each a sum of at most 4 C = 2**7 terms, so each rounds by
# at most 2**7 units of its terms' sizes (Higham, ch. 3); the norms keep every stage's inputs of
# order 1, and 2**5 covers how far a stage may carry its inputs' errors into its outputs. In
# float64 the page and PyTorch agree to 2**16 ulps of 1; a wrong formula is off by far more.
CHAIN = 2**16
FLOAT64_TOLERANCE = CHAIN * float(np.finfo(np.float64).eps)
# Against PyTorch in float32, the reference's own rounding dominates: the same chain, in float32.
FLOAT32_TOLERANCE = CHAIN * float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def model_text(built_site) -> str:
    return (built_site.path / MODEL).read_text()


@pytest.fixture(scope="module")
def references(model_text):
    """The model in float32 as char_model_from_playground_json builds it, and in float64 from the
    same int8 levels and scales."""
    float32 = char_model_from_playground_json(model_text)
    float64 = float64_from_levels(char_model_from_playground_json(model_text), model_text)
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
    return page.get_by_role("textbox", name="Text (", exact=False)


def check_numbers(state: dict, references, text: str) -> None:
    """The page read ``text``, and its probabilities and weights are the model's on it."""
    float32, float64 = references
    assert state["error"] is None and state["input"] == text
    assert state["ids"] == [ALPHABET.index(c) for c in text]
    ids = torch.tensor([state["ids"]])
    shown = {"probabilities": np.array(state["probabilities"]), "weights": state["weights"]}
    for reference, tolerance in ((float64, FLOAT64_TOLERANCE), (float32, FLOAT32_TOLERANCE)):
        with torch.no_grad():
            logits, weights = reference(ids)
        probabilities = logits[0].double().softmax(-1).numpy()  # (T, 96)
        assert shown["probabilities"].shape == probabilities.shape
        np.testing.assert_allclose(shown["probabilities"], probabilities, rtol=0, atol=tolerance)
        assert len(shown["weights"]) == len(weights)
        for layer, (page, w) in enumerate(zip(shown["weights"], weights, strict=True)):
            np.testing.assert_allclose(
                np.array(page), w[0].double().numpy(), rtol=0, atol=tolerance, err_msg=f"layer {layer}"
            )


def check_list_and_maps(page, state: dict, text: str) -> None:
    """The list shows the likeliest characters after the query; every map's cells are viridis of
    their weights, labelled by the characters."""
    query = int(page.get_by_role("slider").input_value())
    p = np.array(state["probabilities"][query])
    likeliest = np.argsort(-p, kind="stable")[: page.locator(".pgt-top li").count()]
    listed = page.locator(".pgt-top .pgt-char").all_inner_texts()
    assert listed == [SHOWN.get(ALPHABET[i], ALPHABET[i]) for i in likeliest]
    assert page.locator(".pgt-top .pgt-p").all_inner_texts() == [f"{p[i]:.2f}" for i in likeliest]
    viridis = colormaps["viridis"]
    labels = [SHOWN.get(c, c) for c in text]
    maps = page.locator(".pgt-head svg")
    for k, weights in enumerate(np.array(w) for layer in state["weights"] for w in layer):
        fills = (
            maps.nth(k).locator(".pgt-cell").evaluate_all("cells => cells.map(c => c.getAttribute('fill'))")
        )
        assert fills == [to_hex(viridis(weights[i, j])) for i in range(len(text)) for j in range(i + 1)]
        shown = maps.nth(k).locator(".pgt-labels text").all_text_contents()
        assert shown[0::2] == labels and shown[1::2] == labels


def test_the_published_model_is_the_tutorials_seed_0_and_small(model_text, executed_tutorials):
    values = executed_tutorials["attention_on_text"].values
    assert model_text == values["exported"]
    # One signed byte per parameter, in base64 (4 characters for 3 bytes), and the names and sizes.
    parameters = sum(p.numel() for p in values["models"][0].parameters())
    assert len(model_text.encode()) <= parameters * 4 / 3 + 4 * 1024
    reloaded = char_model_from_playground_json(model_text).state_dict()
    stored = json.loads(model_text)["tensors"]
    for name, tensor in values["models"][0].state_dict().items():  # within half a step of seed 0's
        step = stored[name]["scale"]
        assert (reloaded[name] - tensor).abs().max().item() <= step * (0.5 + 1e-4)


def test_the_first_state_is_the_models_and_the_named_heads_are_the_files(view, references, model_text):
    page = view.page
    text = page.get_attribute(".pgt", "data-text")
    assert field(page).input_value() == text
    state = read_state(page, ROOT)
    check_numbers(state, references, text)
    check_list_and_maps(page, state, text)
    heads = json.loads(model_text)["heads"]
    assert heads and state["named"] == heads
    captions = page.locator(".pgt-named .pgt-caption").all_inner_texts()
    assert captions == [f"Head {h['layer']}.{h['head']}: {h['role']}" for h in heads]
    others = page.locator(".pgt-head:not(.pgt-named) .pgt-caption").all_inner_texts()
    assert len(others) + len(heads) == len(state["weights"]) * len(state["weights"][0])
    page.wait_for_timeout(SETTLE_MS + 50)
    status = page.locator(".pgt-status").inner_text()
    assert status.startswith(f"{len(text)} characters.")
    assert all(f"Head {h['layer']}.{h['head']} ({h['role']})" in status for h in heads)


def test_typing_editing_and_clearing(view, references):
    page = view.page
    box = field(page)
    box.fill("")
    state = read_state(page, ROOT)
    assert state["ids"] is None and state["probabilities"] is None and state["weights"] is None
    assert "at least one character" in state["error"]
    assert page.get_by_role("alert").inner_text() == state["error"]
    assert page.locator(".pgt-maps").is_hidden() and page.locator(".pgt-next").is_hidden()

    # Typed key by key, a quote left open and a newline in it.
    typed = 'Call "len(x)" on\nit: "ab'
    box.press_sequentially(typed)
    state = read_state(page, ROOT)
    check_numbers(state, references, typed)
    check_list_and_maps(page, state, typed)
    assert page.get_by_role("alert").count() == 0

    # Edited: the first word replaced, then the last two characters deleted with the keyboard.
    edited = "Use" + typed[4:]
    box.fill(edited)
    check_numbers(read_state(page, ROOT), references, edited)
    box.press("Control+End")
    box.press("Backspace")
    box.press("Backspace")
    check_numbers(read_state(page, ROOT), references, edited[:-2])

    # As long as the model reads: the whole context.
    full = 'The "for" statement is used to iterate'[:32]
    box.fill(full)
    check_numbers(read_state(page, ROOT), references, full)

    # Cleared with the keyboard, then one character.
    box.press("Control+a")
    box.press("Backspace")
    assert "at least one character" in read_state(page, ROOT)["error"]
    box.press_sequentially("x")
    check_numbers(read_state(page, ROOT), references, "x")


def test_the_open_delimiter_heads_find_the_open_quote_and_bracket_as_the_page_says(view, references):
    """What to try: with a quote open, the open-bracket-or-quote heads put most of the last
    character's weight on it (runs: 0.99 in every arithmetic); with two brackets open, on the
    innermost (runs: 0.99 to 1.00 on `[`, at most 0.04 on `(`). The page predicts nothing once the
    quote is closed: the published models differ there (0.08 to 0.69 on it)."""
    page = view.page
    heads = [
        (h["layer"], h["head"])
        for h in read_state(page, ROOT)["named"]
        if h["role"] == "open bracket or quote"
    ]
    assert heads
    for typed, target, other in (('Use "import', 4, None), ("f(a, [b", 5, 1)):
        field(page).fill(typed)
        state = read_state(page, ROOT)
        check_numbers(state, references, typed)
        last = [state["weights"][layer][head][-1] for layer, head in heads]
        assert np.mean([w[target] for w in last]) >= 0.5, typed
        if other is not None:
            assert np.mean([w[target] - w[other] for w in last]) >= 0.3, typed


@pytest.mark.parametrize(
    "typed, says",
    [
        ("", "Type at least one character"),
        ("caf\u00e9 au lait", 'The character "\u00e9" (U+00E9) at position 3 is not one the model knows'),
        ("a\tb", "The character U+0009 at position 1 is not one the model knows"),
        ("x" * 33, "That is 33 characters. The model reads at most 32: remove 1."),
    ],
)
def test_bad_input_gets_a_message_not_a_broken_view(view, references, typed, says):
    page = view.page
    field(page).fill(typed)
    state = read_state(page, ROOT)
    assert says in state["error"] and state["weights"] is None and state["probabilities"] is None
    assert page.get_by_role("alert").inner_text() == state["error"]
    assert field(page).get_attribute("aria-invalid") == "true"
    assert page.locator(".pgt-maps").is_hidden() and page.locator(".pgt-next").is_hidden()
    assert page.get_by_role("slider").is_disabled()
    field(page).fill("def f(x):")  # and back
    state = read_state(page, ROOT)
    assert field(page).get_attribute("aria-invalid") is None
    check_numbers(state, references, "def f(x):")


def test_the_limits_in_the_messages_are_the_models(model_text, view):
    document = json.loads(model_text)
    assert document["context_length"] == 32 and document["alphabet"] == ALPHABET  # as the cases above say
    label = view.page.locator(".pgt-controls label").first.inner_text()
    assert f"at most {document['context_length']} characters" in label
    field(view.page).fill("\u201cquoted\u201d")
    assert f'from the space to "{ALPHABET[-1]}"' in read_state(view.page, ROOT)["error"]


def test_keyboard_alone(view):
    page = view.page
    field(page).focus()
    page.keyboard.press("Control+a")
    page.keyboard.type("import os")
    assert read_state(page, ROOT)["ids"] == [ALPHABET.index(c) for c in "import os"]
    page.keyboard.press("Tab")
    slider = page.get_by_role("slider", name="Query shown in the predictions and readouts")
    assert slider.evaluate("e => e === document.activeElement")
    page.keyboard.press("End")
    assert slider.input_value() == "8"
    readouts = page.locator(".pgt-readout").all_inner_texts()
    assert len(readouts) == 8 and all(text.startswith('Query 8 ("s")') for text in readouts)
    assert page.locator(".pgt-next-title").inner_text() == 'After "import os", the likeliest next characters:'
    page.keyboard.press("Home")
    assert page.locator(".pgt-readout").first.inner_text() == 'Query 0 ("i"): 1.00 on key 0 ("i").'
    assert page.locator(".pgt-next-title").inner_text() == 'After "i", the likeliest next characters:'


def test_a_first_visit_with_the_model_stays_within_the_budget(browser, server):
    """Everything a first visit fetches, the model's file and both scripts included, counted once the
    model has run (the site-wide check counts at the load event, which may come before the fetch)."""
    visit = Tab(browser, server, **DESKTOP).open(PAGE)
    page = visit.page
    page.wait_for_selector(ROOT)
    fetched = page.evaluate("() => performance.getEntriesByType('resource').map(entry => entry.name)")
    assert any(name.endswith(MODEL) for name in fetched)
    assert page.evaluate(TRANSFERRED) <= FIRST_VISIT_BUDGET
    visit.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_accessibility_violation_before_and_after_changes(browser, server, scheme):
    assert_accessible_before_and_after(
        browser, server, PAGE, ROOT, scheme, lambda page: field(page).fill("\u00e9")
    )


LABELS = "[...document.querySelectorAll('.pgt-labels text')].map(t => t.getBoundingClientRect().height)"


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
    """No sideways scroll, with the page's text and with the most characters the model reads; each
    map as wide as a phone's column allows (one a row) or half a desktop's (two a row); its labels
    at least 7 px tall with the most characters; the colours the tutorials', never filtered."""
    visit = Tab(browser, server, **options).open(PAGE)
    page = visit.page
    page.wait_for_selector(ROOT)
    if "dark" in mode:
        page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    assert page.evaluate(SIDEWAYS_SCROLL) <= 0
    column = page.locator(".pgt-maps").bounding_box()["width"]
    maps = page.locator(".pgt-head svg")
    width = maps.first.bounding_box()["width"]
    per_row = 1 if options["viewport"]["width"] < 600 else 2
    assert width >= column / per_row - 40 and width >= 280
    assert maps.first.evaluate("svg => getComputedStyle(svg).filter") == "none"
    longest = "x = {'key': [1, 2, 3]}  # a dict"
    field(page).fill(longest)
    assert len(longest) == 32 and read_state(page, ROOT)["error"] is None
    check_list_and_maps(page, read_state(page, ROOT), longest)
    assert page.evaluate(SIDEWAYS_SCROLL) <= 0
    assert min(page.evaluate(LABELS)) >= 7
    page.locator(".pgt").scroll_into_view_if_needed()
    screenshot(page, f"playground-text-{mode}")
    assert visit.outside == [] and visit.console_errors == []
    visit.close()

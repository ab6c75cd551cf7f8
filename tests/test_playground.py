"""The attention playground (docs/playground.md) in headless Chromium, offline.

Each test loads the page, perturbs the playground the way a reader does (the mouse, the arrow
keys, the slider, the mask toggles, a token's field), then reads the ``data-state`` the script
keeps on each view's root and checks its weights and output against
``attn_ref.scaled_dot_product_attention``, computed here on the inputs the state records.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES, THREE_TOKENS
from tests.browsing import SIDEWAYS_SCROLL, Tab, screenshot

pytestmark = pytest.mark.browser

PAGE = "playground/"
DESKTOP = {"viewport": {"width": 1280, "height": 900}, "color_scheme": "light"}
LOOKUP = '.playground[data-view="lookup"]'
SELF_ATTENTION = '.playground[data-view="self-attention"]'
SCRIPT_AND_STYLE_BUDGET = 150 * 1024  # bytes the playground adds to a page, uncompressed
PLANE_EXTENT, PLANE_UNIT, PLANE_SIZE = 3.5, 40, 300  # the SVG planes' geometry, as drawn by the script

# The script and style files a page loaded, with their uncompressed sizes.
LOADED_FILES = """() => Object.fromEntries(performance.getEntriesByType("resource")
  .filter(entry => /\\.(js|css)(\\?|$)/.test(entry.name))
  .map(entry => [new URL(entry.name).pathname.split("/").pop(), entry.decodedBodySize]))"""


@pytest.fixture
def playground(browser, server):
    """A fresh load of the playground page, on a desktop screen in the light palette."""
    visit = Tab(browser, server, **DESKTOP).open(PAGE)
    visit.page.wait_for_selector(f"{LOOKUP}[data-state]")
    visit.page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    yield visit
    assert visit.outside == [], "a request left the site"
    assert visit.console_errors == []
    visit.close()


def read_state(page, view: str) -> dict:
    return json.loads(page.get_attribute(view, "data-state"))


def attn_ref_on(state: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """attn_ref's (output, weights) on the queries, keys, values, mask and scale of ``state``."""
    query, key, value = (
        torch.tensor(state[name], dtype=torch.float32) for name in ("queries", "keys", "values")
    )
    mask = torch.tensor(state["mask"], dtype=torch.bool)
    return scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=state["scale"])


def assert_computes_attn_ref(state: dict) -> None:
    """The state's scores, weights and output are attn_ref's on its inputs, to float32 tolerance."""
    output, weights = attn_ref_on(state)
    query, key = (torch.tensor(state[name], dtype=torch.float32) for name in ("queries", "keys"))
    torch.testing.assert_close(
        torch.tensor(state["scores"], dtype=torch.float32), query @ key.T * state["scale"]
    )
    torch.testing.assert_close(torch.tensor(state["weights"], dtype=torch.float32), weights)
    torch.testing.assert_close(torch.tensor(state["output"], dtype=torch.float32), output)


def test_initial_states_are_the_build_time_examples(playground, executed_tutorials):
    page = playground.page
    lookup = read_state(page, LOOKUP)
    assert (lookup["queries"], lookup["keys"], lookup["values"]) == (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES)
    assert lookup["mask"] == [[True] * len(LOOKUP_KEYS)]
    assert lookup["scale"] == pytest.approx(1 / math.sqrt(2))  # 1/sqrt(d_k), d_k = 2
    assert_computes_attn_ref(lookup)
    built = json.loads(page.get_attribute(LOOKUP, "data-initial"))  # what attn_ref printed at build
    for name in ("scores", "weights", "output"):
        torch.testing.assert_close(torch.tensor(lookup[name]), torch.tensor(built[name]))

    # The worked example of the first tutorial: Q = K = V = X, scale 1/sqrt(d_k) with d_k = 4.
    tokens = read_state(page, SELF_ATTENTION)
    assert tokens["tokens"] == tokens["queries"] == tokens["keys"] == tokens["values"] == THREE_TOKENS
    X = torch.tensor(THREE_TOKENS)
    output, weights = scaled_dot_product_attention(X, X, X)
    torch.testing.assert_close(torch.tensor(tokens["weights"], dtype=torch.float32), weights)
    torch.testing.assert_close(torch.tensor(tokens["output"], dtype=torch.float32), output)
    assert_computes_attn_ref(tokens)
    tutorial = executed_tutorials["linear_to_self_attention"].values
    torch.testing.assert_close(torch.tensor(tokens["weights"], dtype=torch.float32), tutorial["weights_pt"])
    torch.testing.assert_close(torch.tensor(tokens["output"], dtype=torch.float32), tutorial["output_pt"])


def test_dragging_the_query_with_the_mouse(playground):
    page = playground.page
    page.get_by_role("group", name="Query and keys").scroll_into_view_if_needed()
    plane = page.get_by_role("group", name="Query and keys").bounding_box()
    handle = page.locator(f"{LOOKUP} .pg-handle").bounding_box()

    def on_screen(x: float, y: float) -> tuple[float, float]:
        return (
            plane["x"] + (PLANE_SIZE / 2 + x * PLANE_UNIT) / PLANE_SIZE * plane["width"],
            plane["y"] + (PLANE_SIZE / 2 - y * PLANE_UNIT) / PLANE_SIZE * plane["height"],
        )

    before = read_state(page, LOOKUP)
    page.mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
    page.mouse.down()
    page.mouse.move(*on_screen(-2.0, 1.5), steps=8)
    page.mouse.up()
    state = read_state(page, LOOKUP)
    assert state["queries"][0] == pytest.approx([-2.0, 1.5], abs=0.03)
    assert state["weights"] != before["weights"]
    assert max(state["weights"][0]) == state["weights"][0][2]  # now closest to k2 = (-1.5, 1)
    assert_computes_attn_ref(state)


def test_moving_the_query_with_the_arrow_keys(playground):
    page = playground.page
    handle = page.get_by_role("slider", name="Query q")
    handle.focus()
    (x, y) = read_state(page, LOOKUP)["queries"][0]
    for key, (dx, dy) in [("ArrowRight", (0.1, 0)), ("ArrowUp", (0, 0.1)), ("Shift+ArrowDown", (0, -0.5))]:
        page.keyboard.press(key)
        x, y = round(x + dx, 2), round(y + dy, 2)
        state = read_state(page, LOOKUP)
        assert state["queries"][0] == pytest.approx([x, y])
        assert handle.get_attribute("aria-valuetext") == f"x {x:.2f}, y {y:.2f}".replace("-", "\u2212")
        assert_computes_attn_ref(state)
    for _ in range(20):  # the query stops at the edge of the plane
        page.keyboard.press("Shift+ArrowLeft")
    state = read_state(page, LOOKUP)
    assert state["queries"][0][0] == -PLANE_EXTENT
    assert_computes_attn_ref(state)


def test_temperature_slider(playground):
    page = playground.page
    slider = page.get_by_label("Temperature")
    slider.focus()
    start = read_state(page, LOOKUP)
    for key in ("ArrowLeft",) * 4 + ("Home", "End", "ArrowLeft"):
        page.keyboard.press(key)
        state = read_state(page, LOOKUP)
        # The slider holds 4 log2(tau), and the scale is 1/tau.
        assert state["scale"] == pytest.approx(2 ** (-int(slider.input_value()) / 4))
        assert state["queries"] == start["queries"]
        assert_computes_attn_ref(state)
        if key == "Home":  # the lowest temperature: the sharpest weights
            assert max(state["weights"][0]) > max(start["weights"][0])
        if key == "End":  # the highest: the flattest
            assert max(state["weights"][0]) < max(start["weights"][0])


def test_masking_keys_one_by_one_and_all(playground):
    page = playground.page
    lookup = page.locator(LOOKUP)
    lookup.get_by_role("checkbox", name="key 0").click()  # keys count from 0, as in the code
    state = read_state(page, LOOKUP)
    assert state["mask"] == [[False, True, True, True, True]]
    assert state["weights"][0][0] == 0
    assert sum(state["weights"][0]) == pytest.approx(1)
    assert_computes_attn_ref(state)

    lookup.get_by_role("checkbox", name="key 2").focus()
    page.keyboard.press("Space")
    state = read_state(page, LOOKUP)
    assert state["mask"] == [[False, True, False, True, True]]
    assert_computes_attn_ref(state)

    for name in ("key 1", "key 3", "key 4"):
        lookup.get_by_role("checkbox", name=name).click()
        assert_computes_attn_ref(read_state(page, LOOKUP))
    state = read_state(page, LOOKUP)
    assert state["mask"] == [[False] * 5]
    assert state["weights"] == [[0] * 5] and state["output"] == [[0, 0]]  # as attn_ref: no NaN
    assert_computes_attn_ref(state)
    assert "Every key is masked" in lookup.locator("[aria-live]").inner_text()

    lookup.get_by_role("checkbox", name="key 1").click()  # one key back: all its weight
    state = read_state(page, LOOKUP)
    assert state["weights"] == [[0, 1, 0, 0, 0]] and state["output"] == [LOOKUP_VALUES[1]]
    assert_computes_attn_ref(state)


def test_editing_a_token_of_the_self_attention_view(playground):
    page = playground.page
    field = page.get_by_label("token 0, feature 0")
    field.fill("2")
    field.dispatch_event("change")
    state = read_state(page, SELF_ATTENTION)
    expected = [row[:] for row in THREE_TOKENS]
    expected[0][0] = 2.0
    assert state["tokens"] == state["queries"] == state["keys"] == state["values"] == expected
    assert state["scale"] == 0.5
    assert_computes_attn_ref(state)

    page.get_by_label("token 2, feature 3").fill("-1.5")
    expected[2][3] = -1.5
    state = read_state(page, SELF_ATTENTION)
    assert state["tokens"] == expected
    assert_computes_attn_ref(state)

    page.get_by_label("token 1, feature 1").fill("")  # not a number: the last valid state stays
    assert read_state(page, SELF_ATTENTION) == state
    page.get_by_role("button", name="Reset the three tokens").click()
    assert read_state(page, SELF_ATTENTION)["tokens"] == THREE_TOKENS


def test_resetting_the_soft_lookup(playground):
    page = playground.page
    first = read_state(page, LOOKUP)
    page.get_by_role("slider", name="Query q").focus()
    page.keyboard.press("ArrowDown")
    page.locator(LOOKUP).get_by_role("checkbox", name="key 1").click()
    page.get_by_label("Temperature").press("End")
    assert read_state(page, LOOKUP) != first
    page.get_by_role("button", name="Reset the soft lookup").click()
    assert read_state(page, LOOKUP) == first


def test_the_playground_adds_little_script_and_style(browser, server):
    """Only this page loads the playground's files, and together they stay within the budget."""
    loaded = {}
    for path in ("", PAGE):
        visit = Tab(browser, server, **DESKTOP).open(path)
        loaded[path] = visit.page.evaluate(LOADED_FILES)
        visit.close()
    added = {name: size for name, size in loaded[PAGE].items() if name not in loaded[""]}
    assert sorted(added) == ["playground.css", "playground.js"]
    assert 0 < sum(added.values()) <= SCRIPT_AND_STYLE_BUDGET


@pytest.mark.parametrize(
    "mode, options",
    [
        ("light", DESKTOP),
        ("dark", {**DESKTOP, "color_scheme": "dark"}),
        ("narrow", {"viewport": {"width": 375, "height": 800}, "color_scheme": "light", "is_mobile": True}),
    ],
)
def test_no_sideways_scroll_before_and_after_a_readers_changes(browser, server, mode, options):
    visit = Tab(browser, server, **options).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    if mode == "dark":
        page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    assert page.evaluate(SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"playground-interactive-{mode}")
    # Then a reader's changes: a key masked, the query moved, a token edited.
    page.locator(LOOKUP).get_by_role("checkbox", name="key 0").click()
    page.get_by_role("slider", name="Query q").press("Shift+ArrowLeft")
    page.get_by_label("token 0, feature 0").fill("2")
    assert page.evaluate(SIDEWAYS_SCROLL) <= 0
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header back at the top of the picture
    screenshot(page, f"playground-interactive-{mode}-changed")
    assert visit.outside == [] and visit.console_errors == []
    visit.close()

"""The attention playground (docs/playground.md) in headless Chromium, offline.

Each test loads the page, changes the playground the way a reader does (the mouse, a finger, the
arrow keys, the slider, the mask toggles, a token's or a projection's field, the causal toggle),
then reads the ``data-state`` the script keeps on each view's root and checks its dot products,
scores, weights and output against ``attn_ref.scaled_dot_product_attention``, computed here in
float64 on the inputs the state records (and, for the projections, on X W_Q and X W_K computed
here, with attn_ref's own causal mask).
"""

from __future__ import annotations

import itertools
import json
import math
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib import colormaps

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES, THREE_TOKENS
from attn_ref.masks import causal_mask
from attn_ref.plotting import attention_heatmap
from sitelook.browsing import Tab, accessibility_violations, reading
from sitelook.budgets import PLAYGROUND_WORDS, SCREEN
from tests.support.colours import contrast, on, srgb
from tests.support.float32_attention_bounds import SAFETY, assert_within, float32_attention
from tests.support.playground_state import SETTLE_MS, read_state
from tests.support.readers import DESKTOP, PHONE, SIDEWAYS_SCROLL, screenshot
from tests.support.reference import EPS32, EPS64, as64

pytestmark = pytest.mark.browser

PAGE = "playground/"
LOOKUP = '.playground[data-view="lookup"]'
SELF_ATTENTION = '.playground[data-view="self-attention"]'
SCRIPT_AND_STYLE_BUDGET = (
    60 * 1024
)  # bytes the playground's script and stylesheet add to the page, uncompressed
PAGE_BUDGET = 150 * 1024  # bytes of the page's HTML, uncompressed
PLANE_EXTENT, PLANE_UNIT, PLANE_SIZE = 3.5, 40, 300  # the SVG planes' geometry, as drawn by the script
NAME = "e => e.getAttribute('aria-label') || (e.labels && e.labels[0] ? e.labels[0].textContent : e.textContent.trim())"
TOKENS = [token[:2] for token in THREE_TOKENS]  # the view keeps the first two features of each token

# The script and style files a page loaded, with their uncompressed sizes.
LOADED_FILES = """() => Object.fromEntries(performance.getEntriesByType("resource")
  .filter(entry => /\\.(js|css)(\\?|$)/.test(entry.name))
  .map(entry => [new URL(entry.name).pathname.split("/").pop(), entry.decodedBodySize]))"""
PAGE_SIZE = '() => performance.getEntriesByType("navigation")[0].decodedBodySize'


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


def live_text(page, view: str) -> str:
    return page.locator(f"{view} [aria-live]:not(.pg-error)").inner_text()


# ---- What the state must hold, and how far from attn_ref it may be ----
#
# The script computes in float64 (JavaScript's numbers), and so does attn_ref here. Each of the two
# results is within the standard first-order bound of the exact one (Higham, *Accuracy and
# Stability of Numerical Algorithms*, ch. 3), so they are within twice that bound of each other.
# The bounds are those of tests/support/float32_attention_bounds.py, with EPS64, the relative error of
# one float64 operation (twice the unit roundoff), in place of EPS32: a dot product of n terms is
# off by at most n EPS64 times the sum of its terms' sizes; a softmax weight, whose row's scores are
# off by at most delta, by a relative 2 delta + 4 EPS64 max|z| + (S + 6) EPS64 (the scores' errors,
# z - max, exp within one ulp in V8 and in PyTorch, the sum of S terms, the division); an output by
# that relative error plus the sum of S terms, times sum_j w_j |v_j|.

TINY64 = float(np.finfo(np.float64).tiny)
COMPUTATIONS = 2  # the script's and attn_ref's, each within the bound of the exact result


def assert_close(actual, expected, bound, what: str) -> None:
    assert_within(actual, expected, COMPUTATIONS * np.asarray(bound), what)


def check_attention(state: dict, queries, keys, values, mask, rounds: int = 0, sizes=None) -> None:
    """The state's dots, scores, weights and output are attn_ref's on these inputs, within the bounds.

    ``rounds`` and ``sizes``: when the queries and keys were computed as X @ W with C terms, the
    reference's and the state's may differ by C EPS64 |X| @ |W| each (``sizes``: those |X| @ |W|).
    """
    q, k, v = (torch.as_tensor(x, dtype=torch.float64) for x in (queries, keys, values))
    allowed = torch.as_tensor(mask, dtype=torch.bool)
    output, weights = scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=state["scale"])
    dots = q @ k.T  # (L, S)
    size_q, size_k = sizes or (np.abs(as64(q)), np.abs(as64(k)))
    size_dots = size_q @ size_k.T
    d_k, S = q.shape[-1], k.shape[-2]
    dots_error = SAFETY * (d_k + 2 * rounds) * EPS64 * size_dots
    scores_error = SAFETY * (d_k + 2 * rounds + 2) * EPS64 * size_dots * state["scale"]
    assert_close(state["dots"], dots, dots_error, "dot products")
    assert_close(state["scores"], dots * state["scale"], scores_error, "scores")

    z = np.where(allowed.numpy(), as64(dots) * state["scale"], -np.inf)
    finite = np.isfinite(z)
    size = np.where(finite, np.abs(z), 0.0).max(axis=-1, keepdims=True)
    delta = np.where(finite, scores_error, 0.0).max(axis=-1, keepdims=True)
    relative = 2 * delta + 4 * EPS64 * size + (S + 6) * EPS64
    w = as64(weights)
    weights_error = SAFETY * (relative * w + np.where(w > 0, TINY64, 0.0))
    assert_close(state["weights"], w, weights_error, "weights")
    size_v = np.abs(as64(v))
    output_error = SAFETY * ((relative + (S + rounds) * EPS64) * (w @ size_v) + TINY64 * size_v.sum(axis=0))
    assert_close(state["output"], output, output_error, "output")


def check_built(built: dict, queries, keys, values, mask) -> None:
    """What attn_ref computed when the page was built, in float32 (PyTorch's default dtype), is within
    float32's bounds of the exact results (tests/support/float32_attention_bounds.py)."""
    q, k = as64(queries), as64(keys)
    exact = float32_attention(q, k, values, scale=built["scale"], allowed=np.array(mask))
    dots = q @ k.T
    size = np.abs(q) @ np.abs(k).T
    assert_within(built["dots"], dots, SAFETY * q.shape[-1] * EPS32 * size, "dot products, at build")
    assert_within(
        built["scores"],
        dots * built["scale"],
        SAFETY * (q.shape[-1] + 2) * EPS32 * size * built["scale"],
        "scores",
    )
    assert_within(built["weights"], exact.weights, exact.weights_error, "weights, at build")
    assert_within(built["output"], exact.output, exact.output_error, "output, at build")


def check_lookup(state: dict) -> None:
    """The soft lookup's state against attn_ref on the query, keys, values, mask and scale it records."""
    check_attention(state, state["queries"], state["keys"], state["values"], state["mask"])


def check_self_attention(state: dict) -> None:
    """The self-attention view's state against attn_ref on X W_Q and X W_K computed here, V = X, and
    attn_ref's causal mask when the state says causal."""
    X, W_Q, W_K = (torch.tensor(state[name], dtype=torch.float64) for name in ("tokens", "W_Q", "W_K"))
    C = X.shape[-1]
    Q, K = X @ W_Q, X @ W_K  # (T, d_k)
    sizes = (np.abs(as64(X)) @ np.abs(as64(W_Q)), np.abs(as64(X)) @ np.abs(as64(W_K)))
    assert_close(state["queries"], Q, SAFETY * C * EPS64 * sizes[0], "Q = X W_Q")
    assert_close(state["keys"], K, SAFETY * C * EPS64 * sizes[1], "K = X W_K")
    assert state["values"] == state["tokens"]  # W_V is the identity
    assert state["scale"] == 1 / math.sqrt(W_Q.shape[-1])
    T = X.shape[0]
    mask = causal_mask(T) if state["causal"] else torch.ones(T, T, dtype=torch.bool)  # attn_ref's own mask
    assert state["mask"] == mask.tolist()
    check_attention(state, Q, K, X, mask, rounds=C, sizes=sizes)
    if state["causal"]:  # the same as attn_ref's is_causal=True
        output, weights = scaled_dot_product_attention(Q, K, X, is_causal=True, scale=state["scale"])
        reference = scaled_dot_product_attention(Q, K, X, attn_mask=mask, scale=state["scale"])
        assert torch.equal(output, reference[0]) and torch.equal(weights, reference[1])


# ---- The first state of each view ----


def test_initial_states_are_the_build_time_examples(playground):
    page = playground.page
    lookup = read_state(page, LOOKUP)
    assert (lookup["queries"], lookup["keys"], lookup["values"]) == (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES)
    assert lookup["mask"] == [[True] * len(LOOKUP_KEYS)]
    assert lookup["scale"] == pytest.approx(1 / math.sqrt(2))  # 1/sqrt(d_k), d_k = 2
    check_lookup(lookup)
    built = json.loads(page.get_attribute(LOOKUP, "data-initial"))  # what attn_ref computed at build
    check_built(built, lookup["queries"], lookup["keys"], lookup["values"], lookup["mask"])

    # The first tutorial's tokens, each its first two features twice: the view keeps those two,
    # with identity projections.
    tokens = read_state(page, SELF_ATTENTION)
    assert [token * 2 for token in tokens["tokens"]] == THREE_TOKENS
    assert tokens["tokens"] == TOKENS
    assert tokens["W_Q"] == tokens["W_K"] == [[1, 0], [0, 1]]
    assert tokens["causal"] is False
    assert tokens["queries"] == tokens["keys"] == tokens["values"] == TOKENS
    check_self_attention(tokens)
    built = json.loads(page.get_attribute(SELF_ATTENTION, "data-initial"))
    check_built(built, TOKENS, TOKENS, TOKENS, tokens["mask"])


# ---- The soft lookup: a query, keys and values moved by the mouse, the keyboard and a finger ----


def plane_point(page, plane: str, x: float, y: float) -> tuple[float, float]:
    """Where the point (x, y) of a plane ("Query and keys" or "Values and the output") is on screen."""
    box = page.get_by_role("group", name=plane).bounding_box()
    return (
        box["x"] + (PLANE_SIZE / 2 + x * PLANE_UNIT) / PLANE_SIZE * box["width"],
        box["y"] + (PLANE_SIZE / 2 - y * PLANE_UNIT) / PLANE_SIZE * box["height"],
    )


def centre(page, name: str) -> tuple[float, float]:
    box = page.get_by_role("slider", name=name, exact=True).bounding_box()
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def mouse_drag(page, handle: str, plane: str, to: tuple[float, float]) -> None:
    page.get_by_role("group", name=plane).scroll_into_view_if_needed()
    page.mouse.move(*centre(page, handle))
    page.mouse.down()
    page.mouse.move(*plane_point(page, plane, *to), steps=8)
    page.mouse.up()


def test_dragging_the_query_with_the_mouse(playground):
    page = playground.page
    before = read_state(page, LOOKUP)
    mouse_drag(page, "Query q", "Query and keys", (-2.0, 1.5))
    state = read_state(page, LOOKUP)
    assert state["queries"][0] == pytest.approx([-2.0, 1.5], abs=0.03)
    assert (state["keys"], state["values"]) == (before["keys"], before["values"])
    assert max(state["weights"][0]) == state["weights"][0][2]  # now closest to k2 = (-1.5, 1)
    check_lookup(state)

    # The mouse pressed anywhere else in the query plane brings the query there.
    page.mouse.click(*plane_point(page, "Query and keys", 0.5, -2.5))
    state = read_state(page, LOOKUP)
    assert state["queries"][0] == pytest.approx([0.5, -2.5], abs=0.03)
    check_lookup(state)


def test_dragging_a_key_and_a_value_with_the_mouse(playground):
    page = playground.page
    before = read_state(page, LOOKUP)
    mouse_drag(page, "Key 3", "Query and keys", (1.0, 2.0))  # key 3 to beside the query
    state = read_state(page, LOOKUP)
    assert state["keys"][3] == pytest.approx([1.0, 2.0], abs=0.03)
    assert [k for j, k in enumerate(state["keys"]) if j != 3] == [
        k for j, k in enumerate(before["keys"]) if j != 3
    ]
    assert state["queries"] == before["queries"] and state["values"] == before["values"]
    assert state["weights"][0][3] > before["weights"][0][3]
    check_lookup(state)

    # A value moves the output by its weight times the move, and no weight: values are not scored.
    before = state
    mouse_drag(page, "Value 1", "Values and the output", (-3.0, -3.0))
    state = read_state(page, LOOKUP)
    assert state["values"][1] == pytest.approx([-3.0, -3.0], abs=0.03)
    assert state["weights"] == before["weights"] and state["keys"] == before["keys"]
    check_lookup(state)
    moved = np.subtract(state["values"][1], before["values"][1])
    np.testing.assert_allclose(
        np.subtract(state["output"][0], before["output"][0]),
        state["weights"][0][1] * moved,
        rtol=1e-12,
        atol=1e-12,
    )


def test_moving_the_query_a_key_and_a_value_with_the_arrow_keys(playground):
    page = playground.page
    for name, (field, j) in {
        "Query q": ("queries", 0),
        "Key 2": ("keys", 2),
        "Value 4": ("values", 4),
    }.items():
        handle = page.get_by_role("slider", name=name, exact=True)
        handle.focus()
        (x, y) = read_state(page, LOOKUP)[field][j]
        for key, (dx, dy) in [
            ("ArrowRight", (0.1, 0)),
            ("ArrowUp", (0, 0.1)),
            ("Shift+ArrowDown", (0, -0.5)),
        ]:
            page.keyboard.press(key)
            x, y = round(x + dx, 2), round(y + dy, 2)
            state = read_state(page, LOOKUP)
            assert state[field][j] == pytest.approx([x, y])
            assert handle.get_attribute("aria-valuetext") == f"x {x:.2f}, y {y:.2f}".replace("-", "\u2212")
            check_lookup(state)
    for _ in range(20):  # the value stops at the edge of the plane
        page.keyboard.press("Shift+ArrowLeft")
    state = read_state(page, LOOKUP)
    assert state["values"][4][0] == -PLANE_EXTENT
    check_lookup(state)


def touch_drag(cdp, page, start: tuple[float, float], move: tuple[float, float], steps: int = 10) -> None:
    """A finger on the screen at ``start``, moved by ``move`` (pixels) in ``steps`` frames, then lifted."""
    cdp.send(
        "Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": start[0], "y": start[1]}]}
    )
    for i in range(1, steps + 1):
        point = {"x": start[0] + move[0] * i / steps, "y": start[1] + move[1] * i / steps}
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [point]})
        page.wait_for_timeout(20)  # a frame apart, as a finger's moves arrive
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})


def test_on_a_phone_the_planes_are_large_stacked_and_both_in_sight(browser, server):
    """At 375 px the planes stand one above the other, each nearly the column's width (side by side
    they were 153 px), and both fit on the screen below the header at once: the output moves in
    sight of the finger. A finger on a handle drags it without scrolling the page; elsewhere it
    scrolls the page and moves nothing."""
    visit = Tab(browser, server, **PHONE).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{LOOKUP}[data-state]")
    query_plane = page.get_by_role("group", name="Query and keys")
    value_plane = page.get_by_role("group", name="Values and the output")
    header = page.evaluate("document.querySelector('.md-header').getBoundingClientRect().bottom")
    query_plane.evaluate(f"plane => scrollBy(0, plane.getBoundingClientRect().top - {header} - 4)")
    a, b = query_plane.bounding_box(), value_plane.bounding_box()
    column = page.locator(LOOKUP).bounding_box()
    assert min(a["width"], b["width"]) >= 0.85 * column["width"] and a["width"] >= 280
    assert a["y"] + a["height"] <= b["y"] and abs(a["x"] - b["x"]) < 1  # stacked
    assert a["y"] >= header and b["y"] + b["height"] <= 800  # both on the screen at once
    assert a["x"] >= 0 and a["x"] + a["width"] <= 375

    # A finger on the query's handle drags the query; the page does not scroll.
    cdp = visit.context.new_cdp_session(page)
    before, scrolled = read_state(page, LOOKUP), page.evaluate("scrollY")
    touch_drag(cdp, page, centre(page, "Query q"), (-40, -30))
    state = read_state(page, LOOKUP)
    assert page.evaluate("scrollY") == scrolled
    x, y = before["queries"][0]
    assert state["queries"][0] == pytest.approx(
        [x - 40 / a["width"] * PLANE_SIZE / PLANE_UNIT, y + 30 / a["height"] * PLANE_SIZE / PLANE_UNIT],
        abs=0.03,
    )
    check_lookup(state)
    assert value_plane.bounding_box() == b  # the output's plane stayed in sight, where it was

    # A finger elsewhere on the plane scrolls the page, and moves nothing.
    corner = plane_point(page, "Query and keys", -3.2, -3.2)
    assert page.evaluate("([x, y]) => document.elementFromPoint(x, y).closest('.pg-handle')", corner) is None
    touch_drag(cdp, page, corner, (0, -150))
    page.wait_for_function(f"() => scrollY > {scrolled}")
    assert read_state(page, LOOKUP) == state
    assert visit.outside == [] and visit.console_errors == []
    visit.close()


@pytest.mark.parametrize(
    "plane, names",
    [
        ("Query and keys", ["Query q", *(f"Key {j}" for j in range(len(LOOKUP_KEYS)))]),
        ("Values and the output", [f"Value {j}" for j in range(len(LOOKUP_VALUES))]),
    ],
)
def test_on_a_phone_a_finger_on_each_handle_moves_that_point_alone(browser, server, plane, names):
    """Where handles overlap (the query starts beside key 0), the one under the finger's centre is
    the one that moves."""
    visit = Tab(browser, server, **PHONE).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{LOOKUP}[data-state]")
    page.get_by_role("group", name=plane).evaluate(
        "plane => scrollBy(0, plane.getBoundingClientRect().top - 80)"
    )
    cdp = visit.context.new_cdp_session(page)
    places = {"Query q": ("queries", 0)} | {f"Key {j}": ("keys", j) for j in range(len(LOOKUP_KEYS))}
    places |= {f"Value {j}": ("values", j) for j in range(len(LOOKUP_VALUES))}
    for name in names:
        before = read_state(page, LOOKUP)
        touch_drag(cdp, page, centre(page, name), (12, 12), steps=4)
        state = read_state(page, LOOKUP)
        field, j = places[name]
        moved = [
            (f, i) for f in ("queries", "keys", "values") for i, p in enumerate(state[f]) if p != before[f][i]
        ]
        assert moved == [(field, j)], f"a finger on {name} moved {moved}"
        check_lookup(state)
    assert visit.outside == [] and visit.console_errors == []
    visit.close()


# ---- The temperature and the mask ----


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
        check_lookup(state)
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
    check_lookup(state)
    assert lookup.locator("tbody tr").nth(0).locator("td").nth(1).inner_text() == "\u2212\u221e"

    lookup.get_by_role("checkbox", name="key 2").focus()
    page.keyboard.press("Space")
    state = read_state(page, LOOKUP)
    assert state["mask"] == [[False, True, False, True, True]]
    check_lookup(state)

    for name in ("key 1", "key 3", "key 4"):
        lookup.get_by_role("checkbox", name=name).click()
        check_lookup(read_state(page, LOOKUP))
    state = read_state(page, LOOKUP)
    assert state["mask"] == [[False] * 5]
    assert state["weights"] == [[0] * 5] and state["output"] == [[0, 0]]  # as attn_ref: no NaN
    check_lookup(state)
    page.wait_for_function(
        "view => document.querySelector(view + ' [aria-live]').textContent.includes('Every key is masked')",
        arg=LOOKUP,
    )

    lookup.get_by_role("checkbox", name="key 1").click()  # one key back: all its weight
    state = read_state(page, LOOKUP)
    assert state["weights"] == [[0, 1, 0, 0, 0]] and state["output"] == [LOOKUP_VALUES[1]]
    check_lookup(state)


# ---- Self-attention: tokens, projections, the causal mask, and bad input ----


def test_editing_a_token_of_the_self_attention_view(playground):
    page = playground.page
    field = page.get_by_label("token 0, feature 0")
    field.fill("2")
    state = read_state(page, SELF_ATTENTION)
    expected = [row[:] for row in TOKENS]
    expected[0][0] = 2.0
    assert state["tokens"] == state["queries"] == state["keys"] == state["values"] == expected
    assert state["scale"] == 1 / math.sqrt(2)
    check_self_attention(state)

    page.get_by_label("token 2, feature 1").fill("\u22121.5")  # a true minus sign, as the page prints them
    expected[2][1] = -1.5
    state = read_state(page, SELF_ATTENTION)
    assert state["tokens"] == expected
    check_self_attention(state)

    page.get_by_label("token 1, feature 1").fill("")  # not a number: the last valid state stays
    assert read_state(page, SELF_ATTENTION) == state
    page.get_by_role("button", name="Reset the three tokens").click()
    assert read_state(page, SELF_ATTENTION)["tokens"] == TOKENS


def test_editing_w_q_and_w_k(playground):
    page = playground.page
    view = page.locator(SELF_ATTENTION)
    page.get_by_label("W_K, row 0, column 1").fill("1")  # exercise 7: the dot products lose their symmetry
    state = read_state(page, SELF_ATTENTION)
    assert state["W_K"] == [[1, 1], [0, 1]] and state["W_Q"] == [[1, 0], [0, 1]]
    check_self_attention(state)
    dots = np.array(state["dots"])
    assert (dots != dots.T).any()
    assert state["dots"][1][0] > state["dots"][0][1]

    page.get_by_label("W_Q, row 1, column 0").fill("-0.5")
    page.get_by_label("W_Q, row 0, column 0").fill("2.25")
    state = read_state(page, SELF_ATTENTION)
    assert state["W_Q"] == [[2.25, 0], [-0.5, 1]]
    check_self_attention(state)
    # What the tables show is the state, at two decimals.
    shown = (
        view.locator("table").filter(has_text=re.compile("^Queries")).locator("tbody td").all_inner_texts()
    )
    assert [float(text.replace("\u2212", "-")) for text in shown] == pytest.approx(
        np.ravel(state["queries"]), abs=0.005
    )


def test_causal_toggle(playground):
    page = playground.page
    view = page.locator(SELF_ATTENTION)
    page.get_by_label("token 2, feature 0").fill("0.5")
    page.get_by_label("W_K, row 1, column 0").fill("0.75")
    view.get_by_role("checkbox", name="Causal").check()
    state = read_state(page, SELF_ATTENTION)
    assert state["causal"] is True
    assert state["mask"] == [[True, False, False], [True, True, False], [True, True, True]]
    check_self_attention(state)  # against attn_ref's is_causal=True on X W_Q, X W_K
    assert state["weights"][0] == [1, 0, 0]  # token 0 sees only itself
    assert state["output"][0] == state["tokens"][0]
    weights = (
        view.locator("table").filter(has_text=re.compile("^Weights")).locator("tbody td").all_inner_texts()
    )
    assert weights[1:3] == ["masked", "masked"] and weights[5] == "masked"
    scores = (
        view.locator("table").filter(has_text=re.compile("^Scores")).locator("tbody td").all_inner_texts()
    )
    assert scores[1] == scores[2] == scores[5] == "\u2212\u221e"

    # Two equal tokens: equal rows without the mask, different rows with it.
    page.get_by_label("token 2, feature 0").fill("1")
    page.get_by_label("token 2, feature 1").fill("0")
    state = read_state(page, SELF_ATTENTION)
    assert state["tokens"][2] == state["tokens"][0]
    check_self_attention(state)
    assert state["weights"][2] != state["weights"][0]
    view.get_by_role("checkbox", name="Causal").uncheck()
    state = read_state(page, SELF_ATTENTION)
    check_self_attention(state)
    assert state["weights"][2] == state["weights"][0]


@pytest.mark.parametrize(
    "typed, says", [("abc", "\u201cabc\u201d is not a number"), ("1e9", "is beyond"), ("", "is empty")]
)
def test_bad_input_gets_a_message_not_nan(playground, typed, says):
    page = playground.page
    view = page.locator(SELF_ATTENTION)
    before = read_state(page, SELF_ATTENTION)
    field = page.get_by_label("W_Q, row 0, column 1")
    field.fill(typed)
    state = read_state(page, SELF_ATTENTION)
    assert state == before  # the last valid numbers stay, and everything computed from them
    assert np.isfinite(state["weights"]).all() and np.isfinite(state["output"]).all()
    message = view.locator(".pg-error")
    assert message.is_visible()
    assert re.fullmatch(rf"W_Q, row 0, column 1\b.*{re.escape(says)}.*", message.inner_text())
    assert field.get_attribute("aria-invalid") == "true"
    assert field.get_attribute("aria-describedby") == message.get_attribute("id")
    assert "NaN" not in view.inner_text()

    field.fill("0.5")  # a number again: the message goes, the view follows
    assert message.is_hidden()
    assert field.get_attribute("aria-invalid") == "false"
    state = read_state(page, SELF_ATTENTION)
    assert state["W_Q"][0][1] == 0.5
    check_self_attention(state)


# ---- Resets ----


def test_resetting_both_views(playground):
    page = playground.page
    first = read_state(page, LOOKUP)
    page.get_by_role("slider", name="Query q").focus()
    page.keyboard.press("ArrowDown")
    page.get_by_role("slider", name="Key 1").focus()
    page.keyboard.press("ArrowLeft")
    page.get_by_role("slider", name="Value 2").focus()
    page.keyboard.press("ArrowUp")
    page.locator(LOOKUP).get_by_role("checkbox", name="key 1").click()
    page.get_by_label("Temperature").press("End")
    assert read_state(page, LOOKUP) != first
    page.get_by_role("button", name="Reset the soft lookup").click()
    assert read_state(page, LOOKUP) == first

    first = read_state(page, SELF_ATTENTION)
    page.get_by_label("W_K, row 1, column 1").fill("3")
    page.get_by_label("W_Q, row 0, column 0").fill("abc")
    page.locator(SELF_ATTENTION).get_by_role("checkbox", name="Causal").check()
    page.get_by_role("button", name="Reset the three tokens").click()
    assert read_state(page, SELF_ATTENTION) == first
    assert page.locator(f"{SELF_ATTENTION} .pg-error").is_hidden()
    assert page.get_by_label("W_Q, row 0, column 0").input_value() == "1"


# ---- The keyboard alone, and what a screen reader hears ----


def test_keyboard_alone_from_the_skip_link(browser, server):
    """Tab to the skip link, follow it, reach a key, move it with the arrows; the live region then
    names the new weights, once they have settled."""
    tab = Tab(browser, server, **DESKTOP)
    tab.context.clock.install()
    page = tab.open(PAGE).page
    page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    focused = (
        "() => document.activeElement.getAttribute('aria-label') || document.activeElement.textContent.trim()"
    )
    page.keyboard.press("Tab")  # the theme's own skip link, to the top of the content
    assert page.evaluate(focused) == "Skip to content"
    page.keyboard.press("Enter")
    presses = 0
    while page.evaluate(focused) != "the soft lookup":
        page.keyboard.press("Tab")
        presses += 1
        assert presses <= 2, (
            f"the skip link is not among the first two stops of the content ({page.evaluate(focused)!r})"
        )
    page.keyboard.press("Enter")
    assert page.evaluate(focused) == "Query q"
    assert page.evaluate("() => document.activeElement.matches(':focus-visible')")
    page.keyboard.press("Tab")
    assert page.evaluate(focused) == "Key 0"

    before = read_state(page, LOOKUP)
    said = live_text(page, LOOKUP)
    for _ in range(5):
        page.keyboard.press("ArrowUp")
    page.keyboard.press("Shift+ArrowLeft")
    state = read_state(page, LOOKUP)
    x, y = before["keys"][0]
    assert state["keys"][0] == pytest.approx([round(x - 0.5, 2), round(y + 0.5, 2)])
    assert state["weights"] != before["weights"]
    check_lookup(state)

    # Not on every step: the live region keeps its text until the value has settled.
    page.clock.run_for(SETTLE_MS - 1)
    assert live_text(page, LOOKUP) == said
    page.clock.run_for(2)
    spoken = live_text(page, LOOKUP)
    weights = [f"key {j} {w:.2f}" for j, w in enumerate(state["weights"][0])]
    assert spoken.startswith("Weights: " + ", ".join(weights) + ".")
    x, y = state["output"][0]
    assert f"Output ({x:.2f}, {y:.2f})".replace("-", "\u2212") in spoken
    assert page.locator(f"{LOOKUP} [aria-live]").first.get_attribute("aria-live") == "polite"

    # Every control of both views is reached with Tab alone, and draws an outline where the focus is.
    controls = page.evaluate(
        f"() => [...document.querySelectorAll('.playground :is(input, button, [tabindex])')].map({NAME})"
    )
    seen = {"Query q", "Key 0"}
    for _ in range(400):
        page.keyboard.press("Tab")
        name, visible, outline = page.evaluate(f"""() => {{ const e = document.activeElement;
          return [({NAME})(e), e.matches(':focus-visible'), getComputedStyle(e).outlineStyle]; }}""")
        if name in controls:
            seen.add(name)
            assert visible and outline != "none", f"{name} shows no focus"
        if name == "Reset the three tokens":
            break
    assert seen == set(controls)
    tab.close()


def test_the_self_attention_view_speaks_its_weights_once_settled(browser, server):
    tab = Tab(browser, server, **DESKTOP)
    tab.context.clock.install()
    page = tab.open(PAGE).page
    page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    said = live_text(page, SELF_ATTENTION)
    page.get_by_label("W_Q, row 1, column 1").fill("")
    page.keyboard.type("13")  # three changes (empty, 1, 13), one announcement
    page.locator(SELF_ATTENTION).get_by_role("checkbox", name="Causal").check()
    page.clock.run_for(SETTLE_MS - 1)
    assert live_text(page, SELF_ATTENTION) == said
    page.clock.run_for(2)
    state = read_state(page, SELF_ATTENTION)
    assert state["W_Q"][1][1] == 13 and state["causal"]
    check_self_attention(state)
    for i, row in enumerate(state["weights"]):
        assert f"Token {i} attends with weights {', '.join(f'{w:.2f}' for w in row)}" in live_text(
            page, SELF_ATTENTION
        )
    tab.close()


# ---- The sentence under each table, and the weights' colours ----

SHOWN_LOOKUP = """view => {
  const root = document.querySelector(view);
  return [[...root.querySelectorAll(".pg-table .pg-number")].map(e => e.textContent),
          root.querySelector(".pg-status").textContent];
}"""


def lookup_numbers(shown) -> tuple[list[str], list[str]]:
    """The weights the table shows, and the weights the sentence under it says, as printed."""
    table, sentence = shown
    return table, re.findall(r"key \d+ (\u2212?\d+\.\d+)", sentence)


def test_the_sentence_and_the_table_change_in_the_same_frame(browser, server):
    """With the clock stopped (no timer and no animation frame runs unless the test lets it), a
    drag and a key press each leave the table and the sentence under it showing the same numbers:
    the state's, at two decimals. The second is read in the very task that made the change."""
    tab = Tab(browser, server, **DESKTOP)
    tab.context.clock.install()
    page = tab.open(PAGE).page
    page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    before = lookup_numbers(page.evaluate(SHOWN_LOOKUP, LOOKUP))
    mouse_drag(page, "Query q", "Query and keys", (-2.0, 1.5))
    table, sentence = lookup_numbers(page.evaluate(SHOWN_LOOKUP, LOOKUP))
    state = read_state(page, LOOKUP)
    assert table == sentence == [f"{w:.2f}" for w in state["weights"][0]] != before[0]
    assert f"Output ({state['output'][0][0]:.2f}, {state['output'][0][1]:.2f})".replace("-", "\u2212") in (
        page.locator(f"{LOOKUP} .pg-status").inner_text()
    )

    changed = page.evaluate(
        """view => {
          const handle = document.querySelector(view + ' [aria-label="Key 2"]');
          handle.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowUp", shiftKey: true, bubbles: true }));
          return ("""
        + SHOWN_LOOKUP
        + """)(view);
        }""",
        LOOKUP,
    )
    table, sentence = lookup_numbers(changed)
    state = read_state(page, LOOKUP)
    assert table == sentence == [f"{w:.2f}" for w in state["weights"][0]]

    # The self-attention view: a typed number changes its weights table and its sentence together.
    page.get_by_label("W_K, row 0, column 1").fill("2")
    state = read_state(page, SELF_ATTENTION)
    view = page.locator(SELF_ATTENTION)
    cells = (
        view.locator("table").filter(has_text=re.compile("^Weights")).locator("tbody td").all_inner_texts()
    )
    sentence = view.locator(".pg-status").inner_text()
    for i, row in enumerate(state["weights"]):
        shown = [f"{w:.2f}" for w in row]
        assert cells[i * len(row) : (i + 1) * len(row)] == shown
        assert f"Token {i} attends with weights {', '.join(shown)}" in sentence
    tab.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_weights_are_coloured_as_the_sites_plots_colour_them(browser, server, scheme):
    """Each weight's cell in matplotlib's viridis, the map attn_ref.plotting draws weights with (dark
    purple for 0, yellow for 1), the same in both schemes; its number 4.5:1 or more against it; a
    masked entry hatched, in no colour of the map."""
    _, ax = plt.subplots()
    assert attention_heatmap([[0.0, 1.0]], ax=ax).images[0].get_cmap().name == "viridis"
    plt.close(ax.figure)
    viridis = colormaps["viridis"]
    visit = Tab(browser, server, **{**DESKTOP, "color_scheme": scheme}).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    view = page.locator(SELF_ATTENTION)
    weights_table = view.locator("table").filter(has_text=re.compile("^Weights")).locator("tbody td")
    styles = "cells => cells.map(c => [getComputedStyle(c).backgroundColor, getComputedStyle(c).color])"
    for change in (None, "W_K, row 1, column 0", "Causal"):
        if change == "Causal":
            view.get_by_role("checkbox", name="Causal").check()
        elif change:
            page.get_by_label(change).fill("3")
        state = read_state(page, SELF_ATTENTION)
        cells = weights_table.evaluate_all(styles)
        flat = [
            (w, allowed)
            for row, mask in zip(state["weights"], state["mask"], strict=True)
            for w, allowed in zip(row, mask, strict=True)
        ]
        assert len(cells) == len(flat)
        for (background, ink), (w, allowed) in zip(cells, flat, strict=True):
            if not allowed:
                assert srgb(background) == (0, 0, 0) and "rgba" in background  # transparent: hatched
                continue
            assert srgb(background) == tuple(round(255 * c) for c in viridis(float(w))[:3]), w
            assert contrast(on(background, background), on(ink, background)) >= 4.5
    # Token 0 sees only itself under the causal mask: a weight of 1, yellow, in both schemes.
    assert state["weights"][0][0] == 1
    assert srgb(cells[0][0]) == (0xFD, 0xE7, 0x25)
    visit.close()


# ---- Accessibility, size and fit ----


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_accessibility_violation_after_a_readers_changes(browser, server, scheme):
    """axe-core on the page once a reader has changed it: a key masked, a key and a value moved, the
    causal mask on, a field with a wrong entry and its message; the planes' labels 4.5:1 on the page."""
    visit = Tab(browser, server, **{**DESKTOP, "color_scheme": scheme}).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    if scheme == "dark":
        page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    assert accessibility_violations(page) == []
    page.locator(LOOKUP).get_by_role("checkbox", name="key 0").click()
    page.get_by_role("slider", name="Key 2").press("Shift+ArrowUp")
    page.get_by_role("slider", name="Value 3").press("Shift+ArrowRight")
    page.locator(SELF_ATTENTION).get_by_role("checkbox", name="Causal").check()
    page.get_by_label("W_K, row 0, column 0").fill("abc")
    page.wait_for_timeout(SETTLE_MS + 50)
    assert accessibility_violations(page) == []
    # axe does not judge SVG text: the planes' labels, against the page's background.
    ratios = page.evaluate("""() => {
      const rgb = c => c.match(/[\\d.]+/g).slice(0, 3).map(Number).map(v => v / 255)
        .map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
      const lum = c => { const [r, g, b] = rgb(c); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
      const back = lum(getComputedStyle(document.body).backgroundColor);
      return [...document.querySelectorAll('.pg-plane text:not(.pg-off *, .pg-off)')].map(t => {
        const fore = lum(getComputedStyle(t).fill);
        return [t.textContent, (Math.max(fore, back) + 0.05) / (Math.min(fore, back) + 0.05)];
      }); }""")
    assert len(ratios) >= 9 and [label for label, ratio in ratios if ratio < 4.5] == []
    assert visit.outside == [] and visit.console_errors == []
    visit.close()


def test_the_playground_adds_little_script_and_style(browser, server):
    """Only this page loads the playground's files, together within the budget; the page too."""
    loaded = {}
    for path in ("", PAGE):
        visit = Tab(browser, server, **DESKTOP).open(path)
        visit.page.wait_for_load_state("networkidle")  # Material's search worker loads after "load"
        loaded[path] = visit.page.evaluate(LOADED_FILES)
        if path == PAGE:
            assert 0 < visit.page.evaluate(PAGE_SIZE) <= PAGE_BUDGET
        visit.close()
    added = {name: size for name, size in loaded[PAGE].items() if name not in loaded[""]}
    assert sorted(added) == ["playground.css", "playground.js"]
    assert 0 < sum(added.values()) <= SCRIPT_AND_STYLE_BUDGET


@pytest.mark.parametrize(
    "mode, options",
    [("light", DESKTOP), ("dark", {**DESKTOP, "color_scheme": "dark"}), ("narrow", PHONE)],
)
def test_no_sideways_scroll_before_and_after_a_readers_changes(browser, server, mode, options):
    visit = Tab(browser, server, **options).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    if mode == "dark":
        page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    assert page.evaluate(SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"playground-interactive-{mode}")
    # Then a reader's changes: a key masked, the query and a value moved, a token edited, a
    # projection's field given a wrong entry, the causal mask on.
    page.locator(LOOKUP).get_by_role("checkbox", name="key 0").click()
    page.get_by_role("slider", name="Query q").press("Shift+ArrowLeft")
    page.get_by_role("slider", name="Value 0").press("Shift+ArrowRight")
    page.get_by_label("token 0, feature 0").fill("2")
    page.get_by_label("W_Q, row 0, column 0").fill("abc")
    page.locator(SELF_ATTENTION).get_by_role("checkbox", name="Causal").check()
    assert page.evaluate(SIDEWAYS_SCROLL) <= 0
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header back at the top of the picture
    screenshot(page, f"playground-interactive-{mode}-changed")
    assert visit.outside == [] and visit.console_errors == []
    visit.close()


# ---- Cause and effect in one view (issue #43): the instructions, the weights, a drawing ----

LAPTOP = {**DESKTOP, "viewport": {"width": 1280, "height": SCREEN}}  # the laptop screen
HEADER = "() => document.querySelector('.md-header').getBoundingClientRect().bottom"
BOX = "e => { const b = e.getBoundingClientRect(); return [b.top, b.bottom, b.left, b.right]; }"


def in_view(page, locator) -> bool:
    """Whether the element is wholly on the screen, below the header."""
    top, bottom, left, right = locator.evaluate(BOX)
    size = page.viewport_size
    return (
        top >= page.evaluate(HEADER) - 1
        and bottom <= size["height"] + 1
        and left >= 0
        and right <= size["width"]
    )


def strip_numbers(page) -> list[str]:
    return page.locator(f"{LOOKUP} .pg-strip-number").all_inner_texts()


def test_what_to_try_comes_above_each_view_and_shares_the_laptops_screen_with_the_planes_and_weights(
    browser, server
):
    """Each view's "What to try" comes before it on the page; on a 1280 x 800 screen scrolled to
    the soft lookup's, the list, both planes and the weights under them are all in sight."""
    visit = Tab(browser, server, **LAPTOP).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    order = page.evaluate("""() => [...document.querySelectorAll("article p, article .playground")]
      .filter(e => e.matches(".playground") || e.textContent.trim() === "What to try:")
      .map(e => e.matches(".playground") ? e.dataset.view : "what to try")""")
    assert order == ["what to try", "lookup", "what to try", "self-attention"]
    instructions = page.locator("article p", has_text="What to try").first
    instructions.evaluate(
        "(p, header) => scrollBy(0, p.getBoundingClientRect().top - header - 8)", page.evaluate(HEADER)
    )
    tries = instructions.locator("xpath=following-sibling::ul[1]")
    parts = [
        instructions,
        tries,
        *(page.get_by_role("group", name=n) for n in ("Query and keys", "Values and the output")),
    ]
    assert [in_view(page, part) for part in [*parts, page.locator(f"{LOOKUP} .pg-strip")]] == [True] * 5
    visit.close()


def test_the_weights_stay_in_sight_while_the_query_is_dragged_on_a_laptop(browser, server):
    """Mid-drag, at 1280 x 800: the weights' strip is on the screen and shows the state's weights."""
    visit = Tab(browser, server, **LAPTOP).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{LOOKUP}[data-state]")
    page.get_by_role("group", name="Query and keys").scroll_into_view_if_needed()
    page.mouse.move(*centre(page, "Query q"))
    page.mouse.down()
    for step in range(1, 7):
        page.mouse.move(*plane_point(page, "Query and keys", 2.0 - 0.5 * step, 1.0), steps=2)
        state = read_state(page, LOOKUP)
        assert in_view(page, page.locator(f"{LOOKUP} .pg-strip")), f"step {step}"
        assert strip_numbers(page) == [f"{w:.2f}" for w in state["weights"][0]]
    page.mouse.up()
    check_lookup(read_state(page, LOOKUP))
    visit.close()


@pytest.mark.parametrize(
    "handle, plane", [("Query q", "Query and keys"), ("Value 0", "Values and the output")]
)
def test_the_weights_stay_in_sight_while_a_finger_drags_on_a_phone(browser, server, handle, plane):
    """At 375 px the planes fill the screen; the weights' strip holds to its bottom edge while a
    finger drags the query (the upper plane) or a value (the lower one), the planes at the top."""
    visit = Tab(browser, server, **PHONE).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{LOOKUP}[data-state]")
    header = page.evaluate(HEADER)
    page.get_by_role("group", name="Query and keys").evaluate(
        f"p => scrollBy(0, p.getBoundingClientRect().top - {header} - 4)"
    )
    cdp = visit.context.new_cdp_session(page)
    x, y = centre(page, handle)
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
    for step in range(1, 9):
        point = {"x": x - 4 * step, "y": y - 3 * step}
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [point]})
        page.wait_for_timeout(20)
        state = read_state(page, LOOKUP)
        assert in_view(page, page.locator(f"{LOOKUP} .pg-strip")), f"step {step}"
        assert in_view(page, page.get_by_role("slider", name=handle, exact=True))
        assert strip_numbers(page) == [f"{w:.2f}" for w in state["weights"][0]]
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    check_lookup(read_state(page, LOOKUP))
    assert visit.outside == [] and visit.console_errors == []
    visit.close()


LINKS = """view => [...document.querySelectorAll(view + " .pg-link")].map(line =>
  [Number(line.dataset.query), Number(line.dataset.key), Number(line.getAttribute("stroke-width")),
   getComputedStyle(line).display !== "none"])"""


def drawn_weights(page) -> np.ndarray:
    """The weights the drawing shows, read back from its lines' widths (0.75 + 12 w; none: masked)."""
    lines = page.evaluate(LINKS, SELF_ATTENTION)
    drawn = np.full((len(TOKENS), len(TOKENS)), np.nan)
    for i, j, width, shown in lines:
        if shown:
            drawn[i, j] = (width - 0.75) / 12
    return drawn


def test_the_three_tokens_weights_are_drawn_and_the_drawing_follows_them(playground):
    """View 2 draws its weights as lines from each query to each key, as wide as the weight, and
    none to a masked key; each change of a projection or the mask redraws them, and they are the
    weights attn_ref computes on the view's inputs."""
    page = playground.page
    assert page.locator(f"{SELF_ATTENTION} .pg-links[data-picture] svg").is_visible()
    drawings = []
    for change in (None, ("W_K, row 0, column 1", "1"), ("token 1, feature 0", "2.5"), "Causal"):
        if change == "Causal":
            page.locator(SELF_ATTENTION).get_by_role("checkbox", name="Causal").check()
        elif change:
            page.get_by_label(change[0]).fill(change[1])
        state = read_state(page, SELF_ATTENTION)
        check_self_attention(state)  # the state's weights are attn_ref's
        drawn = drawn_weights(page)
        allowed = np.array(state["mask"])
        assert np.isnan(drawn[~allowed]).all()  # a masked key: no line
        np.testing.assert_allclose(drawn[allowed], np.array(state["weights"])[allowed], atol=1e-9)
        drawings.append(drawn)
    assert all(not np.array_equal(a, b, equal_nan=True) for a, b in itertools.pairwise(drawings))


CONTROLS = """() => [...document.querySelectorAll(".playground :is(input, button, select, textarea, [role=slider])")]
  .filter(e => e.getClientRects().length > 0)
  .map(e => { const b = e.getBoundingClientRect();
    return [e.getAttribute("aria-label") || (e.labels && e.labels[0] ? e.labels[0].textContent : e.textContent.trim()),
            e.type || e.getAttribute("role"), b.width, b.height, parseFloat(getComputedStyle(e).fontSize)]; })"""


@pytest.mark.parametrize("mode, options", [("laptop", DESKTOP), ("phone", PHONE)])
def test_every_control_is_24_px_square_or_more_and_fields_are_16_px_text(browser, server, mode, options):
    """WCAG 2.2's target size (2.5.8, 24 x 24 px); a field's text at 16 px or more, below which a
    phone's browser zooms the page when the field is focused."""
    visit = Tab(browser, server, **options).open(PAGE)
    page = visit.page
    page.wait_for_selector(f"{SELF_ATTENTION}[data-state]")
    controls = page.evaluate(CONTROLS)
    assert (
        len(controls) >= 5 + 1 + 5 + 5 + 6 + 8 + 1 + 2
    )  # handles, slider, toggles, ..., fields, causal, resets
    assert [(name, w, h) for name, _, w, h, _ in controls if w < 24 or h < 24] == []
    assert [(name, size) for name, kind, _, _, size in controls if kind == "text" and size < 16] == []
    visit.close()


def test_the_page_reads_in_few_words(playground):
    """Its visible prose, counted as the core path's pages are (sitelook.browsing.READING): well
    under half of the 1,783 words #43 found."""
    assert reading(playground.page, SCREEN)["prose_words"] <= PLAYGROUND_WORDS

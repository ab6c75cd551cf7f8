"""Every page of the built site in headless Chromium, offline: math typeset, plots drawn,
copy buttons present, no console errors, no request to another host, and the page's Python
code blocks, copied with the copy buttons, run in order in one fresh interpreter."""

from __future__ import annotations

import functools
import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, BuiltSite
from tests.site_server import serve

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RAW_TEX = re.compile(r"\\\(|\\\[|\$\$")
RAW_INLINE_DOLLAR = re.compile(r"\$[^$\s][^$\n]*\$")

# The visible text of the article, without code, math already typeset and scripts.
VISIBLE_PROSE = """() => {
  const article = document.querySelector("article").cloneNode(true);
  article.querySelectorAll("pre, code, script, style, mjx-container, .zeroclipboard-container").forEach(e => e.remove());
  return {all: article.innerText,
          notebook: [...article.querySelectorAll(".jp-MarkdownOutput")].map(e => e.innerText).join("\\n")};
}"""

PAGE_FACTS = """() => ({
  images: [...document.querySelectorAll("article img")].map(i => ({src: i.src.slice(0, 60), alt: i.alt, ok: i.complete && i.naturalWidth > 0})),
  svgPlots: [...document.querySelectorAll("article svg[role=img]")].map(s => s.getAttribute("aria-label")),
  codeBlocksWithoutCopy: document.querySelectorAll("article pre:has(> code):not(:has(> nav [data-md-type=copy]))").length,
  notebookCells: document.querySelectorAll("article .jp-CodeCell .jp-InputArea").length,
  notebookCopyButtons: document.querySelectorAll("article .jp-CodeCell clipboard-copy").length,
  headings: [...document.querySelectorAll("article h1, article h2, article h3, article h4, article h5, article h6")]
    .map(h => Number(h.tagName[1])),
})"""

# Buttons whose target is a Python block, in page order: Material's (API signatures are not
# code to run) and mkdocs-jupyter's.
PYTHON_COPY_BUTTONS = (
    "article .language-python:not(.doc-signature) [data-md-type=copy], article .jp-CodeCell clipboard-copy"
)


# Open the content tab (pymdownx.tabbed) that holds an element, if any.
SHOW_TAB = """button => {
  const block = button.closest(".tabbed-block");
  if (!block) return;
  const index = [...block.parentElement.children].indexOf(block);
  block.closest(".tabbed-set").querySelectorAll(":scope > .tabbed-labels > label")[index].click();
}"""


def _page_urls(site: BuiltSite) -> list[str]:
    return [
        page.parent.relative_to(site.path).as_posix() + "/" if page.parent != site.path else ""
        for page in site.pages()
    ]


@pytest.fixture(scope="module")
def server(built_site):
    with serve(built_site.path) as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is required in CI: apt-get install chromium")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Visit:
    """One page load, with every request to another host blocked and recorded."""

    def __init__(self, browser, base: str, path: str, **context_options):
        self.context = browser.new_context(**context_options)
        self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        self.page = self.context.new_page()
        self.outside: list[str] = []
        self.console_errors: list[str] = []
        self.page.route("**/*", functools.partial(self._route, base))
        self.page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        self.page.on("pageerror", lambda e: self.console_errors.append(str(e)))
        self.page.goto(base + path, wait_until="networkidle")
        self.page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        self.page.evaluate("() => MathJax.startup.promise")

    def _route(self, base, route):
        if route.request.url.startswith(base) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def copied_python(self) -> list[str]:
        """The text each Python block's copy button puts on the clipboard, in page order."""
        texts = []
        for button in self.page.locator(PYTHON_COPY_BUTTONS).all():
            self.page.evaluate("() => navigator.clipboard.writeText('')")
            button.evaluate(SHOW_TAB)  # a block in a content tab is copied with its tab open
            button.scroll_into_view_if_needed()
            button.click()
            texts.append(self.page.evaluate("() => navigator.clipboard.readText()"))
        return texts

    def close(self):
        self.context.close()


def _pages_from_docs() -> list[str]:
    """URL paths of the pages, from the docs folder, so that test ids are known before the build."""
    docs = ROOT / "docs"
    paths = [""]
    for source in sorted(docs.rglob("*")):
        relative = source.relative_to(docs)
        if source.suffix in {".md", ".py"} and relative.parts[0] != "_hooks" and source.name != "index.md":
            paths.append(relative.with_suffix("").as_posix() + "/")
    return paths


PAGE_PATHS = _pages_from_docs()


def pytest_generate_tests(metafunc):
    if "page_path" in metafunc.fixturenames:
        metafunc.parametrize("page_path", PAGE_PATHS)


def test_every_built_page_is_checked(built_site):
    assert sorted(_page_urls(built_site)) == sorted(PAGE_PATHS)


MODES = {  # name: browser context options
    "light": {"viewport": {"width": 1280, "height": 900}, "color_scheme": "light"},
    "dark": {"viewport": {"width": 1280, "height": 900}, "color_scheme": "dark"},
    "narrow": {"viewport": {"width": 375, "height": 800}, "color_scheme": "light", "is_mobile": True},
}
SEARCHES = {  # what a reader types: the pages with a section that teaches it
    "softmax": ("tutorials/linear_to_self_attention/",),
    "causal mask": ("tutorials/causal_self_attention/",),
    "multi-head": ("concepts/mental_model/", "tutorials/scaled_dot_product_step_by_step/"),
    "positional encoding": ("concepts/mental_model/",),
}
FIRST_VISIT_BUDGET = 1_000_000  # bytes transferred, all requests of a first visit together
NBCONVERT_DEFAULT_ALT = "No description has been provided for this image"
SCREENSHOTS = ROOT / "screenshots"

TRANSFERRED = """() => performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource"))
  .reduce((total, entry) => total + entry.transferSize, 0)"""
SIDEWAYS_SCROLL = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


@pytest.mark.parametrize("mode", MODES)
def test_page_renders_offline(browser, server, page_path, mode):
    visit = Visit(browser, server, page_path, **MODES[mode])
    try:
        prose = visit.page.evaluate(VISIBLE_PROSE)
        facts = visit.page.evaluate(PAGE_FACTS)
        transferred = visit.page.evaluate(TRANSFERRED)
        overflow = visit.page.evaluate(SIDEWAYS_SCROLL)
        SCREENSHOTS.mkdir(exist_ok=True)
        name = page_path.strip("/").replace("/", "_") or "home"
        visit.page.screenshot(path=SCREENSHOTS / f"{name}-{mode}.png", full_page=True)
    finally:
        visit.close()
    assert visit.outside == []
    assert visit.console_errors == []
    assert RAW_TEX.findall(prose["all"]) == [], "math left as raw TeX"
    assert RAW_INLINE_DOLLAR.findall(prose["notebook"]) == [], "notebook math left as raw TeX"
    assert all(image["ok"] for image in facts["images"]), facts["images"]
    assert all(image["alt"] and image["alt"] != NBCONVERT_DEFAULT_ALT for image in facts["images"]), facts[
        "images"
    ]
    assert all(label for label in facts["svgPlots"]), "every plot needs a text alternative"
    assert facts["codeBlocksWithoutCopy"] == 0
    assert facts["notebookCopyButtons"] == facts["notebookCells"]
    source = _source_text(page_path)
    if "attention_heatmap" in source or "figure_to_svg" in source:
        assert facts["images"] or facts["svgPlots"], "the page makes a plot but none is shown"
    levels = facts["headings"]
    assert levels[:1] == [1] and levels.count(1) == 1, "one h1, first"
    assert all(b - a <= 1 for a, b in itertools.pairwise(levels)), f"a heading level is skipped: {levels}"
    assert transferred <= FIRST_VISIT_BUDGET
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px"


def _source_text(page_path: str) -> str:
    stem = ROOT / "docs" / (page_path.rstrip("/") or "index")
    for suffix in (".md", ".py"):
        if stem.with_suffix(suffix).is_file():
            text = stem.with_suffix(suffix).read_text()
            included = re.findall(r'--8<-- "([^":]+)', text)
            return text + "".join((ROOT / path).read_text() for path in included)
    return ""


def test_copied_python_runs_in_page_order(browser, server, page_path, tmp_path):
    visit = Visit(browser, server, page_path)
    try:
        blocks = visit.copied_python()
    finally:
        visit.close()
    if not blocks:
        pytest.skip("no Python code on this page")
    assert all(block.strip() for block in blocks), "a copy button copied nothing"
    script = tmp_path / "copied.py"
    script.write_text("\n\n".join(blocks) + "\n")
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MPLBACKEND": "Agg"},
        timeout=600,
    )
    assert result.returncode == 0, result.stderr


def search_first_hit(page, base: str, query: str) -> str:
    """Type ``query`` into the site's search box; the page of the first result."""
    box = page.locator(".md-search__input")
    box.click()
    box.fill("")
    box.press_sequentially(query)
    first = page.locator(".md-search-result__item > a").first
    first.wait_for()
    return first.get_attribute("href").removeprefix(base).split("?")[0].split("#")[0]


@pytest.mark.parametrize("query", SEARCHES)
def test_search_lands_on_the_page_that_teaches_it(browser, server, query):
    visit = Visit(browser, server, "")
    try:
        assert search_first_hit(visit.page, server, query) in SEARCHES[query]
    finally:
        visit.close()


def test_search_index_leaves_out_printed_output(built_site):
    index = (built_site.path / "search" / "search_index.json").read_text()
    assert "scaled_dot_product_attention: True" not in index  # printed on the pipeline page
    assert "row sums: tensor" not in index  # printed in the pipeline notebook
    assert 'print(\\"row sums:\\"' in index  # the code itself stays

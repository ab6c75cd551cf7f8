"""How the browser tests look at a page: one load per page and width, read once for every check.

A look is everything the checks in tests/browser/test_pages.py read from a page: its prose and facts, its
accessibility findings in each scheme, its drawings, what its copy buttons copy. It is kept under the
digest of the page, every file the page may load, the browser and this code (tests/support/kept.py),
so a page that did not change is not loaded again; `make screenshots` loads every page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from axe_playwright_python.base import AXE_SCRIPT

from sitelook import browsing
from sitelook.browsing import COLOUR_RULES, Tab, accessibility_violations, reading
from sitelook.budgets import SCREEN
from tests.support import kept, readers
from tests.support.readers import SIDEWAYS_SCROLL, screenshot, taking_screenshots

# The visible text of the article, without code, math already typeset and scripts.
VISIBLE_PROSE = """() => {
  const article = document.querySelector("article").cloneNode(true);
  article.querySelectorAll("pre, code, script, style, mjx-container, .zeroclipboard-container").forEach(e => e.remove());
  return article.innerText;
}"""

# Where a heading appears besides the article: the page title, the navigation, the table of contents.
HEADING_TEXTS = """() => [document.title,
  ...[...document.querySelectorAll(".md-nav__link, .md-nav__title")].map(e => e.textContent)].join("\\n")"""

PAGE_FACTS = """() => ({
  images: [...document.querySelectorAll("article img")].map(i => ({src: i.src.slice(0, 60), alt: i.alt, ok: i.complete && i.naturalWidth > 0})),
  svgPlots: [...document.querySelectorAll("article svg[role=img]")].map(s => s.getAttribute("aria-label")),
  codeBlocksWithoutCopy: document.querySelectorAll("article pre:has(> code):not(:has(> nav [data-md-type=copy]))").length,
  untypesetMath: document.querySelectorAll("article .arithmatex").length,
  codeWiderThanItsBlock: [...document.querySelectorAll("article pre > code")]
    .filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent.split("\\n").find(l => l.length > 60) || c.textContent.slice(0, 60)),
  scrollingWithoutCue: [...document.querySelectorAll("article *")]
    .filter(e => e.scrollWidth > e.clientWidth + 1 && ["auto", "scroll"].includes(getComputedStyle(e).overflowX))
    .filter(e => !getComputedStyle(e).backgroundImage.includes("gradient"))
    .map(e => e.tagName + "." + e.className),
  formulas: document.querySelectorAll("article math").length,
  mathFont: [...document.fonts].some(f => f.family.replace(/"/g, "") === "Latin Modern Math" && f.status === "loaded"),
  headings: [...document.querySelectorAll("article h1, article h2, article h3, article h4, article h5, article h6")]
    .map(h => Number(h.tagName[1])),
})"""

# Buttons whose target is a Python block, in page order (API signatures are not code to run).
PYTHON_COPY_BUTTONS = "article .language-python:not(.doc-signature) [data-md-type=copy]"


# Click the copy button of a Python block (the ``index``-th, in page order), as a reader would after
# opening the block (its content tab, and every collapsed block around it such as an exercise's
# solution), and read back what the click put on the clipboard; null when the button is not
# rendered once its block is open. One button per call: a call runs as a user's gesture, which
# lets the page write the clipboard for a few seconds only, fewer than a long page's buttons take
# together on a busy machine.
COPY_PYTHON = """async ([selector, index]) => {
  const button = document.querySelectorAll(selector)[index];
  for (let details = button.closest("details"); details; details = details.parentElement.closest("details")) {
    details.open = true;
  }
  const tab = button.closest(".tabbed-block");
  if (tab) {
    const place = [...tab.parentElement.children].indexOf(tab);
    tab.closest(".tabbed-set").querySelectorAll(":scope > .tabbed-labels > label")[place].click();
  }
  if (button.getClientRects().length === 0) return null;
  await navigator.clipboard.writeText("");
  button.click();
  // The copy handler writes the clipboard asynchronously, later on a busy machine: wait for it
  // (an empty clipboard after two seconds is what the button copied).
  let text = "";
  for (const started = Date.now(); text === "" && Date.now() - started < 2000; ) {
    await new Promise(resolve => setTimeout(resolve, 10));
    text = await navigator.clipboard.readText();
  }
  return text;
}"""


MODES = {  # name: browser context options; the desktop load is looked at in light, then dark
    "desktop": {"viewport": {"width": 1280, "height": 900}, "color_scheme": "light"},
    "narrow": {"viewport": {"width": 375, "height": 800}, "color_scheme": "light", "is_mobile": True},
}
TRANSFERRED = """() => performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource"))
  .reduce((total, entry) => total + entry.transferSize, 0)"""


# Each figure's drawings, as the page shows them now: which one is shown, and any CSS filter on it.
# Each plot's drawing in the reader's scheme, as drawn with every folded block open: the scale
# at which its text is read (the other scheme's drawing is not displayed and has no scale).
PLOT_SCALES = """() => {
  document.querySelectorAll("article details:not([open])").forEach(details => { details.open = true; });
  return [...document.querySelectorAll("article img.plot")].filter(i => i.getClientRects().length > 0)
    .map(i => ({src: new URL(i.src).pathname, scale: i.clientWidth / Number(i.getAttribute("width"))}));
}"""

# With every folded block open (after PLOT_SCALES): each code block that scrolls sideways (its
# first line), and each whose copy (Material's copy button reads the block's innerText, marked
# data-md-copying) is not its text.
CODE_ON_A_PHONE = """() => {
  const blocks = [...document.querySelectorAll("article pre > code")].filter(c => c.getClientRects().length > 0);
  const copied = code => {
    code.setAttribute("data-md-copying", "");
    const text = code.innerText;
    code.removeAttribute("data-md-copying");
    return text.trimEnd();
  };
  return {
    sideways: blocks.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent.split("\\n")[0]),
    miscopied: blocks.filter(c => copied(c) !== c.textContent.trimEnd()).map(c => c.textContent.split("\\n")[0]),
  };
}"""

# What reaches past the right edge of the screen, or scrolls sideways inside the article (a table
# in its scrolling wrapper, cut by the screen's edge), as the page first shows it.
WIDER_THAN_THE_SCREEN = """() => {
  const name = e => e.tagName.toLowerCase() + (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\\s+/).join(".") : "");
  const inside = e => e.getClientRects().length > 0 && !e.closest("details:not([open]) > :not(summary)");
  const width = document.documentElement.clientWidth;
  return [...document.querySelectorAll("article *")].filter(e => inside(e) && e.clientWidth > 1).flatMap(e => {
    const box = e.getBoundingClientRect();
    const found = [];
    if (box.right > width + 1) found.push(`${name(e)} reaches ${Math.round(box.right)} px`);
    if (e.scrollWidth > e.clientWidth + 1 && ["auto", "scroll", "hidden"].includes(getComputedStyle(e).overflowX))
      found.push(`${name(e)} holds ${e.scrollWidth} px in ${e.clientWidth}`);
    return found;
  });
}"""

# The drawings each displayed figure shows (a figure in a folded block displays none).
PLOTS_SHOWN = """() => [...document.querySelectorAll("article .plot-frame")]
  .filter(frame => frame.getClientRects().length > 0).map(frame =>
  [...frame.querySelectorAll("img.plot")].filter(i => i.getClientRects().length > 0)
    .map(i => [...i.classList].filter(c => c !== "plot").join(" ") + " " + getComputedStyle(i).filter))"""

# Each colour the article's code is drawn in, with its block's background ("ink|background"): axe
# cannot judge code, whose background holds the scroll cue's gradients, and reports it incomplete.
# Read with transitions off: Material eases a code block's background into the other scheme's.
CODE_COLOURS = """() => {
  const still = document.head.appendChild(document.createElement("style"));
  still.textContent = "* { transition: none !important; }";
  const colours = [...new Set([...document.querySelectorAll("article pre > code, article pre > code *")]
    .map(e => getComputedStyle(e).color + "|" + getComputedStyle(e.closest("code")).backgroundColor))];
  still.remove();
  return colours;
}"""
# Every finite animation on the page has ended (a scheme's colours eased in).
SETTLED = """() => Promise.all(document.getAnimations()
  .filter(a => a.effect.getComputedTiming().endTime !== Infinity).map(a => a.finished))"""


@dataclass
class Look:
    """What one load of a page showed: everything the tests below check."""

    prose: str
    facts: dict
    headings: str
    transferred: int | None  # bytes of a first visit; measured on the desktop load only
    overflow: int
    outside: list[str]
    scripts: list[str]
    console_errors: list[str]
    copied: list[str | None]
    violations: dict[str, list[str]]  # colour scheme: axe-core's findings (desktop load only)
    plots_shown: dict[str, list[list[str]]]  # colour scheme: each figure's shown drawings (desktop)
    code_colours: dict[str, list[str]]  # colour scheme: CODE_COLOURS (desktop)
    reading: dict  # what a reader meets at this width (sitelook.browsing.READING)
    plot_scales: list[dict] | None = None  # each plot's drawing and its scale (narrow)
    too_wide: list[str] | None = None  # WIDER_THAN_THE_SCREEN (narrow)
    code: dict | None = None  # CODE_ON_A_PHONE (narrow)


def _look(tab: Tab, page_path: str, mode: str) -> Look:
    """Load the page in ``tab``, read its facts, take its screenshots if asked, then copy its code."""
    tab.open(page_path)
    if mode == "desktop":  # every request of the visit: Material's search worker loads after "load"
        tab.page.wait_for_load_state("networkidle")
    transferred = tab.page.evaluate(TRANSFERRED) if mode == "desktop" else None  # before the scroll
    measured = reading(tab.page, SCREEN if mode == "desktop" else MODES[mode]["viewport"]["height"])
    look = Look(
        prose=tab.page.evaluate(VISIBLE_PROSE),
        facts=tab.page.evaluate(PAGE_FACTS),
        headings=tab.page.evaluate(HEADING_TEXTS),
        transferred=transferred,
        overflow=tab.page.evaluate(SIDEWAYS_SCROLL),
        outside=list(tab.outside),
        scripts=list(tab.scripts),
        console_errors=list(tab.console_errors),
        copied=[],
        violations={},
        plots_shown={},
        code_colours={},
        reading=measured,
    )
    name = page_path.strip("/").replace("/", "_") or "home"
    if mode == "desktop":
        screenshot(tab.page, f"{name}-light")
        look.violations["light"] = accessibility_violations(tab.page)
        look.plots_shown["light"] = tab.page.evaluate(PLOTS_SHOWN)
        look.code_colours["light"] = tab.page.evaluate(CODE_COLOURS)
        tab.page.emulate_media(color_scheme="dark")  # Material follows the reader's scheme live
        tab.page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
        tab.page.evaluate(SETTLED)
        screenshot(tab.page, f"{name}-dark")
        look.violations["dark"] = accessibility_violations(tab.page, COLOUR_RULES)
        look.plots_shown["dark"] = tab.page.evaluate(PLOTS_SHOWN)
        look.code_colours["dark"] = tab.page.evaluate(CODE_COLOURS)
        buttons = tab.page.locator(PYTHON_COPY_BUTTONS).count()  # last: it opens blocks and tabs
        look.copied = [tab.page.evaluate(COPY_PYTHON, [PYTHON_COPY_BUTTONS, i]) for i in range(buttons)]
    else:
        screenshot(tab.page, f"{name}-{mode}")
        look.too_wide = tab.page.evaluate(WIDER_THAN_THE_SCREEN)
        look.plot_scales = tab.page.evaluate(PLOT_SCALES)  # it opens the folded blocks
        look.code = tab.page.evaluate(CODE_ON_A_PHONE)
    return look


# What a look depends on besides the page and the files it loads: the code that looks, and the browser.
LOOKING = [Path(__file__), Path(browsing.__file__), Path(readers.__file__)]
# Site files a page does not load: other pages, downloads, the search index (which the search tests read).
NOT_LOADED = re.compile(r"\.(html|ipynb|whl|inv|xml|gz)$|^search/|^assets/plots/")


def _loaded_files(site: Path) -> list[Path]:
    """The site's files a page may load, but for its plots: their names are their contents' digests,
    so the page's own bytes name them."""
    return [
        p
        for p in sorted(site.rglob("*"))
        if p.is_file() and not NOT_LOADED.search(p.relative_to(site).as_posix())
    ]


class PageLooks:
    """``looks(page_path, mode)``: the page's one look in that mode (kept, or loaded now).

    Each desktop load is a first visit, in a tab of its own; the narrow loads share one tab, so they
    fetch the site's scripts, styles and fonts once (about a third less work for the browser).
    """

    def __init__(self, browser, server: str, site: Path):
        self.browser, self.server, self.site = browser, server, site
        self.narrow = Tab(browser, server, **MODES["narrow"])
        shared = [browser.version, AXE_SCRIPT, *(p.read_bytes() for p in LOOKING)]
        self.shared = shared + [p.read_bytes() for p in _loaded_files(site)]
        self.seen: dict[tuple[str, str], Look] = {}

    def __call__(self, page_path: str, mode: str) -> Look:
        if (page_path, mode) not in self.seen:
            self.seen[page_path, mode] = self._kept(page_path, mode)
        return self.seen[page_path, mode]

    def _kept(self, page_path: str, mode: str) -> Look:
        if taking_screenshots():
            return self._load(page_path, mode)
        page = (self.site / page_path / "index.html").read_bytes()
        key = kept.digest([*self.shared, page, page_path, mode])
        return kept.remembered(f"look-{mode}", key, lambda: self._load(page_path, mode))

    def _load(self, page_path: str, mode: str) -> Look:
        if mode == "narrow":
            return _look(self.narrow, page_path, mode)
        desktop = Tab(self.browser, self.server, **MODES["desktop"])
        try:
            return _look(desktop, page_path, mode)
        finally:
            desktop.close()

    def close(self) -> None:
        self.narrow.close()

"""Headless Chromium for the tests and for `make measure`: how it is started, a tab that
records every request to another host (which none resolves), the site's search box, and axe-core's
accessibility findings. Needs the ``test`` extra (Playwright, axe); the build never imports it."""

from __future__ import annotations

import shutil

from axe_playwright_python.base import AXE_SCRIPT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",  # offline: no other host resolves
]


class Tab:
    """A browser tab with a context of its own that records every request to another host.

    Its first page is a reader's first visit; later pages reuse what the tab has cached, as they
    do for a reader who follows a link.
    """

    def __init__(self, browser, base: str, **context_options):
        self.base = base
        self.context = browser.new_context(**context_options)
        self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        self.page = self.context.new_page()
        self.outside: list[str] = []
        self.scripts: list[str] = []  # every script the page loaded
        self.console_errors: list[str] = []
        self.page.on("request", self._record)  # not page.route: Playwright turns the cache off for it
        self.page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        self.page.on("pageerror", lambda e: self.console_errors.append(str(e)))

    def open(self, path: str) -> Tab:
        """Load ``path`` and wait for its fonts; what the last page sent or logged is forgotten."""
        self.outside.clear()
        self.console_errors.clear()
        self.scripts.clear()
        self.page.goto(self.base + path, wait_until="load")  # scripts, styles and images are in
        self.page.evaluate("() => document.fonts.ready")
        return self

    def _record(self, request):
        if not request.url.startswith((self.base, "data:")):
            self.outside.append(request.url)
        if request.resource_type == "script":
            self.scripts.append(request.url)

    def close(self):
        self.context.close()


def search_first_hit(page, base: str, query: str) -> str:
    """Type ``query`` into the site's search box; the page of the first result."""
    box = page.locator(".md-search__input")
    box.click()
    box.fill("")
    page.locator(".md-search-result__item").first.wait_for(state="detached")  # the last query's results
    box.fill(query)  # the whole query at once: no results for a part of it can show up last
    box.press("End")  # Material searches on keyup, which fill() does not send
    first = page.locator(".md-search-result__item > a").first
    first.wait_for()
    return first.get_attribute("href").removeprefix(base).split("?")[0].split("#")[0]


# axe-core's rules for WCAG 2.1 levels A and AA, and two of its best practices: every landmark of a
# kind has a distinct name, and every dialog a name. One run checks them all.
AXE_OPTIONS = {
    "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
    "rules": {"landmark-unique": {"enabled": True}, "aria-dialog-name": {"enabled": True}},
    "resultTypes": ["violations"],
}


# The rules whose verdict depends on colours (axe's category "cat.color" within the tags above): all
# that a page's other colour scheme can change, since the schemes differ in colours alone.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]


def accessibility_violations(page, rules: list[str] | None = None) -> list[str]:
    """axe-core's findings on the page as it is now, by every rule above or only by ``rules``: one
    line per rule and element. axe is put into the page once (half a megabyte of script), then run
    as often as asked."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(AXE_SCRIPT)
    options = AXE_OPTIONS if rules is None else {**AXE_OPTIONS, "runOnly": {"type": "rule", "values": rules}}
    response = page.evaluate("options => axe.run(document, options)", options)
    return [
        f"{violation['id']}: {' '.join(map(str, node['target']))}"
        for violation in response["violations"]
        for node in violation["nodes"]
    ]


# A page as a reader meets it at its width, every plot loaded, folded blocks left folded: the
# height of its article in screens (not the page's, which on a short page is the left navigation's
# length), its visible prose, the share of its visible text that is code or printed
# output, its figures and explanatory diagrams, the longest stretch of its lesson with no picture,
# its stated reading time, its longest visible Python block, and what scrolls sideways.
#
# Words are counted as issue #43's review of the core path counted them: a word is a run of
# non-space characters with a letter or a digit in it; the prose is the article's text in view
# (folds' summaries included) without code, printed output, displayed formulas, images, the
# reading-time line, the download button and the playgrounds' own controls; an inline formula
# counts as one word. A picture is a figure in view (a plot or a diagram, attn_ref.plotting's kind)
# or a live drawing that a playground marks with data-picture; the lesson runs from the top of the
# article to its exercises (or its references).
LOAD_PLOTS = """() => Promise.all([...document.querySelectorAll("img[loading=lazy]")]
  .map(image => { image.loading = "eager"; return image.decode().catch(() => null); }))"""
WIDGETS = ".playground, .pgi, .pgt"  # the three playgrounds' roots: controls, not prose
READING = """screen => {
  const article = document.querySelector("article");
  // Chromium keeps boxes for the content of a closed <details> (content-visibility), so a
  // rendered box is not enough: nothing inside a folded block is shown.
  const shown = e => e.getClientRects().length > 0 && !e.closest("details:not([open]) > :not(summary)");
  const pres = [...article.querySelectorAll("pre")].filter(shown);
  const code = pres.map(p => p.innerText).join("\\n");
  const text = article.innerText;
  const prose = article.cloneNode(true);
  prose.querySelectorAll("pre, .math-display, .math-words, script, style, .reading-time, a[download], " +
    "details:not([open]) > :not(summary), WIDGETS").forEach(e => e.remove());
  prose.querySelectorAll("math").forEach(e => e.replaceWith(" \u2218 "));  // an inline formula: one word
  const overflowing = selector => [...article.querySelectorAll(selector)]
    .filter(e => shown(e) && e.scrollWidth > e.clientWidth + 1).length;
  const frames = [...article.querySelectorAll(".plot-frame")].filter(shown);
  const down = e => e.getBoundingClientRect().top + scrollY;
  const pictures = [...frames, ...[...article.querySelectorAll("[data-picture]")].filter(shown)]
    .map(e => [down(e), down(e) + e.getBoundingClientRect().height]).sort((a, b) => a[0] - b[0]);
  const closing = [...article.querySelectorAll("h2")].find(h => ["exercises", "references"].includes(h.id));
  const end = closing ? down(closing) : down(article) + article.getBoundingClientRect().height;
  let [gap, from] = [0, down(article)];
  for (const [top, bottom] of pictures.filter(([top]) => top < end)) {
    gap = Math.max(gap, top - from);
    from = Math.max(from, bottom);
  }
  gap = Math.max(gap, end - from);
  const stated = article.querySelector(".reading-time");
  return {
    screens: article.getBoundingClientRect().height / screen,
    prose_words: prose.innerText.split(/\\s+/).filter(w => /[\\p{L}\\p{N}]/u.test(w)).length,
    code_share: code.length / Math.max(1, text.length),
    figures: frames.length,
    diagrams: frames.filter(frame => frame.querySelector("img[data-kind=diagram]")).length,
    screens_without_a_picture: gap / screen,
    minutes: stated ? Number(stated.textContent.match(/\\d+/)[0]) : 0,
    first_figure_before_code: (() => {
      const figure = frames[0];
      const block = pres.find(p => p.closest(".language-python"));
      return Boolean(figure) && (!block || Boolean(figure.compareDocumentPosition(block) & Node.DOCUMENT_POSITION_FOLLOWING));
    })(),
    longest_code: Math.max(0, ...pres.filter(p => p.closest(".language-python")).map(p => p.innerText.trimEnd().split("\\n").length)),
    sideways_formulas: overflowing(".math-display"),
    sideways_plots: overflowing(".plot-frame"),
  };
}""".replace("WIDGETS", WIDGETS)


def reading(page, screen_height: int) -> dict:
    """What a reader meets on ``page`` as it is now (see READING), its plots loaded first."""
    page.evaluate(LOAD_PLOTS)
    return page.evaluate(READING, screen_height)

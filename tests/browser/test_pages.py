"""Every page of the built site in headless Chromium, offline: math typeset, plots drawn,
copy buttons present, no console errors, no request to another host, and the page's Python
code blocks, copied with the copy buttons, run in order in one fresh interpreter."""

from __future__ import annotations

import itertools
import re
import shutil

import pytest

from sitelook.browsing import (
    AXE_OPTIONS,
    COLOUR_RULES,
    Tab,
    accessibility_violations,
    search_first_hit,
)
from sitelook.budgets import (
    CORE_PAGE_SCREENS,
    CORE_PATH,
    CORE_PATH_FIGURES,
    CORE_PATH_MINUTES,
    CORE_PATH_PROSE_WORDS,
    CORE_PATH_SCREENS,
    FIRST_VISIT_BUDGET,
    PLAYGROUND,
    SCREENS_WITHOUT_A_PICTURE,
    SEARCHES,
    VISIBLE_CELL_LINES,
    WORDS_PER_DIAGRAM,
)
from sitelook.project import PAGE_PATHS, ROOT
from tests.support.built_site import BuiltSite
from tests.support.colours import contrast, on
from tests.support.drawings import text_sizes
from tests.support.forked import run_python
from tests.support.looks import MODES, PageLooks

pytestmark = pytest.mark.browser

RAW_TEX = re.compile(r"\\\(|\\\[|\$\$")
RAW_INLINE_DOLLAR = re.compile(r"\$[^$\s][^$\n]*\$")  # math that no one typeset


def _page_urls(site: BuiltSite) -> list[str]:
    return [
        page.parent.relative_to(site.path).as_posix() + "/" if page.parent != site.path else ""
        for page in site.pages()
    ]


def pytest_generate_tests(metafunc):
    if "page_path" in metafunc.fixturenames:
        # One worker takes all of a page's tests (make test's --dist loadgroup), so it loads the page once.
        metafunc.parametrize(
            "page_path", [pytest.param(path, marks=pytest.mark.xdist_group(path)) for path in PAGE_PATHS]
        )


def test_every_built_page_is_checked(built_site):
    assert sorted(_page_urls(built_site)) == sorted(PAGE_PATHS)


@pytest.fixture(scope="module")
def looks(browser, server, built_site):
    """``looks(page_path, mode)``: the page's one look in that mode, shared by the tests (kept with
    its digest, see tests/support/looks.py)."""
    looking = PageLooks(browser, server, built_site.path)
    yield looking
    looking.close()


@pytest.mark.parametrize("mode", MODES)
def test_page_renders_offline(looks, page_path, mode):
    look = looks(page_path, mode)
    assert look.outside == []
    assert look.console_errors == []
    assert RAW_TEX.findall(look.prose) + RAW_INLINE_DOLLAR.findall(look.prose) == [], "math left as raw TeX"
    assert RAW_TEX.findall(look.headings) + RAW_INLINE_DOLLAR.findall(look.headings) == [], (
        "raw TeX in the title, the navigation or the table of contents"
    )
    facts = look.facts
    # Math is MathML, typeset when the site was built: no formula is left for a script, none is loaded.
    assert facts["untypesetMath"] == 0
    assert [url for url in look.scripts if re.search(r"mathjax|katex|temml", url, re.I)] == []
    if facts["formulas"]:
        assert facts["mathFont"], "the site's math font did not load"
    assert all(image["ok"] for image in facts["images"]), facts["images"]
    assert all(image["alt"] for image in facts["images"]), facts["images"]
    assert all(label for label in facts["svgPlots"]), "every plot needs a text alternative"
    assert facts["codeBlocksWithoutCopy"] == 0
    source = _source_text(page_path)
    if "attention_heatmap" in source or "figure_to_svg" in source:
        assert facts["images"] or facts["svgPlots"], "the page makes a plot but none is shown"
    levels = facts["headings"]
    assert levels[:1] == [1] and levels.count(1) == 1, "one h1, first"
    assert all(b - a <= 1 for a, b in itertools.pairwise(levels)), f"a heading level is skipped: {levels}"
    if mode == "desktop":
        assert look.transferred <= FIRST_VISIT_BUDGET
    assert look.overflow <= 0, f"the page scrolls sideways by {look.overflow} px"
    # Whatever scrolls sideways inside the column shows it; at 1280 px, code never has to.
    assert facts["scrollingWithoutCue"] == []
    if mode == "desktop":
        assert facts["codeWiderThanItsBlock"] == [], "code lines wider than the column at 1280 px"


def _source_text(page_path: str) -> str:
    stem = ROOT / "docs" / (page_path.rstrip("/") or "index")
    for suffix in (".md", ".py"):
        if stem.with_suffix(suffix).is_file():
            text = stem.with_suffix(suffix).read_text()
            included = re.findall(r'--8<-- "([^":]+)', text)
            return text + "".join((ROOT / path).read_text() for path in included)
    return ""


def test_tick_labels_are_11_px_or_more_on_a_phone(looks, page_path, built_site):
    """A plot's axis tick labels, as drawn at 375 px: font size (pt, 4/3 px each) times the scale."""
    for plot in looks(page_path, "narrow").plot_scales:
        svg = (built_site.path / plot["src"].lstrip("/")).read_text()
        sizes = [size for _, size, tick in text_sizes(svg) if tick]
        if sizes:
            assert min(sizes) * 4 / 3 * plot["scale"] >= 11, plot["src"]


TEACHING = [path for path in PAGE_PATHS if path and not path.startswith(("reference/", "notation/"))]


def test_a_teaching_page_shows_no_long_code_and_reads_mostly_as_prose(looks, page_path):
    """What a reader sees unfolded is mostly prose, pictures and results: no visible code block
    longer than the limit, and code and printed output under half of the visible text."""
    if page_path not in TEACHING:
        pytest.skip("a reference page: code is what it shows")
    measured = looks(page_path, "desktop").reading
    assert measured["longest_code"] <= VISIBLE_CELL_LINES
    assert measured["code_share"] < 0.5


def test_a_core_page_opens_with_a_picture_and_nothing_on_it_scrolls_sideways_on_a_phone(looks, page_path):
    if page_path not in CORE_PATH:
        pytest.skip("not on the core path")
    desktop, phone = looks(page_path, "desktop").reading, looks(page_path, "narrow").reading
    assert desktop["figures"] >= 4 and desktop["first_figure_before_code"]
    assert phone["sideways_formulas"] == phone["sideways_plots"] == 0


def test_code_wraps_on_a_phone_and_copies_as_it_is(looks, page_path):
    """At 375 px no code block scrolls sideways, folded ones opened (a long line wraps, see
    extra.css), and what the copy button copies is still the block's text, line for line."""
    code = looks(page_path, "narrow").code
    assert code["sideways"] == [], "code that scrolls sideways on a phone"
    assert code["miscopied"] == [], "a copy that is not the code"


# Issue #43's limits for the core path (sitelook/budgets.py).


def test_a_core_page_is_short_and_pictured_throughout(looks, page_path):
    """At most so many screens of a 1280 x 800 laptop, at least one explanatory diagram, and no
    stretch of the lesson longer than so many screens without a picture."""
    if page_path not in CORE_PATH:
        pytest.skip("not on the core path")
    measured = looks(page_path, "desktop").reading
    assert measured["screens"] <= CORE_PAGE_SCREENS, measured
    assert measured["diagrams"] >= 1, measured
    assert measured["screens_without_a_picture"] <= SCREENS_WITHOUT_A_PICTURE, measured


@pytest.mark.xdist_group("core path")
def test_the_core_path_is_short_and_pictured(looks):
    """The five pages together: at most so many words of prose, at least so many pictures."""
    totals = {"prose_words": 0, "figures": 0}
    for path in CORE_PATH:
        measured = looks(path, "desktop").reading
        for name in totals:
            totals[name] += measured[name]
    assert totals["prose_words"] <= CORE_PATH_PROSE_WORDS and totals["figures"] >= CORE_PATH_FIGURES, totals


@pytest.mark.xdist_group("core path")
def test_the_core_path_and_its_playground_take_45_minutes_and_a_diagram_every_250_words(looks):
    measured = [looks(path, "desktop").reading for path in (*CORE_PATH, PLAYGROUND)]
    screens, minutes = sum(m["screens"] for m in measured), sum(m["minutes"] for m in measured)
    words, diagrams = sum(m["prose_words"] for m in measured), sum(m["diagrams"] for m in measured)
    assert screens <= CORE_PATH_SCREENS and minutes <= CORE_PATH_MINUTES, (screens, minutes)
    assert words <= WORDS_PER_DIAGRAM * diagrams, (words, diagrams)


def test_the_home_pages_map_fits_a_phone(looks):
    """At 375 px nothing on the home page reaches past the screen's edge or scrolls sideways inside
    it (a table cut by the edge, in its scrolling wrapper), whatever the map's layout."""
    assert looks("", "narrow").too_wide == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_each_figure_shows_the_drawing_of_the_scheme_unfiltered(looks, page_path, scheme):
    """A figure is drawn for each scheme (attn_ref.plotting.figure_to_svg); the page shows one
    drawing of it, the one of the reader's scheme, never a drawing turned around by a filter."""
    for shown in looks(page_path, "desktop").plots_shown[scheme]:
        assert shown == [f"plot-{scheme} none"], shown


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_code_is_drawn_at_4_5_to_1_or_more_in_both_schemes(looks, page_path, scheme):
    """Every colour of code (each kind of token, printed output, folded code too) against its block's
    background, WCAG 2.1 AA's 4.5:1; a translucent colour as it shows over the block."""
    for pair in looks(page_path, "desktop").code_colours[scheme]:
        ink, background = pair.split("|")
        assert contrast(on(ink, background), on(background, background)) >= 4.5, pair


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_accessibility_violation(looks, page_path, scheme):
    """axe-core finds nothing against WCAG 2.1 A and AA, nor against its two best practices above:
    every rule in the light scheme; in the dark one, whose page differs in colours alone, the rules
    that read colours."""
    assert looks(page_path, "desktop").violations[scheme] == []


def test_copied_python_is_code_that_runs_in_page_order(
    looks, page_path, executed_tutorials, built_site, tmp_path
):
    """What a reader copies, block after block, runs in one fresh interpreter. A tutorial's blocks
    are its code cells, which ran top to bottom in a fresh kernel when it was executed: the copies
    are compared with them (running them again would train its models again). A page's blocks
    are run, in a folder that holds the files published beside the page (a block's data, as its
    title's link gives them to the reader)."""
    blocks = looks(page_path, "desktop").copied
    if not blocks:
        pytest.skip("no Python code on this page")
    assert None not in blocks, "a copy button is not shown even with its block open"
    assert all(block.strip() for block in blocks), "a copy button copied nothing"
    tutorial = page_path.removeprefix("tutorials/").rstrip("/")
    if page_path.startswith("tutorials/") and tutorial in executed_tutorials:
        ran = [cell.source.strip() for cell in executed_tutorials[tutorial].code_cells]
        assert [block.strip() for block in blocks] == ran
        return
    for published in (built_site.path / page_path).iterdir():
        if published.is_file() and published.name != "index.html":
            shutil.copy2(published, tmp_path / published.name)
    script = tmp_path / "copied.py"
    script.write_text("\n\n".join(blocks) + "\n")
    finished = run_python(script, cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr


@pytest.fixture(scope="module")
def home(browser, server):
    visit = Tab(browser, server).open("")
    yield visit
    visit.close()


@pytest.mark.parametrize("query", SEARCHES)
def test_search_lands_on_the_page_that_teaches_it(home, server, query):
    assert search_first_hit(home.page, server, query) in SEARCHES[query]


SEARCH_INDEX_REQUESTS = """() => performance.getEntriesByType("resource")
  .filter(entry => entry.name.endsWith("/search/search_index.json")).length"""


def test_the_search_index_is_fetched_when_a_reader_searches_not_on_every_visit(browser, server):
    """docs/javascripts/search_on_demand.js holds back Material's request for the index, the largest
    file of a first visit, until the search is opened, or the address carries a query."""
    tab = Tab(browser, server).open("")
    tab.page.wait_for_load_state("networkidle")
    before = tab.page.evaluate(SEARCH_INDEX_REQUESTS)
    hit = search_first_hit(tab.page, server, "KV cache")
    after = tab.page.evaluate(SEARCH_INDEX_REQUESTS)
    tab.open("?q=rotary")  # a search shared as a link searches at once
    shared = tab.page.locator(".md-search-result__item > a").first
    shared.wait_for()
    shared_hit = shared.get_attribute("href").removeprefix(server).split("?")[0].split("#")[0]
    tab.close()
    assert (before, after) == (0, 1)
    assert hit in SEARCHES["KV cache"]
    assert shared_hit in SEARCHES["rotary"]


def test_search_index_leaves_out_printed_output_and_examples_keeps_prose_and_api_summaries(built_site):
    index = (built_site.path / "search" / "search_index.json").read_text()
    assert "scaled_dot_product_attention: True" not in index  # printed on the pipeline page
    assert "row sums: tensor" not in index  # printed in the pipeline notebook
    assert 'print(\\"row sums:\\"' not in index  # the example's code
    assert "Numerically stable softmax" in index  # an API object's summary
    assert "between numerator and denominator" not in index  # the rest of its docstring
    assert "softmax acts on each row" in index  # the pipeline page's prose
    # Math is searched by its words, not by MathML flattened into runs of letters.
    assert "\\u2061" not in index and "⁡" not in index  # MathML's invisible function application
    assert "sqrt(d_k)" in index


def test_the_accessibility_check_reports_what_it_looks_for(browser, server):
    """The check behind ``violations == []``: faint text, an unnamed dialog and two landmarks of a
    kind with one name are each reported, in one run."""
    tab = Tab(browser, server).open("")
    tab.page.set_content(
        '<main><p style="color:#bbb;background:#fff">faint</p><div role="dialog">x</div>'
        '<nav aria-label="a">a</nav><nav aria-label="a">b</nav></main>'
    )
    found = {line.split(":")[0] for line in accessibility_violations(tab.page)}
    in_colour = {line.split(":")[0] for line in accessibility_violations(tab.page, COLOUR_RULES)}
    # The dark scheme is checked by the rules that read colours: every one axe has among our tags.
    colour_rules = tab.page.evaluate(
        "tags => axe.getRules(tags).filter(rule => rule.tags.includes('cat.color')).map(rule => rule.ruleId)",
        AXE_OPTIONS["runOnly"]["values"],
    )
    tab.close()
    assert found >= {"color-contrast", "aria-dialog-name", "landmark-unique"}
    assert in_colour == {"color-contrast"}
    assert sorted(colour_rules) == sorted(COLOUR_RULES)


CDN_FILE = "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"


def test_a_request_to_another_host_is_recorded_and_fails(browser, server):
    """The check behind ``outside == []`` above: it would see a page that reaches for a CDN."""
    tab = Tab(browser, server).open("")
    outcome = tab.page.evaluate("url => fetch(url).then(() => 'fetched', () => 'failed')", CDN_FILE)
    tab.close()
    assert tab.outside == [CDN_FILE]
    assert outcome == "failed"

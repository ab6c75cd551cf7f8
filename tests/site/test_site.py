"""The site builds strictly, offline, with every tutorial downloadable."""

import ast
import gzip
import re
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml
from fontTools.ttLib import TTFont

from attn_ref.plotting import PLOT_MIME
from scripts.math_font import characters_in_math
from sitebuild import execution as tutorial_execution
from sitebuild.checklist import nav_files, teaching_pages
from sitebuild.code_blocks import SECTION_MARKER
from sitelook.budgets import PAGE_BUDGET
from sitelook.project import EXEC_BLOCK, ROOT, TUTORIALS

TUTORIAL_NAMES = sorted(p.stem for p in TUTORIALS.glob("*.py"))
# Loads of another host: scripts, stylesheets, images, fonts, frames (links to read, and the page's
# canonical address, are not loads).
OUTSIDE_LOAD = re.compile(
    r'<(?:script|link(?![^>]*rel="canonical")|img|iframe|source)\b[^>]*\b(?:src|href)="(?:https?:)?//', re.I
)
LINK_TARGET = re.compile(r"\]\([^)\s]*\)")


def test_strict_build_has_no_warnings_of_our_own(built_site):
    assert [line for line in built_site.log.splitlines() if "WARNING" in line] == []


def test_the_build_says_how_it_came_by_every_tutorials_execution(built_site):
    """sitebuild.progress's first line: how many tutorials it executes and how many were kept (the
    lines per tutorial are tested in tests/sitebuild/test_progress.py)."""
    (line,) = re.findall(r"^tutorials: .*$", built_site.log, flags=re.M)
    executed, kept, all_kept = re.fullmatch(
        r"tutorials: (?:(\d+) to execute, (\d+) kept|all (\d+) kept) \(.*\)", line
    ).groups()
    total = int(all_kept) if all_kept else int(executed) + int(kept)
    assert total == len(list(TUTORIALS.glob("*.py")))


def test_every_nav_entry_is_built(built_site):
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    for source in nav_files(config["nav"]):
        page = source.rsplit(".", 1)[0].removesuffix("index")
        assert (built_site.path / page / "index.html").is_file(), source


def test_no_page_loads_anything_from_another_host(built_site):
    offenders = {
        str(page.relative_to(built_site.path)): OUTSIDE_LOAD.findall(page.read_text())
        for page in built_site.pages()
    }
    assert {page: found for page, found in offenders.items() if found} == {}


def test_math_is_typeset_and_its_font_served_by_the_site(built_site):
    """Every formula is MathML, and every character the formulas use is in the math font the site
    ships (made by scripts/math_font.py: run it again when this fails)."""
    assert (built_site.path / "assets" / "stylesheets" / "temml.css").is_file()
    font = built_site.path / "assets" / "fonts" / "latinmodern-math.woff2"
    assert (built_site.path / "assets" / "fonts" / "Temml.woff2").is_file()
    covered = set(TTFont(font).getBestCmap())
    missing = {}
    for page in built_site.pages():
        html = page.read_text()
        assert 'class="arithmatex"' not in html, page
        used = characters_in_math(html)
        missing.update({c: str(page.relative_to(built_site.path)) for c in used if ord(c) not in covered})
    assert missing == {}


@pytest.mark.parametrize("name", TUTORIAL_NAMES)
def test_tutorial_page_offers_its_notebook(built_site, name):
    page = (built_site.path / "tutorials" / name / "index.html").read_text()
    assert re.search(rf'<a [^>]*download[^>]*href="\.\./{name}\.ipynb"', page)
    assert (built_site.path / "tutorials" / f"{name}.ipynb").is_file()


@pytest.mark.parametrize("name", TUTORIAL_NAMES)
def test_the_download_is_the_executed_tutorial(built_site, name):
    """The install note first, then the executed cells: code and outputs as they ran, but a plot's
    pair of drawings for the site's two schemes, which Jupyter cannot show, left out (Jupyter shows
    its light drawing, image/svg+xml), and text with only its link targets changed (made absolute
    by sitebuild.downloads, tested on its own)."""
    source = TUTORIALS / f"{name}.py"
    # today's prose, with the outputs of the kept execution (an edit of prose alone runs nothing)
    kept = tutorial_execution.notebook(source, tutorial_execution.executed_notebook(source, ROOT))
    download = nbformat.read(built_site.path / "tutorials" / f"{name}.ipynb", as_version=4)
    install, *cells = download.cells
    assert install.cell_type == "markdown" and "%pip install " in install.source
    assert [c.cell_type for c in cells] == [c.cell_type for c in kept.cells]
    for got, executed in zip(cells, kept.cells, strict=True):
        if executed.cell_type == "code":
            for output in executed.outputs:
                if PLOT_MIME in output.get("data", {}):
                    assert "image/svg+xml" in output.data
                    del output.data[PLOT_MIME]
            assert got == executed
        else:
            assert LINK_TARGET.sub("]()", got.source) == LINK_TARGET.sub("]()", executed.source)


@pytest.mark.parametrize("name", TUTORIAL_NAMES)
def test_the_download_is_the_tutorial_run_top_to_bottom(executed_tutorials, name):
    """Same cells as the source, in order, every code cell run once, in order, in one kernel."""
    source = jupytext.read(TUTORIALS / f"{name}.py")
    notebook = executed_tutorials[name].notebook
    assert [(c.cell_type, c.source) for c in notebook.cells] == [
        (c.cell_type, c.source) for c in source.cells
    ]
    counts = [cell.execution_count for cell in notebook.cells if cell.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1))


@pytest.mark.parametrize("name", TUTORIAL_NAMES)
def test_solutions_and_plotting_code_are_collapsed_in_the_download_too(executed_tutorials, name):
    """The page folds them (sitebuild.tutorial_pages, tested on its own); Jupyter reads the same
    from the downloaded notebook's cell metadata."""
    for cell in executed_tutorials[name].code_cells:
        tags = cell.metadata.get("tags", [])
        if "solution" in tags:
            assert cell.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
        elif "plot" in tags:
            assert cell.metadata["jupyter"] == {"source_hidden": True}


def test_cells_that_measure_are_tagged(executed_tutorials):
    """A cell that times code or weighs its memory is tagged 'measured', so that `make measure`
    leaves it out when it compares two builds (sitebuild.tutorial_pages marks it on the page)."""
    for name, tutorial in executed_tutorials.items():
        for cell in tutorial.code_cells:
            if re.search(r"cpu_time_ms\(|peak_memory\(", cell.source):
                assert "measured" in cell.metadata.get("tags", []), (name, cell.source[:60])


def _shows_a_value_by_name(cell_source: str) -> bool:
    """The cell ends with a bare name or a part of one (``weights``, ``pool.tables["a"]``): its value
    is what the cell is there to show. A call (``pool.tables["c"].pop()``) is there for what it does,
    and its return value, shown, is an accident."""
    last = ast.parse(cell_source).body[-1]
    if not isinstance(last, ast.Expr):
        return False
    shown = last.value.elts if isinstance(last.value, ast.Tuple) else [last.value]
    return all(isinstance(e, ast.Name | ast.Attribute | ast.Subscript) for e in shown) and not any(
        isinstance(node, ast.Call) for node in ast.walk(last)
    )


def test_no_cell_shows_a_value_it_did_not_mean_to_show(executed_tutorials):
    """A cell's result is shown on the page under its code. A plot, a table or Markdown is shown on
    purpose; a plain value only when the cell ends by naming it. A method called for its effect on
    the last line (``list.pop()``, ``cache.reserve(...)``) would show its return value, a stray
    number under the cell."""
    stray = []
    for name, tutorial in executed_tutorials.items():
        for cell in tutorial.code_cells:
            for output in cell.outputs:
                if output.output_type != "execute_result" or set(output.data) - {"text/plain"}:
                    continue  # a plot, a table, Markdown: shown on purpose
                if not _shows_a_value_by_name(cell.source):
                    stray.append((name, cell.source.strip().splitlines()[-1], output.data["text/plain"]))
    assert stray == []


def test_the_stray_value_check_tells_a_name_from_a_call():
    assert _shows_a_value_by_name("weights = f(x)\nweights")
    assert _shows_a_value_by_name('pool.tables["a"]')
    assert not _shows_a_value_by_name('pool.tables["c"].pop()')
    assert not _shows_a_value_by_name('cache.reserve("a", 6)')
    assert not _shows_a_value_by_name("x = 1")


def test_no_page_is_heavier_than_the_budget(built_site):
    """Counted as a reader downloads it: MathML's markup is long and compresses about six to one."""
    sizes = {
        str(page.relative_to(built_site.path)): len(gzip.compress(page.read_bytes(), mtime=0))
        for page in built_site.pages()
    }
    assert {page: size for page, size in sizes.items() if size > PAGE_BUDGET} == {}


def test_every_shown_executed_block_is_a_snippet_titled_with_a_link_to_the_whole_script(built_site):
    """A reader goes from a number on a page to the script that printed it in one click: the block's
    title names the script and links to it, published beside the page, and it runs on its own."""
    for page in sorted((ROOT / "docs").rglob("*.md")):
        blocks = [
            (indent, body)
            for indent, options, body in EXEC_BLOCK.findall(page.read_text())
            if " source=" in options
        ]
        for indent, body in blocks:
            assert re.fullmatch(rf'({indent}--8<-- "snippets/[^"]+"\n)+', body), (
                f"{page}: code not from a snippet:\n{body}"
            )
        relative = page.relative_to(ROOT / "docs").with_suffix("")
        built = built_site.path / (relative.parent if relative.name == "index" else relative)
        html = (built / "index.html").read_text()
        titles = re.findall(
            r'<span class="filename"><a href="([^"]+)" title="[^"]+">([^<]+)</a></span>', html
        )
        assert len(titles) == len(blocks), page
        shown = {
            Path(path).name: path for _, body in blocks for path in re.findall(r'"(snippets/[^":]+)', body)
        }
        for href, name in titles:
            published = (built / href).read_text()
            assert published == SECTION_MARKER.sub("", (ROOT / shown[name]).read_text()), (page, href)


def test_every_page_links_to_the_notation_table(built_site):
    notation = built_site.path / "notation" / "index.html"
    missing = []
    for page in built_site.pages():
        article = re.search(r"<article.*?</article>", page.read_text(), re.S)[0]
        if page != notation and not re.search(r'href="[^"]*notation/(#[^"]*)?"', article):
            missing.append(str(page.relative_to(built_site.path)))
    assert missing == []


PLOT_IMAGE = re.compile(r'<img class="plot plot-(light|dark)"[^>]*? src="([^"]+)"')
RASTER = re.compile(r'xlink:href="data:image/png;base64,([^"]+)"')


def test_every_figure_has_both_drawings_and_its_colour_mapped_data_is_the_same_in_both(built_site):
    """A colour means the same value in both schemes: what a figure draws through a colour map (a
    heatmap's cells, its colour bar) is the same raster image in its light and its dark drawing."""
    figures = 0
    for page in built_site.pages():
        drawings = PLOT_IMAGE.findall(page.read_text())
        schemes = [scheme for scheme, _ in drawings]
        assert schemes == ["light", "dark"] * (len(drawings) // 2), page
        for (_, light), (_, dark) in zip(drawings[::2], drawings[1::2], strict=True):
            rasters = [RASTER.findall((page.parent / src).resolve().read_text()) for src in (light, dark)]
            assert rasters[0] == rasters[1], (page, light)
            figures += 1
    assert figures > 20


def _teaching_pages() -> list[str]:
    return teaching_pages(yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)["nav"])


def test_the_home_page_maps_every_teaching_page_with_its_minutes(built_site):
    home = (built_site.path / "index.html").read_text()
    mapped = re.findall(r'<span class="page-minutes" data-page="([^"]+)">(\d+)</span>', home)
    assert sorted(page for page, _ in mapped) == sorted(_teaching_pages())
    assert 'class="page-minutes" data-page="' not in re.sub(r'data-page="[^"]+">\d+<', "", home)  # all filled
    for page, minutes in mapped:
        shown = (built_site.path / page.removesuffix(".md") / "index.html").read_text()
        assert f'<p class="reading-time">About {minutes} min to read' in shown


# A teaching page argues with no text its reader cannot see (design.md, "Anatomy of a page").
UNSEEN_SOURCE = re.compile(
    r"\b(the original (notebook|post|document)s?|the blog post|ChatGPT|the post's|the notebook's author)\b",
    re.I,
)
CONTINUES_LABEL = re.compile(
    r'<p class="code-continues">Continues [^\n]*?</p>\n(?=<div id="code-\d+" class="language-python highlight")'
)


@pytest.mark.parametrize("page", [page for page in _teaching_pages() if not page.startswith("playground")])
def test_a_teaching_page_ends_with_exercises_references_and_next(built_site, page):
    """Exercises, then references, then a "Next:" pointer as the last paragraph; no unseen source."""
    html = (built_site.path / page.removesuffix(".md") / "index.html").read_text()
    article = html[html.index("<article") : html.index("</article>")]
    headings = re.findall(r'<h2 id="([^"]+)"', article)
    assert "exercises" in headings and "references" in headings, headings
    assert headings.index("exercises") < headings.index("references"), headings
    ending = article[article.index('id="references"') :]
    # A "measured" cell (its CPU time) may close a page after "Next:". The "Continues ..." line the build
    # writes just above a code block (sitebuild/code_blocks.py) is that block's label, not a paragraph.
    ending = re.sub(CONTINUES_LABEL, "", ending)
    paragraphs = re.findall(r"<p\b[^>]*>(.*?)</p>", ending, re.S)
    assert paragraphs and re.sub(r"<[^>]+>", "", paragraphs[-1]).strip().startswith("Next:"), paragraphs[-1:]
    assert UNSEEN_SOURCE.findall(re.sub(r"<[^>]+>", " ", article)) == []

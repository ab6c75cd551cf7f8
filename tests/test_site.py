"""The site builds strictly, offline, with every tutorial downloadable."""

import re

import jupytext
import pytest
import yaml

from tests.conftest import ROOT
from tests.site_tools import EXEC_BLOCK, TUTORIALS

TUTORIAL_NAMES = sorted(p.stem for p in TUTORIALS.glob("*.py"))
# Loads of another host: scripts, stylesheets, images, fonts, frames (links to read, and the page's
# canonical address, are not loads).
OUTSIDE_LOAD = re.compile(
    r'<(?:script|link(?![^>]*rel="canonical")|img|iframe|source)\b[^>]*\b(?:src|href)="(?:https?:)?//', re.I
)


def _nav_files(items):
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        yield from _nav_files(value) if isinstance(value, list) else [value]


def test_strict_build_has_no_warnings_of_our_own(built_site):
    assert [line for line in built_site.log.splitlines() if "WARNING" in line] == []


def test_every_nav_entry_is_built(built_site):
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    for source in _nav_files(config["nav"]):
        page = source.rsplit(".", 1)[0].removesuffix("index")
        assert (built_site.path / page / "index.html").is_file(), source


def test_no_page_loads_anything_from_another_host(built_site):
    offenders = {
        str(page.relative_to(built_site.path)): OUTSIDE_LOAD.findall(page.read_text())
        for page in built_site.pages()
    }
    assert {page: found for page, found in offenders.items() if found} == {}


def test_math_is_served_by_the_site(built_site):
    assert (built_site.path / "assets" / "mathjax" / "tex-chtml.js").is_file()
    assert list(
        (built_site.path / "assets" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff")
    )


@pytest.mark.parametrize("name", TUTORIAL_NAMES)
def test_tutorial_page_offers_its_notebook(built_site, name):
    page = (built_site.path / "tutorials" / name / "index.html").read_text()
    assert f'href="{name}.ipynb" download' in page
    assert (built_site.path / "tutorials" / name / f"{name}.ipynb").is_file()


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
def test_each_solution_is_collapsed_on_the_page_and_in_the_download(built_site, executed_tutorials, name):
    cells = executed_tutorials[name].notebook.cells
    solutions = [cell for cell in cells if "solution" in cell.metadata.get("tags", [])]
    assert all(cell.metadata["jupyter"]["source_hidden"] for cell in solutions)
    page = (built_site.path / "tutorials" / name / "index.html").read_text()
    blocks = re.findall(r'<details class="success"><summary>Solution</summary>\s*<div class="([^"]*)"', page)
    assert len(blocks) == len(solutions) and all("celltag_solution" in block for block in blocks)


@pytest.mark.parametrize("name", TUTORIAL_NAMES)
def test_plotting_code_is_collapsed_and_its_plot_shown(built_site, executed_tutorials, name):
    """A cell that draws a plot is tagged 'plot': its code collapsed, its plot in view."""
    cells = executed_tutorials[name].code_cells
    plotting = [cell for cell in cells if "figure_to_svg(" in cell.source]
    assert all("plot" in cell.metadata.get("tags", []) for cell in plotting)
    tagged = [cell for cell in cells if "plot" in cell.metadata.get("tags", [])]
    assert all(cell.metadata["jupyter"] == {"source_hidden": True} for cell in tagged)
    page = (built_site.path / "tutorials" / name / "index.html").read_text()
    collapsed = re.findall(
        r'<details class="example"><summary>Plotting code</summary>\s*<div class="jp-Cell-inputWrapper".*?</details>'
        r'\s*<div class="jp-Cell-outputWrapper">.*?<img class="plot"',
        page,
        re.S,
    )
    assert len(collapsed) == len(tagged)


def test_cells_that_measure_are_tagged_and_marked_on_their_pages(built_site, executed_tutorials):
    """A cell that times code or weighs its memory is tagged 'measured'. `make measure` compares two
    clean builds outside those cells, found on the page by the class mkdocs-jupyter gives them."""
    counts = {}
    for name, tutorial in executed_tutorials.items():
        tagged = [cell for cell in tutorial.code_cells if "measured" in cell.metadata.get("tags", [])]
        measuring = [
            cell for cell in tutorial.code_cells if re.search(r"cpu_time_ms\(|peak_memory\(", cell.source)
        ]
        assert all(cell in tagged for cell in measuring), name
        page = (built_site.path / "tutorials" / name / "index.html").read_text()
        assert all(f'celltag_measured" id="cell-id={cell.id}"' in page for cell in tagged), name
        counts[name] = len(tagged)
    assert {name: count for name, count in counts.items() if count} == {
        "efficient_attention": 5,
        "kv_cache": 2,
    }


PAGE_BUDGET = 150 * 1024  # bytes of HTML, the largest page


def test_no_page_is_heavier_than_the_budget(built_site):
    sizes = {str(page.relative_to(built_site.path)): page.stat().st_size for page in built_site.pages()}
    assert {page: size for page, size in sizes.items() if size > PAGE_BUDGET} == {}


def test_the_site_is_published_only_from_a_commit_whose_whole_suite_passed():
    """The published site is built in the job that ran the whole suite, after it passed."""
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())["jobs"]
    (name,) = [name for name, job in jobs.items() if "needs" not in job]
    steps = [step.get("run") or step.get("uses", "") for step in jobs[name]["steps"]]
    tests, build_step = steps.index(".ci/run"), steps.index("make build")
    upload = next(i for i, step in enumerate(steps) if step.startswith("actions/upload-pages-artifact"))
    assert tests < build_step < upload
    assert set(jobs) == {name, "deploy"} and jobs["deploy"]["needs"] == name
    readme_commands = re.findall(r"^(make \w+)\s+#", (ROOT / "README.md").read_text(), flags=re.M)
    assert readme_commands == ["make serve", "make test"]
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(), flags=re.M)


def test_every_shown_executed_block_is_a_snippet_titled_with_its_path(built_site):
    """A reader goes from a number on a page to the file that printed it, and its test, in one step."""
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
        built = relative.parent if relative.name == "index" else relative
        html = (built_site.path / built / "index.html").read_text()
        titles = re.findall(r'<span class="filename">(snippets/[^<]+)</span>', html)
        assert len(titles) == len(blocks) and all((ROOT / title).is_file() for title in titles), page


def test_every_page_links_to_the_notation_table(built_site):
    notation = built_site.path / "notation" / "index.html"
    missing = []
    for page in built_site.pages():
        article = re.search(r"<article.*?</article>", page.read_text(), re.S)[0]
        if page != notation and not re.search(r'href="[^"]*notation/(#[^"]*)?"', article):
            missing.append(str(page.relative_to(built_site.path)))
    assert missing == []

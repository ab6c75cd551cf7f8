"""The site builds strictly, offline, with every tutorial downloadable."""

import re

import jupytext
import pytest
import yaml

from tests.conftest import ROOT
from tests.site_tools import TUTORIALS

TUTORIAL_NAMES = sorted(p.stem for p in TUTORIALS.glob("*.py"))
# Loads of another host: scripts, stylesheets, images, fonts, frames (links to read, and the page's
# canonical address, are not loads).
OUTSIDE_LOAD = re.compile(
    r'<(?:script|link(?![^>]*rel="canonical")|img|iframe|source)\b[^>]*\b(?:src|href)="(?:https?:)?//', re.I
)
THIRD_PARTY_WARNING = "[IPKernelApp] WARNING | Kernel is running over TCP"


def _nav_files(items):
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        yield from _nav_files(value) if isinstance(value, list) else [value]


def test_strict_build_has_no_warnings_of_our_own(built_site):
    warnings = [
        line for line in built_site.log.splitlines() if "WARNING" in line and THIRD_PARTY_WARNING not in line
    ]
    assert warnings == []


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


PAGE_BUDGET = 150 * 1024  # bytes of HTML, the largest page


def test_no_page_is_heavier_than_the_budget(built_site):
    sizes = {str(page.relative_to(built_site.path)): page.stat().st_size for page in built_site.pages()}
    assert {page: size for page, size in sizes.items() if size > PAGE_BUDGET} == {}

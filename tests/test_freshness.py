"""Builds are reproducible, and no cached notebook outlives a change to the code it runs."""

from __future__ import annotations

import pytest

from tests.site_tools import build, copy_project, html_pages

MARKER = "attn_ref was changed after the first build"


@pytest.fixture(scope="module")
def clean_copy(tmp_path_factory):
    """A copy of the project (no cache, no site) and its first, clean build."""
    project = copy_project(tmp_path_factory.mktemp("project"))
    site = tmp_path_factory.mktemp("clean-site")
    build(project, site)
    return project, site


def test_two_builds_give_byte_identical_pages(built_site, clean_copy):
    _, clean_site = clean_copy
    pages = [p.relative_to(clean_site) for p in html_pages(clean_site)]
    notebooks = [p.relative_to(clean_site) for p in clean_site.rglob("*.ipynb")]
    assert pages == [p.relative_to(built_site.path) for p in html_pages(built_site.path)]
    differing = [
        str(p)
        for p in pages + notebooks
        if (clean_site / p).read_bytes() != (built_site.path / p).read_bytes()
    ]
    assert differing == []


def test_a_change_to_attn_ref_reaches_every_notebook_on_the_next_build(clean_copy, tmp_path):
    project, clean_site = clean_copy
    notebook_pages = sorted((clean_site / "tutorials").glob("*/index.html"))
    assert notebook_pages and all(MARKER not in page.read_text() for page in notebook_pages)
    init = project / "attn_ref" / "__init__.py"
    init.write_text(init.read_text() + f"\nprint({MARKER!r})\n")
    build(project, tmp_path)  # the copy's notebook cache from the clean build is still there
    stale = [
        p.parent.name
        for p in sorted((tmp_path / "tutorials").glob("*/index.html"))
        if MARKER not in p.read_text()
    ]
    assert stale == []

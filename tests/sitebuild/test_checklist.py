"""sitebuild.checklist: the build names a tutorial with no test and a teaching page with no row on the
home page's map, one line each, and finds nothing missing in the project as it is."""

from __future__ import annotations

import yaml

from sitebuild.checklist import problems, teaching_pages
from sitelook.project import ROOT

NAV = [
    {"Home": "index.md"},
    {"Core path": [{"1. Lesson": "concepts/lesson.md"}, {"2. Notebook": "tutorials/notebook.md"}]},
    {"Foundations": [{"How": "foundations/how.md"}, {"Inner": "tutorials/inner.md"}]},
    {"Reference": [{"API": "reference/api.md"}]},
]
ROW = '<span class="page-minutes" data-page="{}"></span>'


def _project(tmp_path, rows, tests):
    (tmp_path / "docs" / "tutorials").mkdir(parents=True)
    (tmp_path / "tests" / "tutorials").mkdir(parents=True)
    for name in ("notebook", "inner"):
        (tmp_path / "docs" / "tutorials" / f"{name}.py").write_text("# %%\n")
    for name in tests:
        (tmp_path / "tests" / "tutorials" / f"test_{name}.py").write_text("")
    (tmp_path / "docs" / "index.md").write_text("\n".join(f"| x | {ROW.format(page)} |" for page in rows))
    return tmp_path


def test_teaching_pages_are_the_navigation_but_home_foundations_and_reference():
    assert teaching_pages(NAV) == ["concepts/lesson.md", "tutorials/notebook.md"]


def test_a_missing_test_and_a_missing_home_row_are_each_named(tmp_path):
    project = _project(tmp_path, rows=["concepts/lesson.md"], tests=["notebook"])
    assert problems(project, NAV) == [
        "docs/tutorials/inner.py has no test: add tests/tutorials/test_inner.py (README, 'A new page')",
        "tutorials/notebook.md has no row on the home page: add one to docs/index.md's map, with "
        + ROW.format("tutorials/notebook.md")
        + " (README, 'A new page')",
    ]


def test_nothing_is_missing_when_every_page_has_its_test_and_row(tmp_path):
    project = _project(
        tmp_path, rows=["concepts/lesson.md", "tutorials/notebook.md"], tests=["notebook", "inner"]
    )
    assert problems(project, NAV) == []


def test_the_project_lacks_nothing():
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)["nav"]
    assert problems(ROOT, nav) == []

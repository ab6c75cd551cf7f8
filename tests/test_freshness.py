"""No page is built from old code, and two builds give the same bytes.

Each tutorial is executed once and kept under a key (sitebuild/execution.py);
these tests check that the key changes with everything the tutorial can run, and only
then is it executed again.
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import nbformat
import pytest

from sitebuild import execution as tutorial_execution
from tests.site_tools import ROOT, TUTORIALS, build, html_pages

TINY_TUTORIAL = """# %% [markdown]
# # A tiny tutorial

# %%
import os
print("working folder holds:", os.listdir("."))
with open("written.txt", "w") as file:  # kept with the execution, published beside the page
    file.write("a file the tutorial wrote")

# %% tags=["plot"]
shown = "a plot"

# %% tags=["solution"]
answer = 6 * 7
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with the site's code folders, its pinned versions and one tiny tutorial."""
    for folder in tutorial_execution.CODE_DIRS:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / tutorial_execution.VERSIONS, tmp_path)
    for how in tutorial_execution.HOW:
        (tmp_path / how).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / how, tmp_path / how)
    (tmp_path / "docs" / "tutorials").mkdir(parents=True)
    (tmp_path / "docs" / "tutorials" / "tiny.py").write_text(TINY_TUTORIAL)
    return tmp_path


def _tutorial(project: Path) -> Path:
    return project / "docs" / "tutorials" / "tiny.py"


def _execute(project: Path) -> Path:
    return tutorial_execution.execute_all([_tutorial(project)], project)[_tutorial(project)].result()


def test_a_tutorial_runs_top_to_bottom_in_a_fresh_kernel_in_an_empty_folder(project):
    executed = _execute(project)
    notebook = nbformat.read(executed, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == [1, 2, 3]  # in order, in a kernel of its own
    assert code[0].outputs[0].text == "working folder holds: []\n"
    assert code[1].metadata["jupyter"] == {"source_hidden": True}  # a plot: its output stays in view
    assert code[2].metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}  # a solution
    values = pickle.loads(tutorial_execution.saved_values(executed).read_bytes())
    assert values == {"shown": "a plot", "answer": 42}
    written = tutorial_execution.written_files(executed)
    assert [p.name for p in written.iterdir()] == ["written.txt"]
    assert (written / "written.txt").read_text() == "a file the tutorial wrote"


def test_a_kept_execution_is_reused_until_the_code_changes(project):
    first = _execute(project)
    written = first.stat().st_mtime_ns
    assert _execute(project) == first and first.stat().st_mtime_ns == written  # not run again
    code = project / "attn_ref" / "functional.py"
    code.write_text(code.read_text() + "\n# changed\n")
    second = _execute(project)
    assert second != first and second.is_file()


@pytest.mark.parametrize(
    "changed",
    [
        "attn_ref/functional.py",
        "attn_ref/new_module.py",
        "snippets/foundation/three_tokens.py",
        "constraints.txt",
        "sitebuild/execution.py",
        "sitebuild/values.py",
    ],
)
def test_the_key_changes_with_the_code_the_tutorial_can_run_and_the_versions(project, changed):
    before = tutorial_execution.cache_folder(_tutorial(project), project)
    path = project / changed
    path.write_text((path.read_text() if path.exists() else "") + "\n# changed\n")
    assert tutorial_execution.cache_folder(_tutorial(project), project) != before


def test_the_key_ignores_pages_and_other_tutorials(project):
    before = tutorial_execution.cache_folder(_tutorial(project), project)
    (project / "docs" / "index.md").write_text("# Changed\n")
    (project / "docs" / "tutorials" / "other.py").write_text(TINY_TUTORIAL)
    assert tutorial_execution.cache_folder(_tutorial(project), project) == before


def test_every_kept_execution_belongs_to_todays_tutorials_and_code(built_site):
    current = {tutorial_execution.cache_folder(source, ROOT) for source in TUTORIALS.glob("*.py")}
    (this_arithmetic,) = {folder.parent for folder in current}
    kept = {path.parent.parent for path in this_arithmetic.glob("*/tutorials/*.ipynb")}
    assert kept == current  # the build pruned the rest of this arithmetic's executions


def test_a_second_build_gives_byte_identical_pages(built_site, tmp_path):
    """The second build reuses the tutorials' executions and runs every Markdown page again."""
    build(ROOT, tmp_path)
    first = [p.relative_to(built_site.path) for p in html_pages(built_site.path)]
    first += [p.relative_to(built_site.path) for p in built_site.path.rglob("*.ipynb")]
    first += [p.relative_to(built_site.path) for p in built_site.path.glob("tutorials/*/*.json")]  # written
    assert first == [p.relative_to(tmp_path) for p in html_pages(tmp_path)] + [
        p.relative_to(tmp_path) for p in tmp_path.rglob("*.ipynb")
    ] + [p.relative_to(tmp_path) for p in tmp_path.glob("tutorials/*/*.json")]
    assert any(p.name == "induction_heads.json" for p in first)
    differing = [str(p) for p in first if (built_site.path / p).read_bytes() != (tmp_path / p).read_bytes()]
    assert differing == []

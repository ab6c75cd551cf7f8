"""No page is built from old code, and two builds give the same bytes.

Each tutorial is executed once and kept under a key (sitebuild/execution.py);
these tests check that the key changes with everything the tutorial can run, and only
then is it executed again.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from sitebuild import execution as tutorial_execution
from sitelook.project import ROOT, TUTORIALS, build, html_pages

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


@pytest.fixture(scope="module")
def executed_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with the site's code folders, its pinned versions and one tiny tutorial, executed
    once (a kernel takes seconds to start; the tests below share this execution)."""
    project = tmp_path_factory.mktemp("executed")
    for folder in tutorial_execution.CODE_DIRS:
        shutil.copytree(ROOT / folder, project / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / tutorial_execution.VERSIONS, project)
    for how in tutorial_execution.HOW:
        (project / how).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / how, project / how)
    (project / "docs" / "tutorials").mkdir(parents=True)
    (project / "docs" / "tutorials" / "tiny.py").write_text(TINY_TUTORIAL)
    _execute(project)
    return project


@pytest.fixture
def project(executed_project: Path, tmp_path: Path) -> Path:
    """A copy of that project, with its execution kept, for a test to change."""
    return Path(shutil.copytree(executed_project, tmp_path / "project", symlinks=True))


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


def _new_in_the_work_tree() -> set[str]:
    """What git sees as new in the checkout (ignored files, such as .cache, left out)."""
    listed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line[3:] for line in listed.splitlines() if line.startswith("??")}


def test_a_file_a_tutorial_writes_lands_with_its_execution_not_in_the_work_tree(project, monkeypatch):
    """The playgrounds' tutorials write their model files in their working folder. Executed from
    the project's root, as `make execute` and the tests run it, such a file is kept with the
    execution, and nothing new appears in the checkout (where `git add -A` would take it) or in
    the executed project's own folders."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (make measure runs the tests in a copy of the files)")
    monkeypatch.chdir(ROOT)
    before = _new_in_the_work_tree()
    other = project / "docs" / "tutorials" / "other.py"  # not executed yet: a kernel runs now
    other.write_text(TINY_TUTORIAL.replace("written.txt", "other.txt"))  # a name no other test writes
    executed = tutorial_execution.execute_all([other], project)[other].result()
    assert _new_in_the_work_tree() - before == set()
    assert (tutorial_execution.written_files(executed) / "other.txt").is_file()
    written = [p.relative_to(project) for p in project.rglob("other.txt")]
    assert [p for p in written if p.parts[0] != ".cache"] == []


BUSY_TUTORIAL = """# %%
import time

started = time.process_time()
while time.process_time() - started < 0.5:  # half a second of CPU, however long it takes
    pass
"""


def test_an_execution_records_the_cpu_its_kernel_spent(project):
    """`make measure` prints each tutorial's CPU from this record (issue 46's budget: 60 s each)."""
    busy = project / "docs" / "tutorials" / "busy.py"
    busy.write_text(BUSY_TUTORIAL)
    tutorial_execution.execute_all([busy], project)[busy].result()
    cpu_seconds, ended = tutorial_execution.cpu_times(project)["busy"]
    assert cpu_seconds >= 0.5  # the loop's, and the kernel's own start on top
    assert cpu_seconds <= tutorial_execution.durations(project)["busy"] * len(os.sched_getaffinity(0)) + 0.1
    assert ended.endswith(" UTC")


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


def test_snippets_are_in_the_key_of_a_tutorial_whose_code_names_them(project):
    snippet = project / "snippets" / "foundation" / "three_tokens.py"
    before = tutorial_execution.cache_folder(_tutorial(project), project)
    snippet.write_text(snippet.read_text() + "\n# changed\n")
    assert tutorial_execution.cache_folder(_tutorial(project), project) == before  # not named: no run
    _tutorial(project).write_text(
        TINY_TUTORIAL + "\n# %%\nimport runpy  # runs snippets/foundation/three_tokens.py\n"
    )
    named = tutorial_execution.cache_folder(_tutorial(project), project)
    snippet.write_text(snippet.read_text() + "\n# changed again\n")
    assert tutorial_execution.cache_folder(_tutorial(project), project) != named


def test_the_key_ignores_pages_and_other_tutorials(project):
    before = tutorial_execution.cache_folder(_tutorial(project), project)
    (project / "docs" / "index.md").write_text("# Changed\n")
    (project / "docs" / "tutorials" / "other.py").write_text(TINY_TUTORIAL)
    assert tutorial_execution.cache_folder(_tutorial(project), project) == before


def test_editing_prose_runs_nothing_again_and_the_page_shows_the_new_prose(project):
    executed = _execute(project)
    source = _tutorial(project)
    source.write_text(
        source.read_text().replace("# # A tiny tutorial", "# # A tiny tutorial\n#\n# New prose.")
    )
    assert _execute(project) == executed  # the same key: kept
    notebook = tutorial_execution.notebook(source, executed)
    assert notebook.cells[0].source == "# A tiny tutorial\n\nNew prose."
    assert notebook.cells[1].outputs[0].text == "working folder holds: []\n"  # the kept outputs


@pytest.mark.parametrize(
    "edit",
    [
        lambda text: text.replace("answer = 6 * 7", "answer = 7 * 6"),  # code
        lambda text: text.replace('tags=["plot"]', 'tags=["solution"]'),  # how a cell is shown
        lambda text: text + "\n# %%\nprint('one more cell')\n",
    ],
)
def test_editing_code_or_its_tags_changes_the_key(project, edit):
    before = tutorial_execution.cache_folder(_tutorial(project), project)
    _tutorial(project).write_text(edit(_tutorial(project).read_text()))
    assert tutorial_execution.cache_folder(_tutorial(project), project) != before


def test_kept_outputs_are_never_put_under_other_code(project):
    executed = _execute(project)
    source = _tutorial(project)
    source.write_text(source.read_text().replace("answer = 6 * 7", "answer = 7 * 6"))
    with pytest.raises(ValueError, match="is not an execution of"):
        tutorial_execution.notebook(source, executed)


@pytest.mark.parametrize(
    "marker",
    ['# %% [markdown] <a id="x"></a>**Lost.** Its text', '# %% tags=["plto"]', "# %% Some words"],
)
def test_a_cell_marker_that_carries_text_fails_the_execution(project, marker):
    """jupytext reads words after ``# %%`` as the cell's metadata: they would vanish from the page."""
    _tutorial(project).write_text(TINY_TUTORIAL + f"\n{marker}\n# more\n")
    with pytest.raises(ValueError, match="a marker line holds only"):
        tutorial_execution.prepared(_tutorial(project))


def test_every_tutorials_markers_carry_only_tags():
    for source in sorted(TUTORIALS.glob("*.py")):
        tutorial_execution.prepared(source)


def test_the_arithmetic_is_the_kernels_not_this_processs(monkeypatch):
    """A test may change this process's torch threads; the kernels start with the environment's."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert tutorial_execution.arithmetic().endswith(", 1 threads")
    finally:
        torch.set_num_threads(threads)


def test_the_number_of_kernels_at_a_time_is_configurable(monkeypatch):
    monkeypatch.setenv(tutorial_execution.WORKERS_VARIABLE, "3")
    assert tutorial_execution.workers() == 3
    monkeypatch.delenv(tutorial_execution.WORKERS_VARIABLE)
    assert tutorial_execution.workers() >= 1


def test_every_kept_execution_belongs_to_todays_tutorials_and_code(built_site):
    current = {tutorial_execution.cache_folder(source, ROOT) for source in TUTORIALS.glob("*.py")}
    (this_arithmetic,) = {folder.parent for folder in current}
    kept = {path.parent.parent for path in this_arithmetic.glob("*/tutorials/*.ipynb")}
    assert kept == current  # the build pruned the rest of this arithmetic's executions


def test_a_second_build_gives_byte_identical_pages(built_site, tmp_path):
    """The second build reuses the tutorials' executions and runs every Markdown page again. Its
    verdict is kept with the build it compares (tests/support/kept.py): once per input."""
    verdict = built_site.kept / "second-build-differs.txt"
    if not verdict.is_file():
        build(ROOT, tmp_path)
        verdict.write_text("\n".join(_differing(built_site.path, tmp_path)))
    assert verdict.read_text() == ""


def _differing(first_site: Path, second_site: Path) -> list[str]:
    """What two builds do not share byte for byte: their pages, notebooks and written files."""

    def built(site: Path) -> list[Path]:
        found = html_pages(site) + sorted(site.rglob("*.ipynb")) + sorted(site.glob("tutorials/*/*.json"))
        return [path.relative_to(site) for path in found]

    first, second = built(first_site), built(second_site)
    assert any(p.name == "induction_heads.json" for p in first)
    only_one = sorted({str(p) for p in set(first) ^ set(second)})
    return only_one + [
        str(p)
        for p in first
        if p in second and (first_site / p).read_bytes() != (second_site / p).read_bytes()
    ]

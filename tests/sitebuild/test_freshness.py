"""sitebuild.freshness: under `make serve`, a change to the code the pages import or include
rebuilds every page, and attn_ref is imported afresh for each build."""

from __future__ import annotations

import shutil
import sys

import pytest

from sitebuild import execution, freshness
from sitelook.project import ROOT


@pytest.fixture
def project(tmp_path, monkeypatch):
    for folder in execution.CODE_DIRS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "module.py").write_text("x = 1\n")
    shutil.copy2(ROOT / execution.VERSIONS, tmp_path)
    for how in execution.HOW:
        (tmp_path / how).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / how, tmp_path / how)
    monkeypatch.setattr(freshness, "last_built_digest", None)  # a new `make serve`
    return tmp_path


def test_the_first_build_and_unchanged_code_rebuild_nothing_extra(project):
    assert not freshness.code_changed(project)  # the first build of the process builds everything anyway
    assert not freshness.code_changed(project)


@pytest.mark.parametrize("changed", ["attn_ref/module.py", "snippets/module.py", "constraints.txt"])
def test_a_change_to_the_code_rebuilds_every_page_once(project, changed):
    freshness.code_changed(project)
    (project / changed).write_text((project / changed).read_text() + "# changed\n")
    assert freshness.code_changed(project)
    assert not freshness.code_changed(project)


def test_attn_ref_is_imported_afresh():
    import attn_ref.functional

    imported = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "attn_ref"}
    try:
        freshness.forget_imported_code()
        assert not [name for name in sys.modules if name.split(".")[0] == "attn_ref"]
        import attn_ref  # noqa: F401  the pages import it again, from its files
    finally:  # the other tests of this process keep the modules they imported (pickling needs them)
        sys.modules.update(imported)

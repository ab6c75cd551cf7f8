"""Shared fixtures: run a snippet in a fresh interpreter, build the site once."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

from tests.site_tools import ROOT, build, html_pages

SNIPPETS = ROOT / "snippets"


@functools.cache
def run_snippet(relative_path: str) -> str:
    """Run ``snippets/<relative_path>`` in a fresh interpreter and return what it printed.

    The working directory is a neutral folder, so a snippet cannot lean on
    files next to it; it fails the test if it exits with an error.
    """
    path = SNIPPETS / relative_path
    assert path.is_file(), f"no snippet at {path}"
    result = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT / "tests",
        env={**os.environ, "MPLBACKEND": "Agg"},
        timeout=300,
    )
    assert result.returncode == 0, f"{relative_path} failed:\n{result.stderr}"
    return result.stdout


def execute_tutorial(name: str, folder: Path, probe: str) -> tuple[nbformat.NotebookNode, str]:
    """Run ``docs/tutorials/<name>.py`` top to bottom in a fresh kernel, in ``folder``.

    ``probe`` is a cell run after the last one, to hand the notebook's
    variables to the test (by printing them, or with ``torch.save``).
    Returns the notebook, whose cells carry their outputs, without the probe
    cell, and what the probe cell printed.
    """
    notebook = jupytext.read(ROOT / "docs" / "tutorials" / f"{name}.py")
    notebook.cells.append(nbformat.v4.new_code_cell(probe))
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    probe_cell = notebook.cells.pop()
    return notebook, "".join(output.get("text", "") for output in probe_cell.outputs)


@dataclass(frozen=True)
class BuiltSite:
    path: Path
    log: str

    def pages(self) -> list[Path]:
        return [page for page in html_pages(self.path) if page.name == "index.html"]


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    """The site, built once per test session with ``mkdocs build --strict``."""
    site_dir = tmp_path_factory.mktemp("site")
    _, log = build(ROOT, site_dir)
    return BuiltSite(site_dir, log)

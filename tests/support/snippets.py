"""Snippets and their tests: snippets/<topic>/<name>.py is tested by
tests/snippets/<topic>/test_<name>.py, which reads what the snippet printed and kept when run on
its own in a fresh process."""

from __future__ import annotations

import functools
from pathlib import Path

from sitelook.project import ROOT
from tests.support.forked import Finished, run_python

SNIPPETS = ROOT / "snippets"
TESTS = ROOT / "tests" / "snippets"


@functools.cache
def run_snippet(relative_path: str) -> Finished:
    """Run ``snippets/<relative_path>`` in a fresh process: what it printed, and its variables.

    The working directory is a neutral folder, so a snippet cannot lean on
    files next to it; it fails the test if it exits with an error.
    """
    path = SNIPPETS / relative_path
    assert path.is_file(), f"no snippet at {path}"
    finished = run_python(path, cwd=ROOT / "tests")
    assert finished.returncode == 0, f"{relative_path} failed:\n{finished.stderr}"
    return finished


def snippet_for(test_file: Path) -> Path:
    """The snippet that ``tests/snippets/<topic>/test_<name>.py`` tests."""
    relative = test_file.relative_to(TESTS)
    return SNIPPETS / relative.parent / relative.name.removeprefix("test_")


def mirrored_test(snippet: Path) -> Path:
    """The test of ``snippets/<topic>/<name>.py``."""
    relative = snippet.relative_to(SNIPPETS)
    return TESTS / relative.parent / f"test_{relative.name}"

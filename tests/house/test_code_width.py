"""Code the site shows fits its column at 1280 px, 80 characters (tests/browser/test_pages.py measures
the built pages). Checked here at the source, without a build: the tutorials' code cells, which
ruff cannot check (their Markdown cells are long comment lines), and attn_ref's doctests, which
the API pages show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import jupytext
import pytest

import attn_ref
from sitelook.project import TUTORIALS

COLUMNS = 79  # as snippets/ruff.toml and docs/tutorials/ruff.toml


@pytest.mark.parametrize("tutorial", sorted(TUTORIALS.glob("*.py")), ids=lambda p: p.stem)
def test_tutorial_code_cells_fit_the_column(tutorial):
    cells = jupytext.read(tutorial).cells
    wide = [
        line for c in cells if c.cell_type == "code" for line in c.source.splitlines() if len(line) > COLUMNS
    ]
    assert wide == []


def test_attn_ref_examples_fit_the_column():
    parser, wide = doctest.DocTestParser(), []
    for module_info in pkgutil.walk_packages(attn_ref.__path__, "attn_ref."):  # subpackages too
        module = importlib.import_module(module_info.name)
        for test in doctest.DocTestFinder().find(module):
            for example in parser.get_examples(test.docstring or ""):
                shown = [">>> " + line for line in example.source.splitlines()] + example.want.splitlines()
                wide += [f"{test.name}: {line}" for line in shown if len(line) > COLUMNS]
    assert wide == []

"""Every snippet runs on its own and has a test at the mirrored path; every such test has a snippet."""

import pytest

from tests.conftest import SNIPPETS, run_snippet
from tests.snippets.conftest import TESTS, snippet_for, test_file_for

ALL_SNIPPETS = sorted(p.relative_to(SNIPPETS).as_posix() for p in SNIPPETS.rglob("*.py"))


@pytest.mark.parametrize("relative_path", ALL_SNIPPETS)
def test_snippet_runs_in_a_fresh_interpreter(relative_path):
    run_snippet(relative_path)


@pytest.mark.parametrize("relative_path", ALL_SNIPPETS)
def test_snippet_has_a_test_at_the_mirrored_path(relative_path):
    assert test_file_for(SNIPPETS / relative_path).is_file()


def test_every_snippet_test_has_its_snippet():
    orphans = [str(test) for test in TESTS.rglob("test_*.py") if not snippet_for(test).is_file()]
    assert orphans == []

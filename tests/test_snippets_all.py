"""Every snippet runs on its own, and every snippet has a test of what it prints."""

import pytest

from tests.conftest import ROOT, SNIPPETS, run_snippet

ALL_SNIPPETS = sorted(p.relative_to(SNIPPETS).as_posix() for p in SNIPPETS.rglob("*.py"))
SNIPPET_TESTS = "\n".join(p.read_text() for p in (ROOT / "tests" / "snippets").glob("test_*.py"))


@pytest.mark.parametrize("relative_path", ALL_SNIPPETS)
def test_snippet_runs_in_a_fresh_interpreter(relative_path):
    run_snippet(relative_path)


@pytest.mark.parametrize("relative_path", ALL_SNIPPETS)
def test_snippet_has_a_test_of_its_output(relative_path):
    assert f'run_snippet("{relative_path}")' in SNIPPET_TESTS, (
        f"no test in tests/snippets runs {relative_path}"
    )

"""Every snippet has a test at the mirrored path (which runs it on its own); every such test has a snippet."""

import pytest

from tests.support.snippets import SNIPPETS, TESTS, mirrored_test, snippet_for

ALL_SNIPPETS = sorted(p.relative_to(SNIPPETS).as_posix() for p in SNIPPETS.rglob("*.py"))


@pytest.mark.parametrize("relative_path", ALL_SNIPPETS)
def test_snippet_has_a_test_at_the_mirrored_path(relative_path):
    assert mirrored_test(SNIPPETS / relative_path).is_file()


def test_every_snippet_test_has_its_snippet():
    orphans = [str(test) for test in TESTS.rglob("test_*.py") if not snippet_for(test).is_file()]
    assert orphans == []

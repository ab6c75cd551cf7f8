"""What a new page needs besides its text, checked when the site is built (README's checklist):

- a tutorial (``docs/tutorials/<name>.py``) has its test, ``tests/tutorials/test_<name>.py``;
- a teaching page (a page of the navigation, but for Home, Foundations and Reference) has its row on
  the home page's map: a ``page-minutes`` span that names it, where the build writes its minutes.

Its entry in the navigation is ProperDocs' own check (``validation: omitted_files`` in mkdocs.yml,
strict). A build that misses one fails with a line that says what to add.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

NOT_TEACHING = ("Home", "Foundations", "Reference")
HOME_ROW = re.compile(r'class="page-minutes" data-page="([^"]+)"')


def nav_files(items: Iterable) -> Iterator[str]:
    """Every page the navigation (mkdocs.yml's ``nav``, as YAML reads it) lists, in order."""
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        yield from nav_files(value) if isinstance(value, list) else [value]


def teaching_pages(nav: list) -> list[str]:
    """The pages of the navigation that teach: all but Home, Foundations and Reference."""
    sections = [next(iter(item.items())) for item in nav if isinstance(item, dict)]
    return [page for name, items in sections if name not in NOT_TEACHING for page in nav_files(items)]


def problems(root: Path, nav: list) -> list[str]:
    """What the project at ``root``, whose navigation is ``nav``, lacks, one line each."""
    found = []
    for tutorial in sorted((root / "docs" / "tutorials").glob("*.py")):
        test = Path("tests") / "tutorials" / f"test_{tutorial.stem}.py"
        if not (root / test).is_file():
            found.append(f"docs/tutorials/{tutorial.name} has no test: add {test} (README, 'A new page')")
    rows = set(HOME_ROW.findall((root / "docs" / "index.md").read_text()))
    for page in teaching_pages(nav):
        if page not in rows:
            found.append(
                f"{page} has no row on the home page: add one to docs/index.md's map, with "
                f'<span class="page-minutes" data-page="{page}"></span> (README, \'A new page\')'
            )
    return found

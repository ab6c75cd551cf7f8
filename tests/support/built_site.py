"""The site as a test run reads it (the ``built_site`` fixture): its folder, the build's log, and the
folder the build is kept in, where checks of the same build keep their results."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sitelook.project import html_pages


@dataclass(frozen=True)
class BuiltSite:
    path: Path
    log: str
    kept: Path

    def pages(self) -> list[Path]:
        return [page for page in html_pages(self.path) if page.name == "index.html"]

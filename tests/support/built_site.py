"""The site as a test run built it (once, see the ``built_site`` fixture): its folder and the build's log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sitebuild.project import html_pages


@dataclass(frozen=True)
class BuiltSite:
    path: Path
    log: str

    def pages(self) -> list[Path]:
        return [page for page in html_pages(self.path) if page.name == "index.html"]

"""Math renders with no request to another host: MathJax 3 is copied from the pinned
``django-static-mathjax`` package into the site, and ``mkdocs.yml`` loads it from there."""

from __future__ import annotations

import shutil
from pathlib import Path

import mathjax

FILES = ("tex-chtml.js", "output/chtml/fonts/woff-v2")


def copy_mathjax(site_dir: Path) -> None:
    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = site_dir / "assets" / "mathjax"
    for item in FILES:
        if (source / item).is_dir():
            shutil.copytree(source / item, target / item, dirs_exist_ok=True)
        else:
            (target / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / item, target / item)

"""The project from outside: where it is, a clean copy of it, its strict build, and the pages built.

Shared by the test suite (tests/conftest.py, tests/site/test_rebuilds.py) and the tools
(scripts/measure.py, scripts/math_font.py), so that all build the site the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
# A Markdown page's executed block, at any indentation (inside "??? ..." blocks too): (indent, options, body).
EXEC_BLOCK = re.compile(r'^( *)```python exec="true"([^\n]*)\n(.*?)^\1```', re.M | re.S)


def project_files(root: Path) -> list[Path]:
    """The files git knows (tracked, or new and not ignored): no site, cache or venv."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [root / name for name in sorted(filter(None, listed.split("\0"))) if (root / name).is_file()]


def copy_project(destination: Path) -> Path:
    """Copy the project's files (`project_files`) to ``destination``."""
    for source in project_files(ROOT):
        target = destination / source.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return destination


def build(project: Path, site_dir: Path) -> tuple[float, str]:
    """``properdocs build --strict`` of ``project`` into ``site_dir``: (seconds, log). Fails loudly."""
    start = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "properdocs",
            "build",
            "-f",
            "mkdocs.yml",
            "--strict",
            "--site-dir",
            str(site_dir),
        ],
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(project)},  # the copy's attn_ref, not the checkout's
        timeout=1200,
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"properdocs build --strict failed in {project}:\n{result.stderr}")
    return seconds, result.stderr


def html_pages(site_dir: Path) -> list[Path]:
    """Every HTML page a reader can open, in a stable order."""
    return sorted(p for p in site_dir.rglob("*.html") if "assets" not in p.relative_to(site_dir).parts)


def pages_from_docs() -> list[str]:
    """URL paths of the pages, from the docs folder, so that test ids are known before the build."""
    docs = ROOT / "docs"
    paths = [""]
    for source in sorted(docs.rglob("*")):
        relative = source.relative_to(docs)
        if source.suffix in {".md", ".py"} and source.name != "index.md":
            paths.append(relative.with_suffix("").as_posix() + "/")
    return paths


PAGE_PATHS = pages_from_docs()

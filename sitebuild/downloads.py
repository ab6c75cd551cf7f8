"""What a reader takes away from the site, and runs without the rest of the project.

- `wheel`: ``attn_ref`` built as a wheel, served by the site at ``downloads/`` (``WHEEL``), so that
  one ``pip install`` of its address gives a reader's own Python what every page and notebook
  imports. Built from a copy of the package in a temporary folder (the project stays clean), with
  fixed file times (the same bytes every build), and kept under ``.cache/wheel/`` until the
  package changes.
- `for_download`: a tutorial's executed notebook as a reader downloads it: it starts with what to
  install (the home page's commands, and the pip command for a notebook that has PyTorch already), its links to other pages point at the site, not at Markdown files beside it, and its
  plots keep the drawing a notebook shows (the site's pair of drawings is left out).
- `with_wheel_url`: a page's Markdown with ``ATTN_REF_WHEEL_URL`` replaced by the wheel's address
  and ``READER_ENVIRONMENT_LIMIT`` by the disk a reader's environment takes at most (the home page
  shows the commands, and the size to expect).
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath

import nbformat
from nbformat import NotebookNode

from attn_ref.plotting import PLOT_MIME

PACKAGE_FILES = ("pyproject.toml", "README.md", "LICENSE")
CACHE = Path(".cache") / "wheel"
FOLDER = "downloads"
PLACEHOLDER = "ATTN_REF_WHEEL_URL"
SIZE_PLACEHOLDER = "READER_ENVIRONMENT_LIMIT"
# the disk a reader's environment takes at most, as the home page says (the fresh-environment test
# holds it; sitelook.budgets lists it with the other limits)
READER_ENVIRONMENT_MB = 1500
# A Markdown link to another page of the site: [text](path.md#anchor)
PAGE_LINK = re.compile(r"\]\((?!https?:)([^)\s]+?)\.md(#[^)\s]*)?\)")


def wheel(root: Path) -> Path:
    """The wheel of ``root``'s attn_ref, built once per version of the package's files."""
    sources = [*(root / "attn_ref").rglob("*.py"), *(root / name for name in PACKAGE_FILES)]
    digest = hashlib.sha256()
    for path in sorted(sources):
        digest.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    folder = root / CACHE / digest.hexdigest()[:16]
    built = sorted(folder.glob("attn_ref-*.whl"))
    if built:
        return built[0]
    with tempfile.TemporaryDirectory() as copy_dir:
        project = Path(copy_dir)
        shutil.copytree(root / "attn_ref", project / "attn_ref", ignore=shutil.ignore_patterns("__pycache__"))
        for name in PACKAGE_FILES:
            shutil.copy2(root / name, project / name)
        pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        subprocess.run(
            [*pip_wheel, "--wheel-dir", str(project / "dist"), str(project)],
            check=True,
            env={**os.environ, "SOURCE_DATE_EPOCH": "315532800"},  # 1980-01-01: a zip's earliest time
        )
        (wheel_file,) = (project / "dist").glob("attn_ref-*.whl")
        folder.mkdir(parents=True, exist_ok=True)
        kept = Path(shutil.copy2(wheel_file, folder / wheel_file.name))
    for older in (root / CACHE).iterdir():  # the wheels of older versions of the package
        if older != folder:
            shutil.rmtree(older, ignore_errors=True)
    return kept


def wheel_url(site_url: str, wheel_file: Path) -> str:
    return f"{site_url.rstrip('/')}/{FOLDER}/{wheel_file.name}"


def with_wheel_url(markdown: str, url: str) -> str:
    """``markdown`` with the wheel's address, and the disk a reader's environment takes at most
    (`READER_ENVIRONMENT_MB`, which the fresh-environment test holds it to)."""
    return markdown.replace(PLACEHOLDER, url).replace(SIZE_PLACEHOLDER, reader_environment_limit())


def reader_environment_limit() -> str:
    return f"under {READER_ENVIRONMENT_MB / 1000:.1f} GB"


def for_download(notebook: NotebookNode, page: str, site_url: str, url_of_wheel: str) -> NotebookNode:
    """``notebook`` (the tutorial at ``page``, e.g. ``tutorials/kv_cache.md``) as a reader downloads it."""
    notebook = copy.deepcopy(notebook)
    here = PurePosixPath(page).parent
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = PAGE_LINK.sub(lambda m: f"]({_page_url(here, m[1], m[2], site_url)})", cell.source)
        for output in cell.get("outputs", []):  # a plot: the notebook shows its light drawing
            output.get("data", {}).pop(PLOT_MIME, None)
    home = f"{site_url.rstrip('/')}/#run-it-yourself"
    install = nbformat.v4.new_markdown_cell(
        f"**To run this notebook**, you need Python 3.11.5 or newer with PyTorch, NumPy, matplotlib and\n"
        f"`attn_ref`, the site's reference package, then run the cells in order. [Run it yourself]({home})\n"
        f"gives the commands: a virtual environment, PyTorch's CPU build (a plain `pip install torch` on\n"
        f"Linux or Windows brings several GB for NVIDIA GPUs), the site's package and Jupyter\n"
        f"({reader_environment_limit()} in all). If this notebook's Python has PyTorch already,\n"
        f"this cell installs the rest:\n\n"
        f"```\n%pip install {url_of_wheel}\n```\n\n"
        f"This notebook is a page of [Attention, from first principles]({site_url})."
    )
    install.id = "install-attn-ref"
    notebook.cells.insert(0, install)
    return notebook


def _page_url(here: PurePosixPath, target: str, anchor: str | None, site_url: str) -> str:
    """The site's address of the page ``target`` (``../notation``), linked from a page in ``here``."""
    parts: list[str] = []
    for part in (here / target).parts:
        if part == "..":
            parts.pop()
        elif part != ".":
            parts.append(part)
    path = "/".join(parts)
    path = "" if path == "index" else path.removesuffix("/index") + "/"
    return f"{site_url.rstrip('/')}/{path}{anchor or ''}"

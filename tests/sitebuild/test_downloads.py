"""sitebuild.downloads: attn_ref as a wheel, and a tutorial as a reader downloads it (fast: no site)."""

from __future__ import annotations

import shutil
import zipfile

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from sitebuild import downloads
from sitelook.project import ROOT


def test_the_wheel_holds_attn_ref_and_its_requirements_and_is_the_same_every_time(tmp_path):
    for name in ("attn_ref", *downloads.PACKAGE_FILES):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, tmp_path / name)
    first = downloads.wheel(tmp_path)
    content = first.read_bytes()
    with zipfile.ZipFile(first) as wheel:
        names = wheel.namelist()
        metadata = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    modules = {p.relative_to(tmp_path).as_posix() for p in (tmp_path / "attn_ref").rglob("*.py")}
    assert "attn_ref/serving/paged.py" in modules  # the subpackages' modules too
    assert modules <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "sitebuild/", "sitelook/"))]
    assert "Requires-Dist: torch" in metadata
    assert downloads.wheel(tmp_path).read_bytes() == content  # kept
    shutil.rmtree(tmp_path / downloads.CACHE)
    assert downloads.wheel(tmp_path).read_bytes() == content  # built again: the same bytes


def test_a_downloaded_notebook_starts_with_the_install_and_links_to_the_site():
    notebook = new_notebook(
        cells=[
            new_markdown_cell("# T\n\nSee [the cache](kv_cache.md), [notation](../notation.md#attention)."),
            new_code_cell("x = 1"),
        ]
    )
    site, wheel = "https://example.org/attention/", "https://example.org/attention/downloads/a.whl"
    readers = downloads.for_download(notebook, "tutorials/linear.md", site, wheel)
    assert readers.cells[0].cell_type == "markdown" and f"%pip install {wheel}" in readers.cells[0].source
    assert readers.cells[1].source == (
        "# T\n\nSee [the cache](https://example.org/attention/tutorials/kv_cache/), "
        "[notation](https://example.org/attention/notation/#attention)."
    )
    assert readers.cells[2] == notebook.cells[1]
    assert notebook.cells[0].source.startswith("# T")  # the executed notebook itself is left as it was


def test_the_home_page_shows_the_wheels_address():
    assert downloads.with_wheel_url("pip install ATTN_REF_WHEEL_URL", "u") == "pip install u"

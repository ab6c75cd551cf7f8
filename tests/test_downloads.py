"""A reader with only Python downloads attn_ref's wheel and a tutorial from the site, and the
notebook runs top to bottom in a fresh virtual environment: nothing of the project is needed.

The environment's first making is exactly the reader's: the wheel, from the site, with what it
requires, resolved by pip. Installing torch and the rest takes minutes, so the environment is kept
(``.cache/fresh-environment/<key>/``) under a key of everything that decides what pip installs
beside the wheel: the wheel's requirements, the pinned versions and this Python. Later runs
install the new wheel into it, without touching the rest, and `pip check` confirms that what is
there still satisfies what the wheel requires.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import urllib.request
import venv
import zipfile
from pathlib import Path

import nbformat
import pytest

from sitebuild.project import ROOT

NOTEBOOK = "tutorials/linear_to_self_attention.ipynb"
KEPT = ROOT / ".cache" / "fresh-environment"
RUN = """
import sys, nbformat
from nbclient import NotebookClient
notebook = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(notebook, kernel_name="python3", timeout=600).execute()
print("cells run:", sum(cell.cell_type == "code" for cell in notebook.cells))
"""


def _requirements(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    return "\n".join(line for line in lines if line.startswith(("Requires-Dist:", "Requires-Python:")))


def _environment(wheel: Path, wheel_url: str) -> Path:
    """A virtual environment with the wheel installed as a reader would, and Jupyter's kernel."""
    key = hashlib.sha256(
        "\n".join([_requirements(wheel), (ROOT / "constraints.txt").read_text(), sys.version]).encode()
    ).hexdigest()[:16]
    environment = KEPT / key
    python = environment / "bin" / "python"
    # With the versions the site was built with (constraints.txt): on this kind of machine, pip's
    # newest torch would be a CUDA build of several GB. --no-compile: a reader's first import compiles.
    pip = [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-compile",
        "--constraint",
        ROOT / "constraints.txt",
    ]
    if (environment / "complete").is_file():
        subprocess.run([*pip, "--no-deps", "--force-reinstall", wheel_url], check=True, timeout=900)
    else:
        shutil.rmtree(KEPT, ignore_errors=True)  # an environment for other requirements: not needed again
        venv.create(environment, with_pip=True)
        # What the notebook's first cell asks for, from the site as served, and Jupyter's kernel to run it.
        subprocess.run([*pip, wheel_url, "ipykernel", "nbclient"], check=True, timeout=900)
        (environment / "complete").touch()
    subprocess.run([python, "-m", "pip", "check"], check=True, capture_output=True)
    return environment


@pytest.mark.fresh_environment
def test_a_downloaded_notebook_runs_in_a_fresh_environment(built_site, server, tmp_path):
    (wheel,) = (built_site.path / "downloads").glob("attn_ref-*.whl")
    notebook_file = tmp_path / "tutorial.ipynb"
    notebook_file.write_bytes(urllib.request.urlopen(server + NOTEBOOK).read())
    notebook = nbformat.read(notebook_file, as_version=4)
    assert f"/downloads/{wheel.name}" in notebook.cells[0].source  # the command the reader is shown
    reader = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}  # no project
    environment = _environment(wheel, server + f"downloads/{wheel.name}")
    python = environment / "bin" / "python"
    where = subprocess.run(
        [python, "-c", "import attn_ref; print(attn_ref.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not the project's folder, whose attn_ref `python -c` would import first
        env=reader,
    )
    assert where.stdout.startswith(str(environment))  # the fresh environment's, not the project's
    installed = Path(where.stdout.strip()).parent
    with zipfile.ZipFile(wheel) as archive:  # the wheel just served, not an earlier one
        for name in archive.namelist():
            if name.startswith("attn_ref/") and name.endswith(".py"):
                assert (installed.parent / name).read_bytes() == archive.read(name), name
    finished = subprocess.run(
        [python, "-c", RUN, str(notebook_file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=reader,
        timeout=900,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert f"cells run: {sum(cell.cell_type == 'code' for cell in notebook.cells)}" in finished.stdout

"""A reader with only Python downloads attn_ref's wheel and a tutorial from the site, and the
notebook runs top to bottom in a fresh virtual environment: nothing of the project is needed."""

from __future__ import annotations

import os
import subprocess
import urllib.request
import venv

import nbformat

from tests.site_tools import ROOT

NOTEBOOK = "tutorials/linear_to_self_attention.ipynb"
RUN = """
import sys, nbformat
from nbclient import NotebookClient
notebook = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(notebook, kernel_name="python3", timeout=600).execute()
print("cells run:", sum(cell.cell_type == "code" for cell in notebook.cells))
"""


def test_a_downloaded_notebook_runs_in_a_fresh_environment(built_site, server, tmp_path):
    (wheel,) = (built_site.path / "downloads").glob("attn_ref-*.whl")
    notebook_file = tmp_path / "tutorial.ipynb"
    notebook_file.write_bytes(urllib.request.urlopen(server + NOTEBOOK).read())
    notebook = nbformat.read(notebook_file, as_version=4)
    assert f"/downloads/{wheel.name}" in notebook.cells[0].source  # the command the reader is shown
    reader = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}  # no project
    environment = tmp_path / "fresh"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    # What the notebook's first cell asks for, from the site as served, and Jupyter's kernel to run it.
    # With the versions the site was built with (constraints.txt): on this kind of machine, pip's
    # newest torch would be a CUDA build of several GB.
    packages = [server + f"downloads/{wheel.name}", "ipykernel", "nbclient"]
    pip = [python, "-m", "pip", "install", "--quiet", "--constraint", ROOT / "constraints.txt"]
    subprocess.run([*pip, *packages], check=True, timeout=900)
    where = subprocess.run(
        [python, "-c", "import attn_ref; print(attn_ref.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not the project's folder, whose attn_ref `python -c` would import first
        env=reader,
    )
    assert where.stdout.startswith(str(environment))  # the fresh environment's, not the project's
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

"""Every tutorial, as downloaded from the built site, runs top to bottom in a fresh kernel."""

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT

TUTORIALS = sorted(p.stem for p in (ROOT / "docs" / "tutorials").glob("*.py"))


@pytest.mark.parametrize("name", TUTORIALS)
def test_downloaded_notebook_runs_in_a_fresh_kernel(built_site, name, tmp_path):
    downloaded = built_site.path / "tutorials" / name / f"{name}.ipynb"
    notebook = nbformat.read(downloaded, as_version=4)
    nbformat.validate(notebook)
    assert any(cell.cell_type == "code" for cell in notebook.cells)
    # A neutral working folder: the notebook may rely only on installed packages.
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    ).execute()
    errors = [
        o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert errors == []

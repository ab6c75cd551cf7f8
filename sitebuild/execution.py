"""Execute each tutorial once, in a fresh kernel, and keep the result until its inputs change.

The build runs it before MkDocs renders the tutorials (`sitebuild.tutorial_pages` turns the
result into the page), and the tests read what it wrote, so that one execution serves the page,
the download and the tests.

A tutorial ``docs/tutorials/<name>.py`` (jupytext percent format) runs top to bottom in a
fresh kernel whose working folder is an empty temporary one, so it can rely only on installed
packages. The result is kept under ``.cache/tutorials/<arithmetic>/<key>/tutorials/``, one folder of
executions per machine arithmetic (see `arithmetic`), so that testing under another CPU
capability does not discard the executions of this one:

- ``<name>.ipynb``: the executed notebook, with stable cell ids, no timings, solutions
  (cells tagged ``solution``) and the code of plots (cells tagged ``plot``) collapsed, and
  each run of printed text in one output (the kernel may flush a print in two messages), so
  that two executions give the same bytes;
- ``<name>.values.pickle``: the kernel's variables after the last cell, as `sitebuild.values`
  keeps them, for the tests to compare with their own references.

The key hashes the tutorial, every file it can import or include (``attn_ref``,
``snippets``), the pinned versions (``constraints.txt``) and this module with `sitebuild.values`;
its folder names the machine's part in the results: the CPU kernels PyTorch runs
(``ATEN_CPU_CAPABILITY`` can choose them) and its thread count, since both change the last bits
of what a tutorial prints. A change to any of them gives a new execution; nothing else does.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from traitlets.config import Config

from sitebuild import plot_style

CODE_DIRS = ("attn_ref", "snippets")
VERSIONS = "constraints.txt"
HOW = (  # how a tutorial is executed and kept, and how its plots look
    Path("sitebuild/execution.py"),
    Path("sitebuild/values.py"),
    Path("sitebuild/matplotlibrc"),
)
VALUES_MODULE = Path(__file__).resolve().parent / "values.py"
CACHE = Path(".cache") / "tutorials"
WORKERS = 2  # the build machine's cores

# Run after the last cell, then removed. The kernel cannot import sitebuild (its working folder is
# empty and the project is not installed there), so it runs values.py by its path.
SAVE_VALUES = "import runpy as _runpy\n_runpy.run_path({module!r})['save'](globals(), {path!r})"


def arithmetic() -> str:
    """What, besides the code, changes the numbers a tutorial prints: PyTorch's CPU kernels and threads."""
    import torch  # here, not at the top: the hooks' other work does not need it

    return f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads"


def code_digest(root: Path) -> str:
    """Hash of every file the tutorials can import or include, of the pinned versions, and of
    the way they are executed. (The arithmetic they run on names the cache's folder.)"""
    digest = hashlib.sha256()
    paths = [path for folder in CODE_DIRS for path in sorted((root / folder).rglob("*.py"))]
    for path in [*paths, root / VERSIONS, *(root / how for how in HOW)]:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_folder(source: Path, root: Path, digest: str | None = None) -> Path:
    """Where the execution of ``source`` with today's code is (or will be) kept."""
    key = hashlib.sha256(source.read_bytes() + (digest or code_digest(root)).encode()).hexdigest()[:16]
    return root / CACHE / re.sub(r"[^\w.]+", "-", arithmetic()) / key


def executed_notebook(source: Path, root: Path, digest: str | None = None) -> Path:
    """``<cache folder>/tutorials/<name>.ipynb``: the folder serves as a docs folder of its own."""
    return cache_folder(source, root, digest) / "tutorials" / f"{source.stem}.ipynb"


def saved_values(notebook: Path) -> Path:
    return notebook.with_suffix(".values.pickle")


def execute_all(sources: list[Path], root: Path) -> dict[Path, Future]:
    """Start executing every tutorial whose result is not kept yet, ``WORKERS`` kernels at a time.

    Returns, for each source, a future that resolves to its executed notebook.
    """
    digest = code_digest(root)
    pool = ThreadPoolExecutor(max_workers=WORKERS)
    running = {}
    for source in sources:
        target = executed_notebook(source, root, digest)
        if target.is_file():
            running[source] = Future()
            running[source].set_result(target)
        else:
            running[source] = pool.submit(execute, source, target, root)
    pool.shutdown(wait=False)
    return running


def prune(root: Path, keep: set[Path]) -> None:
    """Remove this arithmetic's kept executions that no current tutorial uses."""
    for folder in {folder.parent for folder in keep}:
        for kept in folder.glob("*"):
            if kept not in keep:
                shutil.rmtree(kept)


def execute(source: Path, target: Path, root: Path) -> Path:
    """Run ``source`` top to bottom in a fresh kernel; write the notebook and its variables.

    The kernel imports ``attn_ref`` from ``root``, the project being built, whatever else is installed.
    """
    notebook = jupytext.read(source)
    for number, cell in enumerate(notebook.cells):
        cell.id = f"cell-{number}"  # stable ids: the same file every time
        tags = cell.metadata.get("tags", [])
        if "solution" in tags:  # an exercise's solution: opened by the reader
            cell.metadata["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
        elif "plot" in tags:  # plotting code: the plot shows, the code opens on demand
            cell.metadata["jupyter"] = {"source_hidden": True}
    partial = target.with_name(target.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    values = saved_values(partial)
    save = SAVE_VALUES.format(module=str(VALUES_MODULE), path=str(values))
    notebook.cells.append(nbformat.v4.new_code_cell(save))
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as sockets:
        NotebookClient(
            notebook,
            kernel_name="python3",
            config=Config(KernelManager={"transport": "ipc", "ip": str(Path(sockets) / "kernel")}),
            timeout=600,
            record_timing=False,
            resources={"metadata": {"path": folder}},  # the kernel's working folder: empty
        ).execute(
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
                "MATPLOTLIBRC": str(plot_style.RC_FILE),  # the site's plot style
            }
        )
    notebook.cells.pop()
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = _merge_printed_text(cell.outputs)
    nbformat.write(notebook, partial)
    values.replace(saved_values(target))
    partial.replace(target)  # last, so that a kept notebook always has its values beside it
    return target


def _merge_printed_text(outputs: list) -> list:
    """One output per run of printed text of one stream."""
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (
            output.output_type == "stream"
            and previous is not None
            and previous.output_type == "stream"
            and previous.name == output.name
        ):
            previous.text += output.text
        else:
            merged.append(output)
    return merged

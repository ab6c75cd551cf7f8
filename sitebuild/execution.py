"""Execute each tutorial once, in a fresh kernel, and keep the result until its code changes.

Execution is a stage of its own, before the site is rendered: ``python -m sitebuild execute``
runs it (``make test`` and CI do, first), the build runs it for any tutorial not kept yet, and the
tests read what it wrote, so that one execution serves the page, the download and the tests.

A tutorial ``docs/tutorials/<name>.py`` (jupytext percent format) runs top to bottom in a fresh
kernel whose working folder is an empty temporary one, so it can rely only on installed packages
and ``attn_ref``. The result is kept under ``.cache/tutorials/<arithmetic>/<key>/tutorials/``:

- ``<name>.ipynb``: the executed notebook, with stable cell ids, no timings, solutions (cells
  tagged ``solution``) and the code of plots (``plot``) collapsed, and each run of printed text in
  one output (the kernel may flush a print in two messages), so that two executions give the same
  bytes;
- ``<name>.values.pickle``: the kernel's variables after the last cell, as `sitebuild.values`
  keeps them, for the tests to compare with their own references (trained models among them:
  a model is trained once per arithmetic and recipe, by its tutorial, and the tests read it);
- ``<name>.files/``: the files the tutorial wrote in its working folder (the induction
  tutorial's trained model, for the playground), which the build publishes beside the page.

The key hashes the tutorial's code cells (their source and tags, not its prose: editing a
sentence runs nothing again; `notebook` puts today's prose around the kept outputs), every file
it can import (``attn_ref``; ``snippets`` too if its code names them), the pinned versions
(``constraints.txt``)
and how it is executed (this module, `sitebuild.values`, the plot style). The folder above the key
names the arithmetic, read from a process started as the kernels are (`arithmetic`): PyTorch's
version, the CPU kernels it runs (``ATEN_CPU_CAPABILITY`` can choose them) and its thread count,
since they change the last bits of what a tutorial prints. Executions for another arithmetic are
kept beside, never read.

Beside them, each tutorial's last execution time (``seconds.json``: the slowest start first) and
the CPU its kernel spent, with its subprocesses, and when (``cpu.json``, for ``make measure``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from nbformat import NotebookNode
from traitlets.config import Config

from sitebuild import plot_style
from sitebuild.progress import Progress

CODE_DIRS = ("attn_ref", "snippets")  # the code pages import or include
PACKAGE = ("attn_ref",)  # what every tutorial imports; snippets only when its code names them
VERSIONS = "constraints.txt"
HOW = (  # how a tutorial is executed and kept, and how its plots look
    Path("sitebuild/execution.py"),
    Path("sitebuild/values.py"),
    Path("sitebuild/matplotlibrc"),
)
VALUES_MODULE = Path(__file__).resolve().parent / "values.py"
TUTORIALS = Path("docs") / "tutorials"
CACHE = Path(".cache") / "tutorials"
WORKERS_VARIABLE = "SITE_EXECUTION_WORKERS"  # kernels at a time; the machine's cores by default
CELL_TAGS = {"solution", "plot", "check", "deeper", "measured"}
_durations_lock = threading.Lock()  # the executing threads record their times in one file

# Run after the last cell, then removed. The kernel's working folder is empty, so it runs
# values.py by its path. It prints the CPU seconds the kernel has spent, its own and those of the
# subprocesses it waited for (a tutorial may start some).
SAVE_VALUES = (
    "import runpy as _runpy, resource as _resource\n"
    "_runpy.run_path({module!r})['save'](globals(), {path!r})\n"
    "print(sum(getattr(_resource.getrusage(_who), _field) for _who in (_resource.RUSAGE_SELF, "
    "_resource.RUSAGE_CHILDREN) for _field in ('ru_utime', 'ru_stime')))"
)
ARITHMETIC_PROBE = (
    "import torch; print(f'torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, "
    "{torch.get_num_threads()} threads')"
)


def arithmetic() -> str:
    """What, besides the code, changes the numbers a tutorial prints: PyTorch's version, CPU kernels
    and threads, as a kernel started now would have them (read from a new process with the kernels'
    environment, not from this one, whose thread count a test may have changed)."""
    # pytest names the running test in the environment; nothing else in it changes that often
    environment = {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}
    return _arithmetic(tuple(sorted(environment.items())))


@functools.cache
def _arithmetic(environment: tuple[tuple[str, str], ...]) -> str:
    probe = [sys.executable, "-c", ARITHMETIC_PROBE]
    return subprocess.run(
        probe, env=dict(environment), capture_output=True, text=True, check=True
    ).stdout.strip()


def kernel_environment(root: Path) -> dict[str, str]:
    """The environment a tutorial's kernel runs in: this one, with ``root``'s attn_ref importable
    and the site's plot style."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
        "MATPLOTLIBRC": str(plot_style.RC_FILE),
    }


def workers() -> int:
    """How many tutorials execute at once: ``$SITE_EXECUTION_WORKERS``, or one per core."""
    return int(os.environ.get(WORKERS_VARIABLE) or len(os.sched_getaffinity(0)))


def code_digest(root: Path, folders: tuple[str, ...] = CODE_DIRS) -> str:
    """Hash of every file in ``folders`` (by default all the code the pages can import or
    include), of the pinned versions, and of the way tutorials are executed. (The arithmetic
    they run on names the cache's folder.)"""
    digest = hashlib.sha256()
    paths = [path for folder in folders for path in sorted((root / folder).rglob("*.py"))]
    for path in [*paths, root / VERSIONS, *(root / how for how in HOW)]:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def prepared(source: Path) -> NotebookNode:
    """The tutorial as a notebook, ready to run: stable cell ids, solutions and plotting code folded.

    Fails on a cell whose marker line carries anything but tags (``# %% [markdown] Some text``):
    jupytext reads such text as the cell's metadata, and it vanishes from the page.
    """
    notebook = jupytext.read(source)
    for number, cell in enumerate(notebook.cells):
        unknown = set(cell.metadata) - {"tags", "lines_to_next_cell"}
        carried = sorted(unknown) or sorted(set(cell.metadata.get("tags", [])) - CELL_TAGS)
        if carried:
            first = cell.source.splitlines()[0] if cell.source else ""
            raise ValueError(
                f"{source.name}: the marker of the cell starting {first!r} carries {carried}; a marker "
                f"line holds only '# %%', '[markdown]' and tags from {sorted(CELL_TAGS)}"
            )
        cell.metadata.pop("lines_to_next_cell", None)
        cell.id = f"cell-{number}"  # stable ids: the same file every time
        tags = cell.metadata.get("tags", [])
        if "solution" in tags:  # an exercise's solution: opened by the reader
            cell.metadata["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
        elif "plot" in tags:  # plotting code: the plot shows, the code opens on demand
            cell.metadata["jupyter"] = {"source_hidden": True}
    return notebook


def _code_key(notebook: NotebookNode) -> bytes:
    """What of a tutorial runs: its code cells, their order and tags."""
    code = [
        (cell.source, cell.metadata.get("tags", [])) for cell in notebook.cells if cell.cell_type == "code"
    ]
    return json.dumps(code).encode()


def digests(root: Path) -> dict[tuple[str, ...], str]:
    """`code_digest` of what a tutorial can run: ``attn_ref``, with or without ``snippets``."""
    return {folders: code_digest(root, folders) for folders in (PACKAGE, CODE_DIRS)}


def cache_folder(source: Path, root: Path, known: dict[tuple[str, ...], str] | None = None) -> Path:
    """Where the execution of ``source``'s code with today's project is (or will be) kept.

    Its key covers ``snippets`` only if the tutorial's code names them: a change to a page's
    snippet runs no tutorial again.
    """
    code = _code_key(prepared(source))
    folders = CODE_DIRS if b"snippets" in code else PACKAGE
    digest = (known or digests(root))[folders]
    key = hashlib.sha256(code + digest.encode()).hexdigest()[:16]
    return root / CACHE / re.sub(r"[^\w.]+", "-", arithmetic()) / key


def executed_notebook(source: Path, root: Path, known: dict[tuple[str, ...], str] | None = None) -> Path:
    """``<cache folder>/tutorials/<name>.ipynb``: the folder serves as a docs folder of its own."""
    return cache_folder(source, root, known) / "tutorials" / f"{source.stem}.ipynb"


def saved_values(notebook: Path) -> Path:
    return notebook.with_suffix(".values.pickle")


def written_files(notebook: Path) -> Path:
    """The folder of the files the tutorial wrote in its working folder."""
    return notebook.with_suffix(".files")


def notebook(source: Path, executed: Path) -> NotebookNode:
    """The tutorial as readers get it: today's cells, with the outputs of its kept execution.

    The code is the code that ran (the key says so); the prose may be newer than the execution.
    """
    current = prepared(source)
    kept = [cell for cell in nbformat.read(executed, as_version=4).cells if cell.cell_type == "code"]
    code = [cell for cell in current.cells if cell.cell_type == "code"]
    if [cell.source for cell in code] != [cell.source for cell in kept]:
        raise ValueError(f"{executed} is not an execution of {source}'s code")
    for cell, ran in zip(code, kept, strict=True):
        cell.outputs, cell.execution_count = ran.outputs, ran.execution_count
    return current


def execute_all(sources: list[Path], root: Path) -> dict[Path, Future]:
    """Start executing every tutorial whose result is not kept yet, `workers` kernels at a time,
    the slowest first (by their last execution's time), so the last to finish is a short one.

    Returns, for each source, a future that resolves to its executed notebook.
    """
    known = digests(root)
    pool = ThreadPoolExecutor(max_workers=workers())
    running, missing = {}, []
    for source in sources:
        target = executed_notebook(source, root, known)
        running[source] = Future()
        if target.is_file():
            running[source].set_result(target)
        else:
            missing.append((source, target))
    seconds = durations(root)
    progress = Progress(len(missing), len(sources) - len(missing), f"{arithmetic()}; {workers()} at a time")
    for source, target in sorted(missing, key=lambda pair: -seconds.get(pair[0].stem, 0.0)):
        _chain(pool.submit(execute, source, target, root, progress), running[source])
    pool.shutdown(wait=False)
    return running


def _chain(inner: Future, outer: Future) -> None:
    inner.add_done_callback(
        lambda done: (
            outer.set_exception(done.exception()) if done.exception() else outer.set_result(done.result())
        )
    )


def _durations_file(root: Path, name: str = "seconds.json") -> Path:
    return root / CACHE / re.sub(r"[^\w.]+", "-", arithmetic()) / name


def durations(root: Path) -> dict[str, float]:
    """Each tutorial's last execution, in seconds of wall time."""
    path = _durations_file(root)
    return json.loads(path.read_text()) if path.is_file() else {}


def cpu_times(root: Path) -> dict[str, tuple[float, str]]:
    """Each tutorial's last execution: the CPU seconds its kernel spent, and when it ended (UTC)."""
    path = _durations_file(root, "cpu.json")
    return (
        {name: tuple(kept) for name, kept in json.loads(path.read_text()).items()} if path.is_file() else {}
    )


def _record_duration(root: Path, name: str, seconds: float, cpu_seconds: float) -> None:
    ended = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with _durations_lock:
        for path, entry in [
            (_durations_file(root), round(seconds, 1)),
            (_durations_file(root, "cpu.json"), [round(cpu_seconds, 1), ended]),
        ]:
            kept = json.loads(path.read_text()) if path.is_file() else {}
            partial = path.with_name(f"{path.name}.{os.getpid()}")
            partial.write_text(json.dumps({**kept, name: entry}, indent=1, sort_keys=True))
            partial.replace(path)


def prune(root: Path, keep: set[Path]) -> None:
    """Remove this arithmetic's kept executions that no current tutorial uses."""
    for folder in {folder.parent for folder in keep}:
        for kept in folder.glob("*"):
            if kept.is_dir() and kept not in keep:
                shutil.rmtree(kept)


def execute(source: Path, target: Path, root: Path, progress: Progress | None = None) -> Path:
    """Run ``source`` top to bottom in a fresh kernel; write the notebook and its variables.

    The kernel imports ``attn_ref`` from ``root``, the project being built, whatever else is installed.
    ``progress`` hears of each cell as it starts, and of the end.
    """
    started = time.perf_counter()
    try:
        cpu_seconds = _execute(source, target, root, progress)
    except BaseException:
        if progress:
            progress.finished(source.stem, time.perf_counter() - started, failed=True)
        raise
    seconds = time.perf_counter() - started
    _record_duration(root, source.stem, seconds, cpu_seconds)
    if progress:
        progress.finished(source.stem, seconds)
    return target


def _execute(source: Path, target: Path, root: Path, progress: Progress | None) -> float:
    """Execute ``source`` into ``target``; the CPU seconds its kernel spent."""
    notebook = prepared(source)
    code_cells = [index for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"]

    def cell_started(cell: NotebookNode, cell_index: int) -> None:
        if progress and cell_index in code_cells:  # not the cell that saves the values, added below
            progress.cell_started(source.stem, code_cells.index(cell_index) + 1, len(code_cells), cell.source)

    partial = target.with_name(target.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    values = saved_values(partial)
    written = written_files(partial)
    shutil.rmtree(written, ignore_errors=True)  # left by an execution that failed
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
            on_cell_start=cell_started,
        ).execute(env=kernel_environment(root))
        shutil.copytree(folder, written)
    saving = notebook.cells.pop()  # its printing may come in more than one message
    cpu_seconds = float("".join(o.text for o in saving.outputs if o.get("name") == "stdout"))
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = _merge_printed_text(cell.outputs)
    nbformat.write(notebook, partial)
    values.replace(saved_values(target))
    shutil.rmtree(written_files(target), ignore_errors=True)
    written.replace(written_files(target))
    partial.replace(target)  # last, so that a kept notebook always has its values beside it
    return cpu_seconds


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

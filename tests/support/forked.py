"""Run a Python file the way ``python FILE`` would, in a fresh process that starts warm.

Importing torch, NumPy and matplotlib takes about two seconds; most snippets run in a
few hundredths. Each run forks a new process from a server that has imported those three
libraries and nothing else (multiprocessing's "forkserver"), so the file still starts with
an empty ``__main__``, its own imports and its own random state, and pays only for itself.
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from sitebuild import values as saved_values
from sitelook.project import ROOT

PRELOADED = ["torch", "numpy", "matplotlib.pyplot"]
os.environ.setdefault("MPLBACKEND", "Agg")  # before the server starts: no window, no display

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOADED)


@dataclass(frozen=True)
class Finished:
    """How the run ended, what it printed, and its variables at the end (`sitebuild.values`)."""

    returncode: int
    stdout: str
    stderr: str
    values: dict = field(default_factory=dict)


def run_python(path: Path, cwd: Path, timeout: float = 600) -> Finished:
    """Run ``path`` as ``__main__`` in a new process whose working folder is ``cwd``."""
    with tempfile.TemporaryDirectory() as folder:
        stdout, stderr, kept = (Path(folder) / name for name in ("stdout", "stderr", "values"))
        process = _context.Process(
            target=_main, args=(str(path), str(cwd), str(stdout), str(stderr), str(kept))
        )
        process.start()
        process.join(timeout)
        if process.is_alive():
            process.kill()
            raise TimeoutError(f"{path} ran for more than {timeout} s")
        values = saved_values.load(kept) if kept.is_file() else {}
        return Finished(process.exitcode, stdout.read_text(), stderr.read_text(), values)


def _main(path: str, cwd: str, stdout: str, stderr: str, kept: str) -> None:
    with open(stdout, "w") as out, open(stderr, "w") as err:
        os.dup2(out.fileno(), 1)  # file descriptors, so that output from C code is caught too
        os.dup2(err.fileno(), 2)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    os.chdir(cwd)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker per core already: threads would spin (conftest.py)
        sys.modules["torch"].set_num_threads(1)
    sys.argv = [path]
    sys.path[0] = os.path.dirname(path)
    sys.path.insert(1, str(ROOT))  # this project's attn_ref, whatever copy of it is installed
    try:
        namespace = runpy.run_path(path, run_name="__main__")
        saved_values.save(namespace, kept)
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    else:
        code = 0
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

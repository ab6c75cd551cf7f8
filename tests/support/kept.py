"""Results kept under a key of everything they read, as the tutorials' executions are.

A strict build of the site is kept under the digest of every project file, the tutorials'
executions, the installed distributions and the arithmetic; a page's look in the browser under
the digest of the page, the files it loads, the browser and the code that looks. The same inputs
give the same result, so a second run reads it instead of computing it again; a change to any input
is a new key, and the check runs. A clean clone (CI) has no ``.cache`` and runs everything.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

from filelock import FileLock

from sitebuild import execution
from sitelook.project import ROOT, build, project_files

SITES = ROOT / ".cache" / "site"
LOOKS = ROOT / ".cache" / "browser"
KEEP_SITES = 2  # the last two builds: one per arithmetic, as CI's two passes make
FORGET_AFTER = 7 * 24 * 3600  # seconds a look not read again is kept


def digest(parts: Iterable[bytes | str]) -> str:
    """One SHA-256 over ``parts``, each length-prefixed so that no two sequences collide."""
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "little") + data)
    return hasher.hexdigest()[:24]


def _files(root: Path, paths: Iterable[Path]) -> Iterable[bytes | str]:
    for path in paths:
        yield path.relative_to(root).as_posix()
        yield path.read_bytes()


def site_key(executions: Iterable[Path]) -> str:
    """What a strict build reads: the project's files but the tests (of which it reads only which
    tutorials have one), the kept ``executions`` (their folders: notebook, values, written files),
    every installed distribution's version, the arithmetic."""
    folders = sorted({notebook.parent for notebook in executions})
    kept_files = [path for folder in folders for path in sorted(folder.rglob("*")) if path.is_file()]
    distributions = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())
    return digest(
        [
            *_files(ROOT, [p for p in project_files(ROOT) if p.relative_to(ROOT).parts[0] != "tests"]),
            *_files(ROOT, kept_files),
            *distributions,
            *sorted(path.name for path in (ROOT / "tests" / "tutorials").glob("test_*.py")),  # checklist.py
            sys.version,
            execution.arithmetic(),
        ]
    )


def built_site(key: str) -> Path:
    """The folder that holds the site built for ``key`` (``site/`` and the build's ``build.log``),
    building it first if it is not kept. Fails with the build's error."""
    SITES.mkdir(parents=True, exist_ok=True)
    folder = SITES / key
    with FileLock(SITES / "build.lock"):
        if not (folder / "build.log").is_file():
            partial = SITES / f"{key}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            _, log = build(ROOT, partial / "site")
            (partial / "build.log").write_text(log)
            partial.rename(folder)
        os.utime(folder)  # last used, for the pruning below
        for old in sorted(SITES.glob("*/"), key=lambda f: f.stat().st_mtime)[:-KEEP_SITES]:
            shutil.rmtree(old, ignore_errors=True)
    return folder


def remembered(name: str, key: str, compute: Callable[[], object]) -> object:
    """``compute()``'s result, kept as ``.cache/browser/<name>-<key>``: computed once per key."""
    LOOKS.mkdir(parents=True, exist_ok=True)
    path = LOOKS / f"{name}-{key}"
    if path.is_file():
        os.utime(path)
        return pickle.loads(path.read_bytes())
    result = compute()
    partial = path.with_suffix(f".{os.getpid()}")
    partial.write_bytes(pickle.dumps(result))
    partial.replace(path)
    cutoff = time.time() - FORGET_AFTER
    for old in LOOKS.iterdir():
        if old.stat().st_mtime < cutoff:
            old.unlink(missing_ok=True)
    return result

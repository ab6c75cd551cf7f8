"""A reader with only Python follows the home page's "Run it yourself": a virtual environment,
PyTorch's CPU build, the site's wheel and Jupyter; then runs a downloaded tutorial with the page's
own command. Nothing of the project is needed, no CUDA comes with it, and it fits the disk the page
states.

The commands are read from the built home page (its Linux tab) and run by bash as written, the
site's address (mkdocs.yml's ``site_url``, where the page says the wheel is) standing for the test's
server that serves the built site, with one exception: where PyTorch's CPU index (scripts/cpu_torch.py's ``CPU_INDEX``) cannot be reached
from this machine, the torch line stands this machine's own package sources in for it: it asks
them for the torch version constraints.txt pins (the CPU wheel on this kind of machine), after a
dry run confirms they resolve it without CUDA, and the test warns that it did so.

Installing takes minutes, so the environment is kept (``.cache/fresh-environment/<key>/``) under a
key of everything that decides what pip installs: the page's commands, the wheel's requirements,
the pinned versions and this Python. Later runs install the new wheel into it, without touching the
rest, and `pip check` confirms that what is there still satisfies what the wheel requires.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import warnings
import zipfile
from pathlib import Path

import nbformat
import pytest

from scripts.cpu_torch import CPU_INDEX, CUDA_PACKAGE, pinned_torch, reachable
from sitebuild.page_html import ancestors, elements
from sitelook.budgets import READER_ENVIRONMENT_MB
from sitelook.project import ROOT
from tests.support.copied import article, text

KEPT = ROOT / ".cache" / "fresh-environment"
TORCH_LINE = re.compile(rf"^pip install torch --index-url {re.escape(CPU_INDEX)}$", re.M)


def _requirements(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    return "\n".join(line for line in lines if line.startswith(("Requires-Dist:", "Requires-Python:")))


def _home_commands(home: str) -> tuple[str, str]:
    """The Linux tab's setup commands and the command that runs a notebook, as "Run it yourself" shows them."""
    section = article(home)
    section = section[section.index('id="run-it-yourself"') :]
    found = elements(section)
    labels = [
        text(section[e.start_end : e.end])
        for e in found
        if e.tag == "label" and e.parent and "tabbed-labels" in e.parent.classes
    ]
    tabs = [e for e in found if "tabbed-block" in e.classes]
    codes = [
        [text(section[c.start_end : c.end]).strip() for c in found if c.tag == "code" and tab in ancestors(c)]
        for tab in tabs
    ]
    (setup,) = codes[labels.index("Linux")]
    (run,) = [
        text(section[c.start_end : c.end]).strip()
        for c in found
        if c.tag == "code" and text(section[c.start_end : c.end]).startswith("jupyter execute")
    ]
    return setup, run


def _with_stand_in(setup: str) -> str:
    """``setup``, its torch line from this machine's sources if PyTorch's CPU index cannot be reached."""
    assert TORCH_LINE.search(setup), "the home page installs torch from PyTorch's CPU index"
    if reachable():
        return setup
    torch = pinned_torch(ROOT / "constraints.txt")
    warnings.warn(
        f"{CPU_INDEX} cannot be reached from this machine: {torch} comes from its own package sources",
        stacklevel=2,
    )
    return TORCH_LINE.sub(f"pip install {torch}", setup)


def _environment(setup: str, wheel: Path, wheel_url: str) -> Path:
    """The folder in which ``setup`` (the page's commands) made the reader's environment."""
    commands = setup.replace(wheel_url, "<wheel>")
    key = hashlib.sha256(
        "\n".join(
            [commands, _requirements(wheel), (ROOT / "constraints.txt").read_text(), sys.version]
        ).encode()
    ).hexdigest()[:16]
    folder = KEPT / key
    (venv,) = re.findall(r"^python3 -m venv (\S+)$", setup, flags=re.M)
    python = folder / venv / "bin" / "python"
    if (folder / "complete").is_file():
        subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", wheel_url],
            check=True,
            timeout=900,
        )
    else:
        shutil.rmtree(KEPT, ignore_errors=True)  # an environment for other commands: not needed again
        folder.mkdir(parents=True)
        subprocess.run(
            ["bash", "-c", "set -e\n" + setup], cwd=folder, check=True, timeout=3600, env=_reader()
        )
        (folder / "complete").touch()
    subprocess.run([python, "-m", "pip", "check"], check=True, capture_output=True)
    return folder / venv


def _reader() -> dict[str, str]:
    """This environment, less what points at the project or its virtual environment."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTEST_CURRENT_TEST"}
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if ".venv" not in p)
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "PATH": path}


def _disk_mb(folder: Path) -> float:
    """What ``folder`` takes on disk, as ``du`` counts it: the blocks of every file, each once."""
    seen, blocks = set(), 0
    for path in folder.rglob("*"):
        status = path.lstat()
        if (status.st_dev, status.st_ino) not in seen:
            seen.add((status.st_dev, status.st_ino))
            blocks += status.st_blocks
    return blocks * 512 / 1e6


@pytest.mark.fresh_environment
def test_a_reader_installs_as_the_home_page_says_and_a_downloaded_notebook_runs(built_site, server, tmp_path):
    (wheel,) = (built_site.path / "downloads").glob("attn_ref-*.whl")
    home = (built_site.path / "index.html").read_text()
    setup, run = _home_commands(home)
    (site_url,) = re.findall(r'<link rel="canonical" href="([^"]+/)">', home)  # the site's own address
    published_url = site_url + f"downloads/{wheel.name}"
    assert f"pip install {published_url}" in setup
    # The site as a reader finds it at its address is, here, the test's server.
    setup, wheel_url = setup.replace(site_url, server), server + f"downloads/{wheel.name}"
    environment = _environment(_with_stand_in(setup), wheel, wheel_url)
    python = environment / "bin" / "python"

    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True
    )
    installed = [package["name"].lower() for package in json.loads(listed.stdout)]
    assert [name for name in installed if CUDA_PACKAGE.match(name)] == []
    assert {"torch", "attn-ref", "jupyterlab"} <= set(installed)
    cuda = subprocess.run(
        [python, "-c", "import torch; print(torch.version.cuda)"], capture_output=True, text=True
    )
    assert cuda.stdout.strip() == "None", cuda  # PyTorch built without CUDA
    assert _disk_mb(environment) < READER_ENVIRONMENT_MB

    (notebook_name,) = re.findall(r"^jupyter execute (\S+\.ipynb)$", run)
    notebook_file = tmp_path / notebook_name
    notebook_file.write_bytes(urllib.request.urlopen(server + f"tutorials/{notebook_name}").read())
    notebook = nbformat.read(notebook_file, as_version=4)
    assert f"%pip install {published_url}" in notebook.cells[0].source  # what the notebook itself says
    assert "/#run-it-yourself" in notebook.cells[0].source
    where = subprocess.run(
        [python, "-c", "import attn_ref; print(attn_ref.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not the project's folder, whose attn_ref `python -c` would import first
        env=_reader(),
    )
    assert where.stdout.startswith(str(environment))  # the fresh environment's, not the project's
    installed_package = Path(where.stdout.strip()).parent
    with zipfile.ZipFile(wheel) as archive:  # the wheel just served, not an earlier one
        for name in archive.namelist():
            if name.startswith("attn_ref/") and name.endswith(".py"):
                assert (installed_package.parent / name).read_bytes() == archive.read(name), name
    finished = subprocess.run(
        ["bash", "-c", f"source {environment / 'bin' / 'activate'}\n{run}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_reader(),
        timeout=900,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "Traceback" not in finished.stderr

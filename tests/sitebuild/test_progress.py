"""sitebuild.progress: executing the tutorials prints a line per tutorial as it ends (n of N, its
time), a line when a cell trains a model, and a line when nothing has been said for a while.

The first test executes two tiny tutorials in a project of their own, as the build and
``python -m sitebuild execute`` do (the same `execution.execute_all`), in a few seconds.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from sitebuild import execution, progress
from sitelook.project import ROOT

QUICK = "# %% [markdown]\n# # Quick\n\n# %%\nprint('quick')\n"
TRAINS = (
    "# %% [markdown]\n# # Trains\n\n# %%\nimport time\n\n\ndef train_toy(steps):\n    time.sleep(0.2 * steps)\n\n\n"
    "# %%\nhistory = train_toy(steps=3)\n"
)


@pytest.fixture
def project(tmp_path):
    for folder in execution.CODE_DIRS:
        (tmp_path / folder).mkdir()
    shutil.copy2(ROOT / execution.VERSIONS, tmp_path)
    for how in execution.HOW:
        (tmp_path / how).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / how, tmp_path / how)
    tutorials = tmp_path / execution.TUTORIALS
    tutorials.mkdir(parents=True)
    (tutorials / "quick.py").write_text(QUICK)
    (tutorials / "trains.py").write_text(TRAINS)
    return tmp_path


def _execute_by_command(project) -> str:
    finished = subprocess.run(
        [sys.executable, "-m", "sitebuild", "execute"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr
    return finished.stderr


def test_each_tutorial_is_reported_as_it_ends_with_its_time_and_what_it_trains(project):
    lines = _execute_by_command(project).splitlines()
    assert re.fullmatch(r"tutorials: 2 to execute, 0 kept \(torch .*; \d+ at a time\)", lines[0]), lines
    ends = [re.fullmatch(r"  \[(\d)/2\] (\w+) +(\d+\.\d) s", line) for line in lines]
    ends = [match for match in ends if match]
    assert [match[1] for match in ends] == ["1", "2"]
    assert sorted(match[2] for match in ends) == ["quick", "trains"]
    assert float(dict((match[2], match[3]) for match in ends)["trains"]) >= 0.6  # it slept that long
    assert "  trains: training, cell 2 of 2: history = train_toy(steps=3)" in lines
    assert not any("def train_toy" in line for line in lines)  # defining is not training
    assert re.fullmatch(r"tutorials: done in \d+\.\d s", lines[-1])
    again = _execute_by_command(project).splitlines()
    assert again[0].startswith("tutorials: all 2 kept (torch ")


def test_a_quiet_stretch_says_which_tutorials_are_still_running(monkeypatch):
    monkeypatch.setattr(progress, "QUIET", 0.2)
    said = io.StringIO()
    report = progress.Progress(1, 0, "arithmetic", stream=said)
    report.cell_started("slow", 3, 7, "x = 1")
    time.sleep(0.5)
    report.finished("slow", 0.5)
    lines = said.getvalue().splitlines()
    assert re.fullmatch(r"  \.\.\. still running: slow cell 3/7 \(0 s\)", lines[1]), lines
    assert lines[-1].startswith("  [1/1] slow")

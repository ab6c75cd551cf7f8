"""What `make` does before it spends minutes: PyTorch's CPU build or a one-line refusal
(scripts/cpu_torch.py), and a busy address refused before anything is installed or built
(scripts/free_address.py, `make serve`)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from scripts import cpu_torch
from sitelook.project import ROOT


@pytest.fixture
def pip_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(cpu_torch.subprocess, "run", lambda command, **_: calls.append(command[4:]))
    return calls


def test_torch_comes_from_pytorchs_cpu_index_when_it_answers(monkeypatch, pip_calls):
    monkeypatch.setattr(cpu_torch, "reachable", lambda: True)
    assert cpu_torch.main(ROOT / "constraints.txt") == 0
    assert pip_calls == [["--quiet", "--index-url", cpu_torch.CPU_INDEX, "torch==2.13.0"]]


def test_otherwise_from_pips_own_sources_if_they_have_it_without_cuda(monkeypatch, pip_calls):
    monkeypatch.setattr(cpu_torch, "reachable", lambda: False)
    monkeypatch.setattr(cpu_torch, "cuda_packages", lambda requirement: [])
    assert cpu_torch.main(ROOT / "constraints.txt") == 0
    assert pip_calls == [["--quiet", "torch==2.13.0"]]


def test_and_never_with_cuda_it_stops_with_one_line_before_any_download(monkeypatch, pip_calls, capsys):
    monkeypatch.setattr(cpu_torch, "reachable", lambda: False)
    monkeypatch.setattr(cpu_torch, "cuda_packages", lambda requirement: ["nvidia-cublas", "triton"])
    assert cpu_torch.main(ROOT / "constraints.txt") == 1
    assert pip_calls == []
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith("error: PyTorch's CPU index") and "nvidia-cublas" in said


def test_the_dry_run_tells_a_cuda_build_from_a_cpu_one(monkeypatch):
    """cuda_packages reads pip's report: here, a report of what PyPI's Linux torch brings."""
    report = {"install": [{"metadata": {"name": n}} for n in ("torch", "nvidia-cublas", "Triton", "numpy")]}

    def dry_run(command, **_):
        path = command[command.index("--report") + 1]
        with open(path, "w") as file:
            file.write(json.dumps(report))

    monkeypatch.setattr(cpu_torch.subprocess, "run", dry_run)
    assert cpu_torch.cuda_packages("torch==2.13.0") == ["nvidia-cublas", "triton"]


def test_make_serve_refuses_a_busy_address_in_one_line_before_building():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        process = subprocess.Popen(
            ["make", "--no-print-directory", "serve", f"SERVE_ADDR=127.0.0.1:{port}"],
            cwd=ROOT,
            env={
                k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")
            },  # as typed
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # so that a build started by mistake can be stopped whole
        )
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            out, err = process.communicate()
            pytest.fail(f"make serve went on with 127.0.0.1:{port} busy:\n{err[-2000:]}")
    assert process.returncode != 0
    assert time.monotonic() - started < 30
    lines = [line for line in err.splitlines() if not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert lines == [
        f"make serve: 127.0.0.1:{port} is in use (Address already in use); pick another address: "
        f"make serve SERVE_ADDR=127.0.0.1:{port + 1}"
    ]
    assert "Building documentation" not in out + err

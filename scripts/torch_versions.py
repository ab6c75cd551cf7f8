"""Run snippets/versions/fully_masked_rows.py under every PyTorch minor release from 1.13 to 2.13.

    .venv/bin/python -m scripts.torch_versions            # every version in VERSIONS
    .venv/bin/python -m scripts.torch_versions 2.4.1      # only these, merged into the table

For each version: a throwaway virtual environment in a temporary folder, ``pip install
torch==VERSION`` (with this machine's pip configuration), the probe run in it, the folder
deleted. The results go to snippets/versions/fully_masked_rows.json: version -> case -> value,
in the order of VERSIONS and of the probe's lines. pip prefers a +cpu wheel where its indexes
hold one (2.13.0 here); PyPI's Linux wheels of older releases are CUDA builds, which run on
the CPU as well but bring 2 to 3 GB of CUDA libraries each. All fifteen versions took 77 minutes
on 2 shared cores (3 to 7 minutes each, mostly downloading and unpacking wheels; pip kept no cache).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "snippets" / "versions" / "fully_masked_rows.py"
TABLE = PROBE.with_suffix(".json")
VERSIONS = [  # the latest patch of each minor release
    "1.13.1",
    "2.0.1",
    "2.1.2",
    "2.2.2",
    "2.3.1",
    "2.4.1",
    "2.5.1",
    "2.6.0",
    "2.7.1",
    "2.8.0",
    "2.9.1",
    "2.10.0",
    "2.11.0",
    "2.12.1",
    "2.13.0",
]


def parse(printed: str) -> dict[str, str]:
    """The probe's ``case: value`` lines as a dict, in printed order."""
    return dict(line.split(": ", 1) for line in printed.splitlines() if ": " in line)


def measure(version: str) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="torch-") as folder:
        python = Path(folder) / "bin" / "python"
        subprocess.run([sys.executable, "-m", "venv", folder], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", f"torch=={version}"], check=True)
        # A neutral working folder, as for the tests; the probe's stderr (profiler chatter) is dropped.
        probe = subprocess.run([python, PROBE], cwd=folder, capture_output=True, text=True)
        if probe.returncode:
            raise RuntimeError(f"the probe failed under torch {version}:\n{probe.stderr}")
        return parse(probe.stdout)


def main(versions: list[str]) -> None:
    table = json.loads(TABLE.read_text()) if TABLE.exists() else {}
    for version in versions:
        start = time.perf_counter()
        table[version] = measure(version)
        print(f"torch {version}: {time.perf_counter() - start:.0f} s", flush=True)
        ordered = {v: table[v] for v in VERSIONS if v in table}
        TABLE.write_text(json.dumps(ordered, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:] or VERSIONS)

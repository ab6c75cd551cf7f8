"""Install PyTorch's CPU build into this Python, before anything else asks for torch: ``make``'s setup.

PyPI's Linux wheels of torch bring CUDA (a dozen ``nvidia-*`` packages and triton, several GB); the
site runs on a CPU. So torch comes first, at the version ``constraints.txt`` pins:

1. from PyTorch's CPU index (``CPU_INDEX``) when it answers;
2. otherwise from pip's own sources (PyPI, and whatever pip's configuration adds, such as a folder of
   wheels), but only if pip resolves them to a build without CUDA: ``pip install --dry-run`` first,
   and a one-line error, before any download, if it would bring ``nvidia-*``, ``cuda-*`` or triton.

The rest of the install then finds torch there and leaves it. Only the standard library: it runs in
the new ``.venv`` before anything is installed. The fresh-environment test reads `CPU_INDEX` and
`reachable` from here, to install as the site tells a reader to.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA_PACKAGE = re.compile(r"^(nvidia-|cuda-|triton$)")
PIP_INSTALL = [sys.executable, "-m", "pip", "install", "--quiet"]


def reachable(url: str = CPU_INDEX, timeout: float = 5.0) -> bool:
    """Whether ``url`` answers (any HTTP status) within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(url + "/torch/", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except OSError:  # no name, no route, refused, timed out
        return False


def pinned_torch(constraints: Path) -> str:
    """``torch==<version>`` as ``constraints`` pins it."""
    (pin,) = re.findall(r"^torch==\S+", constraints.read_text(), flags=re.M)
    return pin


def cuda_packages(requirement: str) -> list[str]:
    """What pip would install for ``requirement`` from its own sources that belongs to CUDA (a dry run:
    it reads the packages' metadata, not their wheels)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        subprocess.run(
            [
                *PIP_INSTALL,
                "--dry-run",
                "--ignore-installed",
                "--report",
                str(report),
                requirement,
            ],
            check=True,
        )
        names = [item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]]
    return sorted(name for name in names if CUDA_PACKAGE.match(name))


def main(constraints: Path) -> int:
    requirement = pinned_torch(constraints)
    if reachable():
        print(f"{requirement}, CPU build, from PyTorch's CPU index ({CPU_INDEX})", flush=True)
        subprocess.run([*PIP_INSTALL, "--index-url", CPU_INDEX, requirement], check=True)
        return 0
    cuda = cuda_packages(requirement)
    if cuda:
        print(
            f"error: PyTorch's CPU index ({CPU_INDEX}) cannot be reached, and pip's other sources would "
            f"install {requirement} with CUDA ({', '.join(cuda[:3])}, ...: several GB); reach that index, "
            f"or put the CPU wheel of {requirement} where pip finds it (PIP_FIND_LINKS=<folder>)",
            file=sys.stderr,
        )
        return 1
    print(
        f"{requirement}, without CUDA, from pip's sources (PyTorch's CPU index cannot be reached)", flush=True
    )
    subprocess.run([*PIP_INSTALL, requirement], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "constraints.txt")))

"""check/check_unscaled.py, run beside unscaled_attention.py as the page's build runs it: every
property passes but the two the missing 1/sqrt(d_k) breaks, and the scaling's verdict names the
divisor the file used (1, no scaling) and the one it should have used (sqrt(d_k) of one head)."""

import pytest

from tests.support.forked import Finished, run_python
from tests.support.snippets import SNIPPETS

FOLDER = SNIPPETS / "check"


@pytest.fixture(scope="module")
def run() -> Finished:
    finished = run_python(FOLDER / "check_unscaled.py", cwd=FOLDER)
    assert finished.returncode == 0, finished.stderr
    return finished


def test_only_the_scaling_and_the_agreement_with_pytorch_fail(run):
    lines = run.stdout.replace("\n    ", " ").splitlines()  # a wrapped verdict read whole
    verdicts = dict(line.split(": ", 1) for line in lines)
    assert list(verdicts) == [
        "shape",
        "projections",
        "softmax",
        "causality",
        "heads",
        "scaling",
        "agreement with PyTorch",
    ]
    failed = [name for name, verdict in verdicts.items() if verdict != "passed"]
    assert failed == ["scaling", "agreement with PyTorch"]
    assert verdicts["scaling"].startswith("FAILED: scores are divided by 1.00 (no scaling)")
    assert "sqrt(d_k)" in verdicts["scaling"]
    assert "no scaling" in verdicts["agreement with PyTorch"]

"""The reference page's example of a reader's file: it runs on its own and prints nothing, and the
check command finds its one mistake (the scores are not divided by sqrt(d_k)) and nothing else."""

from attn_ref.check import check
from tests.support.snippets import SNIPPETS


def test_it_runs_and_prints_nothing(printed):
    assert printed == ""


def test_the_check_finds_only_the_missing_scaling():
    results = {r.name: r for r in check("causal-mha", SNIPPETS / "check" / "unscaled_attention.py")}
    assert [name for name, result in results.items() if not result.passed] == [
        "scaling",
        "agreement with PyTorch",
    ]
    assert results["scaling"].detail.startswith("scores are divided by 1.00 (no scaling)")

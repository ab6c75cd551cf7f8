"""bugs/draft_rewind.py: the drafter's cache rewound by min(rejected + 1, k) (lablup/mlxcel #994)
instead of k - 1 - a. The rewind counted by hand from what the drafter ran; the text against the
target's greedy text by full forward passes (no cache); the positions the drafter lacks recomputed
from the kept counts alone; the verdicts against those counts."""

import torch

from tests.support.printed import assert_shows
from tests.support.snippets import SNIPPETS
from tests.support.speculative_reference import greedy_by_full_passes


def rewinds():
    """The snippet's two rewind functions: its [bug] section, run alone."""
    source = (SNIPPETS / "bugs" / "draft_rewind.py").read_text()
    section = source.split("[start:bug]")[1].split("# --8<-- [end:bug]")[0]
    namespace = {}
    exec(section, namespace)
    return namespace["rewind_bug"], namespace["rewind_fix"]


def test_the_rewind_counted_by_hand():
    """The drafter ran the last token and guesses 0 .. k-2, k entries; the text it shares with the
    target ends at guess a - 1, so it keeps a + 1 of them (all k, and one short, if all were kept)."""
    bug, fix = rewinds()
    for k in range(1, 9):
        for a in range(k + 1):
            ran, shared = k, a + 1
            assert fix(k, a) == ran - shared
            if 0 < a < k:
                assert bug(k, a) - (ran - shared) == 2  # two too many, the title
            elif a == 0:
                assert bug(k, a) - (ran - shared) == 1  # capped at k
            else:
                assert bug(k, a) == 0 and ran - shared == -1  # one short, never made up


def test_the_symptom(printed, values):
    target, prompt = values["target"], values["prompt"]
    expected, _ = greedy_by_full_passes(target, torch.tensor(prompt), 60)
    runs = values["runs"]
    for name, (tokens, _, behind) in runs.items():
        assert tokens[: len(expected)] == expected  # the target's greedy text, whatever the drafter
        if name == "rewind_fix":
            assert max(behind) <= 1
        else:
            assert behind == sorted(behind) and behind[-1] > 10  # falls behind, never recovers
    assert sum(runs["rewind_fix"][1]) > 2 * sum(runs["rewind_bug"][1])  # the fix keeps far more
    assert "same text either way: True" in printed
    shown = []
    for _, kept, behind in runs.values():  # each rule's share kept (a rounded percentage), then lags
        shown += [(100 * sum(kept) / len(kept), 0.5 + 1e-9)] + [(behind[i], 0) for i in (0, 4, 9, 14)]
    assert_shows(printed, shown)


def test_the_verdicts(printed, values):
    worst = values["worst"]
    assert worst["rewind_bug"] > 1 and worst["rewind_fix"] <= 1
    lines = printed.splitlines()
    assert any(
        line.startswith("rewind_bug: the cache lags the text by at most") and line.endswith("FAILS")
        for line in lines
    )
    assert any(
        line.startswith("rewind_fix: the cache lags the text by at most") and line.endswith("passes")
        for line in lines
    )

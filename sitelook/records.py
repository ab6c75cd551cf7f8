"""What the last test runs took, kept for `make measure`: each run of the whole suite, or of the
fast tier, writes its date, its wall time and its five slowest tests (setup, call and teardown
added up) to ``.cache/test-runs/<label>.json`` (tests/conftest.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

FOLDER = Path(".cache") / "test-runs"
WHOLE_SUITE = "all"  # `pytest` over its testpaths with no -m: `make test`'s last stage
SLOWEST = 5


def label(markexpr: str) -> str:
    """The record's name for a run selected by ``markexpr``."""
    return WHOLE_SUITE if not markexpr else "m-" + "-".join(markexpr.split())


def write(root: Path, markexpr: str, wall_seconds: float, tests: dict[str, float], failed: int) -> Path:
    """Record a run: ``tests`` maps each test's id to its seconds."""
    slowest = sorted(tests.items(), key=lambda item: -item[1])[:SLOWEST]
    path = root / FOLDER / f"{label(markexpr)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "ended": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "markexpr": markexpr,
                "wall_seconds": round(wall_seconds, 1),
                "tests": len(tests),
                "failed": failed,
                "slowest": [[test, round(seconds, 1)] for test, seconds in slowest],
            },
            indent=1,
        )
    )
    return path


def read(root: Path, markexpr: str) -> dict | None:
    """The last recorded run selected by ``markexpr``, if any."""
    path = root / FOLDER / f"{label(markexpr)}.json"
    return json.loads(path.read_text()) if path.is_file() else None

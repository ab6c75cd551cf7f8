"""Each tutorial's test mirrors its path: docs/tutorials/<name>.py is tested by
tests/tutorials/test_<name>.py, whose ``tutorial`` fixture is that tutorial as the build
executed it (one execution serves the page, the download and the test), with ``printed`` (all it
printed) and ``values`` (its kernel's variables after the last cell) for short."""

from __future__ import annotations

import pytest

from tests.support.shown import ExecutedTutorial


@pytest.fixture(scope="module")
def tutorial(request: pytest.FixtureRequest, executed_tutorials) -> ExecutedTutorial:
    return executed_tutorials[request.path.stem.removeprefix("test_")]


@pytest.fixture(scope="module")
def printed(tutorial: ExecutedTutorial) -> str:
    return tutorial.printed()


@pytest.fixture(scope="module")
def values(tutorial: ExecutedTutorial) -> dict:
    return tutorial.values

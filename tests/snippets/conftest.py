"""Each snippet's test mirrors its path: snippets/<topic>/<name>.py is tested by
tests/snippets/<topic>/test_<name>.py, whose ``printed`` fixture is what that snippet
printed when run on its own in a fresh process."""

from __future__ import annotations

import runpy
from collections.abc import Iterator

import pytest

from tests.support.snippets import SNIPPETS, run_snippet, snippet_for


@pytest.fixture(scope="module")
def printed(request: pytest.FixtureRequest) -> str:
    """What this module's snippet printed, run on its own in a fresh process."""
    return run_snippet(snippet_for(request.path).relative_to(SNIPPETS).as_posix()).stdout


@pytest.fixture(scope="module")
def values(request: pytest.FixtureRequest) -> dict:
    """The variables this module's snippet left (data only, see `sitebuild.values`), from the same run."""
    return run_snippet(snippet_for(request.path).relative_to(SNIPPETS).as_posix()).values


@pytest.fixture(scope="module")
def figure(request: pytest.FixtureRequest) -> Iterator:
    """The figure ``fig`` that this module's snippet leaves, run in this process (a figure is
    not printed); closed afterwards."""
    import matplotlib.pyplot as plt

    fig = runpy.run_path(str(snippet_for(request.path)))["fig"]
    yield fig
    plt.close(fig)

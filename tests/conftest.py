"""Shared fixtures: build the site once, read the tutorials as that build executed them, serve the
site, start the browser. What they hand to a test (and every other helper) is in tests/support/."""

from __future__ import annotations

import os
import pickle
import time
from collections import defaultdict
from pathlib import Path

import pytest
from filelock import FileLock

from sitebuild import execution as tutorial_execution
from sitelook import records
from sitelook.browsing import CHROMIUM, CHROMIUM_ARGS
from sitelook.local_server import serve
from sitelook.project import ROOT, TUTORIALS
from tests.support import kept
from tests.support.built_site import BuiltSite
from tests.support.shown import ExecutedTutorial


def _run_folder(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A folder that every worker of this test run shares (under pytest-xdist, ``make test``)."""
    run_folder = tmp_path_factory.getbasetemp()
    return run_folder.parent if worker_id != "master" else run_folder  # a worker's folder sits in the run's


def _kept_executions() -> dict[Path, Path]:
    """Each tutorial's kept execution (its notebook), executing first those not kept yet. Called
    under the run's site lock, so that one worker executes while the others wait."""
    sources = sorted(TUTORIALS.glob("*.py"))
    running = tutorial_execution.execute_all(sources, ROOT)
    return {source: running[source].result() for source in sources}


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> BuiltSite:
    """The site, built with ``mkdocs build --strict`` once per input (tests/support/kept.py).

    The first worker to get here executes the tutorials that are not kept yet, then builds the site
    unless a build of the same inputs is kept; the others wait and use it.
    """
    run_folder = _run_folder(tmp_path_factory, worker_id)
    chosen, failed = run_folder / "site-folder", run_folder / "site-failed"
    with FileLock(run_folder / "site.lock"):
        if failed.is_file():  # once is enough: every test that needs the site fails with the build's error
            pytest.fail(failed.read_text(), pytrace=False)
        if not chosen.is_file():
            executions = _kept_executions()
            try:
                folder = kept.built_site(kept.site_key(executions.values()))
            except RuntimeError as error:
                failed.write_text(str(error))
                raise
            chosen.write_text(str(folder))
    folder = Path(chosen.read_text())
    return BuiltSite(folder / "site", (folder / "build.log").read_text(), folder)


@pytest.fixture(scope="session")
def executed_tutorials(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> dict[str, ExecutedTutorial]:
    """Every tutorial as the build executes it (the same kept executions the site is built from:
    tests/site/test_site.py checks that the downloads are these notebooks), and the values it kept.

    It needs no built site: a tutorial not executed yet is executed here, under the build's lock,
    so that a tutorial's test can run on its own in seconds once the tutorial is kept.
    """
    with FileLock(_run_folder(tmp_path_factory, worker_id) / "site.lock"):
        executions = _kept_executions()
    return {
        source.stem: ExecutedTutorial(
            tutorial_execution.notebook(source, notebook),
            pickle.loads(tutorial_execution.saved_values(notebook).read_bytes()),
        )
        for source, notebook in executions.items()
    }


@pytest.fixture(scope="session")
def server(built_site):
    with serve(built_site.path) as base:
        yield base


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is required in CI: apt-get install chromium")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def pytest_configure(config: pytest.Config) -> None:
    """Under ``make test`` every core runs a worker: PyTorch's own threads would only wait for one
    another (spinning, which costs CPU), so each worker computes on one. The tutorials' kernels are
    new processes with the environment's threads, whatever a worker sets here."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


def pytest_report_header() -> str:
    """Which arithmetic this run checks: the site's numbers may differ in their last bits elsewhere."""
    return f"arithmetic: {tutorial_execution.arithmetic()}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs the built site ``site``, and every other test that reads the
    tutorials' executions ``executed``; run one site test first, then every test that needs no
    site, then the rest.

    Under ``make test`` (``--no-loadscope-reorder`` keeps this order) the first worker builds the
    site while the others run the tests that need no site, instead of waiting for it.
    """
    needs_site = [item for item in items if "built_site" in item.fixturenames]
    for item in needs_site:
        item.add_marker(pytest.mark.site)
    for item in items:
        if "executed_tutorials" in item.fixturenames and item not in needs_site:
            item.add_marker(pytest.mark.executed)
    others = [item for item in items if item not in needs_site]
    items[:] = needs_site[:1] + others + needs_site[1:]


_this_run = {"started": time.perf_counter(), "seconds": defaultdict(float), "failed": 0}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each test's seconds (setup, call, teardown), for `make measure` (sitelook/records.py). Under
    xdist the controller hears every worker's reports."""
    _this_run["seconds"][report.nodeid] += report.duration
    _this_run["failed"] += report.failed


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A run of the whole suite, or of a marker selection of it, is recorded; a run of chosen files
    or tests (-k) is not."""
    config = session.config
    if hasattr(config, "workerinput") or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return
    if config.option.keyword or not _this_run["seconds"]:
        return
    wall = time.perf_counter() - _this_run["started"]
    records.write(ROOT, config.option.markexpr, wall, _this_run["seconds"], _this_run["failed"])

"""Print every build, test, size and quality figure of the site, with its target: ``make measure``.
``make measure ONLY=loop`` prints issue 46's table alone (`measure_loop`): the fast tier measured
live, the rest from what the last runs recorded, each with its date.

Builds and test runs happen in throwaway copies of the project, so the checkout's cache and
site/ are never touched, and "clean" means clean. The limits that tests also enforce come from
sitelook/budgets.py, as the tests' do, so each target has one number.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from urllib.parse import urlsplit

import nbformat

from sitebuild import execution as tutorial_execution
from sitebuild.page_html import elements
from sitelook import records
from sitelook.budgets import (
    BUILD_TARGET,
    COLD_TEST_TARGET,
    CORE_PAGE_SCREENS,
    CORE_PATH,
    CORE_PATH_MINUTES,
    CORE_PATH_SCREENS,
    FAST_TESTS_TARGET,
    FIRST_VISIT_BUDGET,
    KB,
    PAGE_BUDGET,
    PLAYGROUND,
    PLAYGROUND_WORDS,
    RELOAD_TARGET,
    SCREEN,
    SCREENS_WITHOUT_A_PICTURE,
    SEARCHES,
    SIDEWAYS_ON_A_PHONE,
    TEST_TARGET,
    TUTORIAL_CPU_TARGET,
    WORDS_PER_DIAGRAM,
)
from sitelook.local_server import serve
from sitelook.project import EXEC_BLOCK, PAGE_PATHS, ROOT, TUTORIALS, build, copy_project, html_pages

EDITED_PAGE = "docs/foundations/pipeline.md"
LOOP_RECORD = ROOT / ".cache" / "measure" / "loop.json"  # measure_tests' figures, for `ONLY=loop`
FAST_TIER = "not executed and not site and not browser"  # the Makefile's test-fast selection
INCLUDE = re.compile(r'^--8<-- "([^":]+)(?::(\w+))?"$', re.M)
TRANSFERRED = """() => performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource"))
  .reduce((sums, e) => [sums[0] + e.transferSize, sums[1] + e.decodedBodySize], [0, 0])"""


def row(name: str, value: str, target: str = "") -> None:
    print(f"  {name:<58} {value:>16}   {target}", flush=True)


def measure_builds(work: Path) -> Path:
    print("Build")
    first = copy_project(work / "a")
    seconds, _ = build(first, work / "site-a")
    sequential = sequential_seconds(work / "sequential")
    row("clean build (every tutorial executed)", f"{seconds:.1f} s", f"target <= {BUILD_TARGET:.0f} s")
    row("all of the site's code run once, one process after another", f"{sequential:.1f} s")
    row("clean build / sequential run", f"{seconds / sequential:.2f}", "target <= 1")
    seconds, _ = build(first, work / "site-a2")
    row("rebuild with nothing changed (tutorials kept)", f"{seconds:.1f} s")
    reload = serve_rebuild_seconds(first)
    row("live-reload rebuild after editing one page", f"{reload:.1f} s", f"target <= {RELOAD_TARGET} s")

    print("Reproducible and never stale")
    build(copy_project(work / "b"), work / "site-b")
    pages = [p.relative_to(work / "site-a") for p in html_pages(work / "site-a")]
    pages += [p.relative_to(work / "site-a") for p in (work / "site-a").rglob("*.ipynb")]
    differing = [p for p in pages if (work / "site-a" / p).read_bytes() != (work / "site-b" / p).read_bytes()]
    row("pages differing between two clean builds", f"{len(differing)} of {len(pages)}")
    unmeasured = [
        p
        for p in differing
        if _without_measured_cells(work / "site-a" / p) != _without_measured_cells(work / "site-b" / p)
    ]
    row("  the same, outside the cells tagged `measured`", f"{len(unmeasured)} of {len(pages)}", "target 0")
    for page in unmeasured:
        row(f"    {page}", "differs")
    init = first / "attn_ref" / "__init__.py"
    init.write_text(init.read_text() + "\nprint('changed after the first build')\n")
    build(first, work / "site-a3")
    notebooks = sorted(
        (work / "site-a3" / "tutorials").glob("*/index.html")
    )  # tutorials print attn_ref's output
    stale = [p for p in notebooks if "changed after the first build" not in p.read_text()]
    row("tutorials stale after a change to attn_ref", f"{len(stale)} of {len(notebooks)}", "target 0")
    return work / "site-a"


def _without_measured_cells(page: Path) -> list:
    """A notebook's cells, or a page's HTML, without the cells tagged ``measured`` (on a page:
    the ``<div class="measured">`` that sitebuild.tutorial_pages wraps them in)."""
    if page.suffix == ".ipynb":
        cells = nbformat.read(page, as_version=4).cells
        return [cell for cell in cells if "measured" not in cell.metadata.get("tags", [])]
    html = page.read_text()
    measured = [e for e in elements(html) if e.tag == "div" and "measured" in e.classes]
    parts, done = [], 0
    for element in measured:
        parts.append(html[done : element.start])
        done = element.end_end
    return [*parts, html[done:]]


def sequential_seconds(work: Path) -> float:
    """Each tutorial in a fresh kernel, then each Markdown page's executed blocks as one script
    in a fresh interpreter, one after another: the work a build cannot avoid."""
    work.mkdir()
    start = time.perf_counter()
    for source in sorted(TUTORIALS.glob("*.py")):
        started = time.perf_counter()
        tutorial_execution.execute(source, work / source.with_suffix(".ipynb").name, ROOT)
        row(f"  tutorial {source.stem}, in a fresh kernel", f"{time.perf_counter() - started:.1f} s")
    for page in sorted((ROOT / "docs").rglob("*.md")):
        blocks = [textwrap.dedent(body) for _, _, body in EXEC_BLOCK.findall(page.read_text())]
        code = "\n".join(_with_includes(block) for block in blocks)
        if code:
            script = work / f"{page.stem}.py"
            script.write_text(code)
            # from the project's root, as the build runs them (a block may read a file of the project)
            subprocess.run([sys.executable, str(script)], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def _with_includes(block: str) -> str:
    def include(match: re.Match) -> str:
        text = (ROOT / match[1]).read_text()
        if match[2]:
            text = text.split(f"# --8<-- [start:{match[2]}]\n", 1)[1].split(f"# --8<-- [end:{match[2]}]", 1)[
                0
            ]
        return text

    return INCLUDE.sub(include, block)


def serve_rebuild_seconds(project: Path) -> float:
    """Seconds from saving a Markdown page to the browsers' reload, under `make serve`."""
    log = project / "serve.log"
    with log.open("w") as out:
        command = [
            "make",
            "--no-print-directory",
            "serve",
            f"BIN={Path(sys.executable).parent}",
            "INSTALLED=",
        ]
        server = subprocess.Popen(
            [*command, f"SERVE_ADDR=127.0.0.1:{_free_port()}"],
            cwd=project,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(project)},
            start_new_session=True,
        )
    try:
        _wait_for(log, "Serving on", count=1)
        page = project / EDITED_PAGE
        start = time.perf_counter()
        page.write_text(page.read_text() + "\nAn edited line.\n")
        _wait_for(log, "Reloading browsers", count=1)
        return time.perf_counter() - start
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(log: Path, text: str, count: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while log.read_text().count(text) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {text!r} in {log}:\n{log.read_text()[-2000:]}")
        time.sleep(0.05)


def measure_tests(work: Path) -> dict[str, tuple[float, str]]:
    """The loop a maintainer lives with: the fast tier, then `make test` from an empty cache (as CI
    runs it, the virtual environment aside), again with everything kept, and after editing one
    tutorial's prose; each in a copy of the project with this environment's tools."""
    print(f"Tests ({len(os.sched_getaffinity(0))} cores)")
    project = copy_project(work / "tests")
    measured = {"fast": make_in(project, "test-fast", "the fast tier, `make test-fast`", FAST_TESTS_TARGET)}
    measured["cold"] = make_in(
        project, "test", "`make test` from an empty .cache (as CI runs it)", COLD_TEST_TARGET
    )
    measured["kept"] = make_in(project, "test", "`make test` again, executions kept", TEST_TARGET)
    tutorial = project / "docs" / "tutorials" / "kv_cache.py"
    tutorial.write_text(
        tutorial.read_text().replace("# %% [markdown]\n", "# %% [markdown]\n# An edited line.\n#\n", 1)
    )
    measured["prose"] = make_in(
        project, "test", "`make test` after editing one tutorial's prose", TEST_TARGET
    )
    ended = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    LOOP_RECORD.parent.mkdir(parents=True, exist_ok=True)
    LOOP_RECORD.write_text(
        json.dumps({name: [seconds, ended] for name, seconds in measured.items()}, indent=1)
    )
    whole = records.read(project, "")
    if whole:
        (ROOT / records.FOLDER).mkdir(parents=True, exist_ok=True)
        (ROOT / records.FOLDER / f"{records.WHOLE_SUITE}.json").write_text(json.dumps(whole, indent=1))
    return {name: (seconds, "measured live, now") for name, seconds in measured.items()}


def make_in(project: Path, target: str, name: str, goal: float) -> float:
    """Run ``make target`` in ``project`` with this environment's tools; print and return its seconds."""
    tools = [f"BIN={Path(sys.executable).parent}", "INSTALLED="]
    start = time.perf_counter()
    result = subprocess.run(
        ["make", "--no-print-directory", target, *tools],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    row(name, f"{seconds:.0f} s", f"target <= {goal:.0f} s")
    row("  pytest's summary", lines[-1].strip("= ") if lines else result.stderr[-200:])
    return seconds


def measure_loop(work: Path, measured: dict[str, tuple[float, str]] | None = None) -> None:
    """Issue 46's table: the loop's times against their bounds, each tutorial's execution CPU, and
    the five slowest tests. ``measured``: the test times `measure_tests` just took; without them
    the fast tier is run now (in a copy) and the rest is read from the last full `make measure`."""
    cores = len(os.sched_getaffinity(0))
    print(f"The loop (issue 46; {cores} cores, load average {os.getloadavg()[0]:.1f} now)")
    fast_project = None
    if measured is None:
        fast_project = copy_project(work / "fast")
        fast = make_in(
            fast_project, "test-fast", "the fast tier, `make test-fast`, measured now", FAST_TESTS_TARGET
        )
        kept = json.loads(LOOP_RECORD.read_text()) if LOOP_RECORD.is_file() else {}
        measured = {"fast": (fast, "measured live, now")}
        measured |= {
            name: (seconds, f"recorded {ended} by make measure") for name, (seconds, ended) in kept.items()
        }
    for name, title, goal in [
        ("fast", "fast tier, `make test-fast` (wall)", FAST_TESTS_TARGET),
        ("kept", "`make test`, executions kept, nothing changed", TEST_TARGET),
        ("prose", "`make test` after one page's prose changed", TEST_TARGET),
        ("cold", "`make test` from an empty .cache (venv kept)", COLD_TEST_TARGET),
    ]:
        if name in measured:
            seconds, when = measured[name]
            verdict = "ok" if seconds <= goal else "OVER"
            row(title, f"{seconds:.0f} s", f"bound <= {goal:.0f} s: {verdict}; {when}")
        else:
            row(title, "not measured yet", f"bound <= {goal:.0f} s; the full `make measure` measures it")

    print(
        f"Each tutorial's execution, CPU seconds (kernel and its subprocesses; bound {TUTORIAL_CPU_TARGET:.0f} s)"
    )
    cpu = tutorial_execution.cpu_times(ROOT)
    for source in sorted(TUTORIALS.glob("*.py")):
        if source.stem not in cpu:
            row(f"  {source.stem}", "not recorded", "no execution has recorded its CPU yet")
            continue
        seconds, ended = cpu[source.stem]
        verdict = "OVER" if seconds > TUTORIAL_CPU_TARGET else "ok"
        row(f"  {source.stem}", f"{seconds:.1f} s", f"{verdict}; executed {ended}")

    whole = records.read(ROOT, "")
    source = "the last run of the whole suite"
    if whole is None and fast_project is not None:
        whole, source = (
            records.read(fast_project, FAST_TIER),
            "the fast tier just run (no whole-suite run recorded)",
        )
    if whole is None:
        row("five slowest tests", "no run recorded", "the whole suite's runs record them (tests/conftest.py)")
        return
    print(
        f"Five slowest tests, of {source} ({whole['ended']}, {whole['tests']} tests, {whole['wall_seconds']:.0f} s)"
    )
    for test, seconds in whole["slowest"]:
        row(f"  {test[-56:]}", f"{seconds:.1f} s")


def measure_sizes(site: Path) -> None:
    print("Light")
    sent = {page: len(gzip.compress(page.read_bytes(), mtime=0)) for page in html_pages(site)}
    largest = max(sent, key=sent.get)
    row(
        f"largest page as sent, gzip ({largest.relative_to(site)})",
        f"{sent[largest] / KB:.0f} KB",
        f"target <= {PAGE_BUDGET / KB:.0f} KB",
    )
    total = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    row("built site, all files", f"{total / KB / KB:.1f} MB")


def measure_in_browser(site: Path) -> None:
    from playwright.sync_api import sync_playwright

    from sitelook.browsing import CHROMIUM, CHROMIUM_ARGS, Tab, reading, search_first_hit

    with serve(site) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        outside: set[str] = set()
        transfers = {}
        for path in PAGE_PATHS:
            tab = Tab(browser, base).open(path)  # a first visit
            transfers[path or "home"] = tab.page.evaluate(TRANSFERRED)
            outside.update(urlsplit(url).netloc for url in tab.outside)
            tab.close()
        worst = max(transfers, key=lambda p: transfers[p][0])
        row(
            f"heaviest first visit ({worst}), transferred",
            f"{transfers[worst][0] / KB:.0f} KB",
            f"target <= {FIRST_VISIT_BUDGET / KB:.0f} KB",
        )
        row("  the same, uncompressed", f"{transfers[worst][1] / KB:.0f} KB")
        row(
            "first visit of the home page",
            f"{transfers['home'][0] / KB:.0f} KB",
            f"target <= {FIRST_VISIT_BUDGET / KB:.0f} KB",
        )
        row("hosts other than the site requested", ", ".join(sorted(outside)) or "none", "target none")

        print(f"Reading (screens of 1280 x {SCREEN}; sideways: at 375 px)")
        sideways, read = 0, {}
        for path in PAGE_PATHS:
            if not path or path.startswith(("reference/", "notation/")):
                continue
            wide = Tab(browser, base, viewport={"width": 1280, "height": SCREEN}).open(path)
            desktop = read[path] = reading(wide.page, SCREEN)
            wide.close()
            narrow = Tab(browser, base, viewport={"width": 375, "height": 800}, is_mobile=True).open(path)
            phone = reading(narrow.page, 800)
            narrow.close()
            sideways += phone["sideways_formulas"] + phone["sideways_plots"]
            row(
                f"  {path}",
                f"{desktop['screens']:.1f} screens",
                f"{desktop['prose_words']} words, code {desktop['code_share']:.0%}, {desktop['figures']} figures "
                f"({desktop['diagrams']} diagrams), longest block {desktop['longest_code']} lines, sideways "
                f"{phone['sideways_formulas']} + {phone['sideways_plots']}",
            )
        row(
            "formulas and plots scrolling sideways at 375 px",
            str(sideways),
            f"target <= {SIDEWAYS_ON_A_PHONE}",
        )
        measure_core_path(read)

        print("Search")
        home = Tab(browser, base).open("")
        for query, expected in SEARCHES.items():
            landed = search_first_hit(home.page, base, query)
            verdict = "ok" if landed in expected else "expected " + " or ".join(expected)
            row(f'"{query}" lands on', landed or "home", verdict)
        home.close()
        browser.close()


def measure_core_path(read: dict[str, dict]) -> None:
    """Issue #43's figures of the core path: each page's screens, words, diagrams, longest stretch
    without a picture and stated minutes, and the path's totals with the playground."""
    print("Core path (issue #43)")
    pages = [*CORE_PATH, PLAYGROUND]
    for path in pages:
        m = read[path]
        row(
            f"  {path}",
            f"{m['screens']:.1f} screens",
            f"target <= {CORE_PAGE_SCREENS:.0f}; {m['prose_words']} words, {m['diagrams']} diagrams, "
            f"{m['screens_without_a_picture']:.1f} screens without a picture (target <= "
            f"{SCREENS_WITHOUT_A_PICTURE:.0f}), {m['minutes']} min",
        )
    screens = sum(read[p]["screens"] for p in pages)
    minutes = sum(read[p]["minutes"] for p in pages)
    words = sum(read[p]["prose_words"] for p in pages)
    diagrams = sum(read[p]["diagrams"] for p in pages)
    row("the path and its playground, screens", f"{screens:.1f}", f"target <= {CORE_PATH_SCREENS:.0f}")
    row("  stated minutes", str(minutes), f"target <= {CORE_PATH_MINUTES}")
    per_diagram = f"{words / diagrams:.0f}" if diagrams else f"{words} words, no diagram"
    row("  visible words per explanatory diagram", per_diagram, f"target <= {WORDS_PER_DIAGRAM}")
    row(
        "  the playground's visible words",
        str(read[PLAYGROUND]["prose_words"]),
        f"target <= {PLAYGROUND_WORDS}",
    )


def measure_publishable(site: Path) -> None:
    print("Publishable")
    row("404 page", "yes" if (site / "404.html").is_file() else "no", "target yes")
    row("site_url set", "yes" if "site_url:" in (ROOT / "mkdocs.yml").read_text() else "no", "target yes")
    workflow = ROOT / ".github" / "workflows" / "pages.yml"
    row("GitHub Pages workflow", "yes" if workflow.is_file() else "no", "target yes")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.measure")
    parser.add_argument("only", nargs="?", choices=["loop"], help="loop: issue 46's table alone")
    only = parser.parse_args().only
    with tempfile.TemporaryDirectory() as folder:
        if only == "loop":
            measure_loop(Path(folder))
            return
        site = measure_builds(Path(folder))
        measure_sizes(site)
        measure_in_browser(site)
        measure_publishable(site)
        measure_loop(Path(folder), measure_tests(Path(folder)))


if __name__ == "__main__":
    main()

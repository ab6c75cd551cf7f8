"""``python -m sitebuild execute``: execute every tutorial not kept yet (`sitebuild.execution`), with
a line per tutorial as it ends (`sitebuild.progress`).

The build and the tests would execute them too, when they need them; running the stage first
gives its time a line of its own, and lets the tests that read the executions start at once.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from sitebuild import execution


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m sitebuild")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("execute", help="execute every tutorial whose execution is not kept yet")
    run.add_argument(
        "names", nargs="*", help="only these tutorials (docs/tutorials/<name>.py); all by default"
    )
    run.add_argument(
        "--workers",
        type=int,
        help=f"kernels at a time (default: ${execution.WORKERS_VARIABLE} or one per core)",
    )
    arguments = parser.parse_args(argv)
    if arguments.workers:
        os.environ[execution.WORKERS_VARIABLE] = str(arguments.workers)
    root = Path.cwd()
    sources = sorted((root / execution.TUTORIALS).glob("*.py"))
    if arguments.names:
        unknown = set(arguments.names) - {source.stem for source in sources}
        if unknown:
            parser.error(f"no tutorial named {', '.join(sorted(unknown))} in {execution.TUTORIALS}")
        sources = [source for source in sources if source.stem in arguments.names]
    started = time.perf_counter()
    running = execution.execute_all(sources, root)  # prints a line per tutorial as it ends
    for future in running.values():
        future.result()  # a failing tutorial fails here, with its error
    print(f"tutorials: done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

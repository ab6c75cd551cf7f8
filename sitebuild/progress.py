"""What the tutorials' execution prints while it runs, a line per step, as pip and pytest do.

A first build executes every tutorial (minutes, with models trained); without these lines it would
be silent after "Building documentation...". On stderr, with the build's own log:

    tutorials: 3 to execute, 15 kept (torch 2.13.0+cpu, AVX512, 2 threads; 2 at a time)
      induction_heads: training, cell 12 of 30: history = train_induction(model, steps=200, ...)
      [1/3] causal_self_attention   4.8 s
      ... still running: induction_heads cell 12/30 (40 s)
      [2/3] induction_heads        25.4 s

A cell that calls a function named ``train...`` announces what it trains (its first such line, from
the tutorial's own code); when nothing has been printed for `QUIET` seconds, a line says which
tutorials are still running, on which cell, and for how long that cell has run.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import TextIO

QUIET = 20.0  # seconds without a line before "still running"
TRAINING = re.compile(r"^(?!\s*def ).*\btrain\w*\(.*$", re.M)  # a call of train_induction(...) and the like
WIDEST_LINE = 120


class Progress:
    """Lines about ``total`` tutorials being executed, ``kept`` others read from the cache."""

    def __init__(self, total: int, kept: int, setting: str, stream: TextIO | None = None) -> None:
        self.total, self.done = total, 0
        self.stream = stream or sys.stderr
        self.lock = threading.Lock()
        self.running: dict[str, tuple[int, int, float]] = {}  # tutorial: (cell, cells, its start)
        self.last_line = time.monotonic()
        self.stopped = threading.Event()
        if total == 0:
            self._line(f"tutorials: all {kept} kept ({setting})")
            return
        self._line(f"tutorials: {total} to execute, {kept} kept ({setting})")
        threading.Thread(target=self._watch, daemon=True).start()

    def cell_started(self, name: str, number: int, cells: int, source: str) -> None:
        """Cell ``number`` (from 1) of ``cells`` of tutorial ``name`` starts; its code is ``source``."""
        with self.lock:
            self.running[name] = (number, cells, time.monotonic())
        training = TRAINING.search(source)
        if training:
            self._line(f"  {name}: training, cell {number} of {cells}: {training[0].strip()}")

    def finished(self, name: str, seconds: float, failed: bool = False) -> None:
        with self.lock:
            self.running.pop(name, None)
            self.done += 1
            done = self.done
        width = len(str(self.total))
        outcome = "FAILED after" if failed else ""
        self._line(f"  [{done:>{width}}/{self.total}] {name:<34} {outcome}{seconds:6.1f} s")
        if done == self.total:
            self.stopped.set()

    def _line(self, text: str) -> None:
        with self.lock:
            if len(text) > WIDEST_LINE:
                text = text[: WIDEST_LINE - 3] + "..."
            print(text, file=self.stream, flush=True)
            self.last_line = time.monotonic()

    def _watch(self) -> None:
        while not self.stopped.wait(QUIET / 4):
            now = time.monotonic()
            with self.lock:
                quiet = now - self.last_line >= QUIET
                running = [
                    f"{name} cell {cell}/{cells} ({now - start:.0f} s)"
                    for name, (cell, cells, start) in sorted(self.running.items())
                ]
            if quiet and running:
                self._line("  ... still running: " + ", ".join(running))

"""The grid's one progress display: units done / running / failed / queued and an ETA, one updating line
on a terminal, plain lines in a log (on each change, and every half minute while nothing changes), by
the project's one bar-or-lines rule (foundation/training/console.py)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence

from foundation.training import console

STATES = ("done", "running", "failed", "queued")


class GridProgress:
    """Counts of the units' states, shown as they change."""

    def __init__(self, total: int, progress: bool | None = None):
        self.total, self.mode = total, console.progress_mode(progress)
        self.started = time.monotonic()
        self.clock = console.LineClock()
        self.last: tuple[int, ...] | None = None

    def text(self, counts: Counter) -> str:
        """`grid: 3/8 done, 2 running, 0 failed, 3 queued, ETA 4m10s`."""
        ended = counts["done"] + counts["failed"]
        left = console.eta(ended, self.total, time.monotonic() - self.started)
        return (f"grid: {counts['done']}/{self.total} done, {counts['running']} running, {counts['failed']} "
                f"failed, {counts['queued']} queued, ETA {left if ended < self.total else '0s'}")

    def show(self, states: Sequence[str]) -> None:
        counts = Counter(states)
        key = tuple(counts[state] for state in STATES)
        changed, self.last = key != self.last, key
        if self.mode == "bar":
            sys.stderr.write("\r\x1b[K" + self.text(counts))
            sys.stderr.flush()
        elif self.mode == "lines" and (changed or self.clock.due()):
            self.clock.last = time.monotonic()
            console.line(self.text(counts))

    def close(self) -> None:
        if self.mode == "bar":
            sys.stderr.write("\n")
            sys.stderr.flush()

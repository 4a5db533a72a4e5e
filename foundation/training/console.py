"""Training progress on the console: a bar on a terminal, plain lines in a log file, or nothing.

A tqdm bar written to a file is one endless line of carriage returns, and tqdm turns itself off
when stderr is not a terminal: a batch job's log showed no progress at all. Every loop takes
`progress: bool | None` and reads it through `progress_mode`, the one rule for bar or lines.
Part of the training kit (CONTRIBUTING.md): imports nothing else of ours.
"""

from __future__ import annotations

import sys
import time

LINE_EVERY_S = 30.0  # a line per half minute: a long run's log stays readable, a stalled one shows


def progress_mode(progress: bool | None) -> str:
    """"bar", "lines" or "off": True forces the bar, False silences; None picks bar on a terminal."""
    if progress is False:
        return "off"
    if progress or (_is_terminal(sys.stdout) and _is_terminal(sys.stderr)):  # the bar draws on stderr
        return "bar"
    return "lines"


def _is_terminal(stream) -> bool:
    return bool(getattr(stream, "isatty", None) and stream.isatty())


class LineClock:
    """Whether a progress line is due: the first time asked, then once per `every_s` seconds."""

    def __init__(self, every_s: float = LINE_EVERY_S):
        self.every_s, self.last = every_s, None

    def due(self) -> bool:
        now = time.monotonic()
        if self.last is not None and now - self.last < self.every_s:
            return False
        self.last = now
        return True


def duration(seconds: float) -> str:
    """`2h05m`, `3m20s` or `12s`: short enough for an ETA."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def eta(done: float, total: float, elapsed_s: float) -> str:
    """Time left at the rate so far, or `?` before there is one."""
    return duration(elapsed_s * (total - done) / done) if done > 0 and elapsed_s > 0 else "?"


def line(text: str) -> None:
    """One progress line on stdout, flushed: a log file shows it at once."""
    print(text, flush=True)

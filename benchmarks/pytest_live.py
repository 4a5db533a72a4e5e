"""A pytest plugin for the GPU check: each test's outcome and time, and a failure's traceback, printed as
soon as that test ends rather than in pytest's closing summary.

The check runs `pytest -m cuda` under a time limit; the first GPU window (2026-11-27) killed it at that
limit with three failures recorded only as "FFF", their tracebacks still held for the summary that never
came. With `-p benchmarks.pytest_live` a killed run has printed everything up to the test it was in.
(pytest-instafail does this too; the GPU image lacks it, and this is the one hook it needs.)
"""

from __future__ import annotations

import sys


def pytest_runtest_logreport(report) -> None:
    # a test's phases: setup, call, teardown; report each one that failed, and the call's outcome
    if report.when != "call" and not report.failed:
        return
    outcome = "ERROR in " + report.when if report.failed and report.when != "call" else report.outcome.upper()
    print(f"\n[live] {report.nodeid}: {outcome} in {report.duration:.1f}s", file=sys.stderr, flush=True)
    if report.failed:
        print(report.longreprtext[-6000:], file=sys.stderr, flush=True)

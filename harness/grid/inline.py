"""The inline executor (`--executor inline`): a grid's units in this one process, unit after unit.

No child process, no pool, on any machine: each unit is what `python -m harness.grid.unit SPEC` runs
(harness/grid/unit.py's main, on the spec written whole under the grid's folder, as the pool writes it),
called here, its output in its own log file. The driver polls once a round; a round runs the next unit to
its end, so the display moves between units. Ctrl-C or SIGTERM stops the unit at its next step with its
state saved (foundation/training/stop.py) and ends the grid, as a stopped run does; the rerun resumes it.
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass
from pathlib import Path

from foundation.infra.errors import UserError
from harness.grid.units import State, Unit, write_spec


@dataclass(frozen=True)
class InlineSettings:
    """The inline executor has no settings of its own."""


class Ran:
    """One unit of the inline executor: queued until its turn, then its exit status."""

    def __init__(self, unit: Unit, spec: Path, log: Path):
        self.unit, self.spec, self.log = unit, spec, log
        self.code: int | None = None

    def state(self) -> State:
        if self.code is None:
            return "queued"
        return "done" if self.code == 0 else "failed"


class InlineExecutor:
    """The Executor (harness/grid/executors.py) that runs every unit in the driver's own process."""

    name = "inline"

    def __init__(self, settings: InlineSettings):
        self.settings = settings
        self.queued: list[Ran] = []

    def check(self, units: list[Unit]) -> None:
        import torch

        widest = max((unit.gpus for unit in units), default=0)
        if widest > 1:
            raise UserError(f"--gpus-per-unit {widest} runs each unit under torchrun, which --executor "
                            "inline cannot (it trains in this one process); choose --executor local")
        if widest and not torch.cuda.is_available():
            raise UserError("--gpus-per-unit 1 asks for 1 GPU a unit and no GPU is visible here; leave "
                            "--gpus-per-unit out to train on the CPU")

    def start(self, units: list[Unit], log_dir: Path) -> list[Ran]:
        started = [Ran(unit, write_spec(unit, log_dir / "specs"), log_dir / "logs" / f"{unit.file_stem}.log")
                   for unit in units]
        self.queued = list(reversed(started))  # popped from the end: in the grid's order
        return started

    def poll(self) -> None:
        """Run the next queued unit to its end (one a round)."""
        if self.queued:
            ran = self.queued.pop()
            ran.code = _run(ran)

    def cancel(self) -> None:
        """The running unit has stopped (its Ctrl-C reached this process); the queued ones never start."""
        for ran in self.queued:
            ran.code = -1
        self.queued = []


def _run(ran: Ran) -> int:
    """harness/grid/unit.py's main on the unit's spec, its output to the unit's log; a stop (its state
    saved) interrupts the grid."""
    from harness.grid import unit

    ran.log.parent.mkdir(parents=True, exist_ok=True)
    with open(ran.log, "a", encoding="utf-8") as log, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        try:
            code = unit.main([str(ran.spec)])
        except Exception:  # noqa: BLE001 - a unit's failure is its own, the traceback in its log
            traceback.print_exc()
            code = 1
    if code > 128:  # stopped by Ctrl-C (130) or a signal, its state saved: the grid stops too
        ran.code = code
        raise KeyboardInterrupt
    return code

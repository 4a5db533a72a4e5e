"""What runs a grid's units: an executor starts them and reports each one's state to the driver."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from harness.grid.units import State, Unit


class Handle(Protocol):
    """One started unit, as its executor follows it."""

    unit: Unit
    log: Path  # the unit's own log file, named for it

    def state(self) -> State:
        """queued, running, done or failed (a unit whose process ended non-zero, or was cancelled)."""


class Executor(Protocol):
    """The local pool or Slurm."""

    name: str

    def check(self, units: list[Unit]) -> None:
        """Refuse bad input (UserError, one line) before anything is submitted or written."""

    def start(self, units: list[Unit], log_dir: Path) -> list[Handle]:
        """Start (or queue) every unit; each logs to its own file under log_dir."""

    def cancel(self) -> None:
        """Stop what is queued or running (the driver's Ctrl-C)."""

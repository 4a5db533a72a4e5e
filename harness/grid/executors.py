"""What runs a grid's units: an executor starts them and reports each one's state to the driver.

The executors are rows of one registry (as harness/kinds.py lists the kinds): a name for `--executor`, the
class that runs units ("module:attribute", loaded when used: building the CLI parser imports none of
them) and the settings class its flags come from (declared with `setting(flag=...)`, so `--help` and the
flags follow from the fields). A new executor (Slurm) is its module plus one row.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from foundation.infra.errors import UserError
from foundation.infra.settings import Flag, setting
from harness.grid.units import State, Unit


class Handle(Protocol):
    """One started unit, as its executor follows it."""

    unit: Unit
    log: Path  # the unit's own log file, named for it

    def state(self) -> State:
        """queued, running, done or failed (a unit whose process ended non-zero, or was cancelled)."""


class Executor(Protocol):
    """The local pool or Slurm, made from its settings (ExecutorRow.settings) by `Executor(settings)`."""

    name: str

    def check(self, units: list[Unit]) -> None:
        """Refuse bad input (UserError, one line) before anything is submitted or written."""

    def start(self, units: list[Unit], log_dir: Path) -> list[Handle]:
        """Start (or queue) every unit; each logs to its own file under log_dir."""

    def cancel(self) -> None:
        """Stop what is queued or running (the driver's Ctrl-C)."""


@dataclass(frozen=True)
class ExecutorRow:
    """One executor: its `--executor` name, its class and its settings class ("module:attribute")."""

    name: str
    executor: str
    settings: str
    title: str  # its flags' group in --help


EXECUTORS: dict[str, ExecutorRow] = {row.name: row for row in [
    ExecutorRow("local", "harness.grid.local:LocalPool", "harness.grid.executors:LocalSettings",
                "the local pool (--executor local): worker processes on this machine"),
    ExecutorRow("slurm", "harness.grid.slurm:SlurmExecutor", "harness.grid.slurm:SlurmSettings",
                "Slurm (--executor slurm): one job array through submitit"),
]}
GRID_TITLE = ("grid: each model x task x seed a unit (any of these flags, or several --model, runs one; "
              "harness/README.md, 'A grid of fine-tunings')")


@dataclass(frozen=True)
class GridSettings:
    """The driver's own settings: which executor, which slice of the grid, and each unit's GPUs."""

    executor: str = setting("local", role="runtime", flag=Flag("--executor", choices=EXECUTORS), help=(
        "what runs the units: local, a pool of worker processes on this machine; slurm, one job array "
        "on a Slurm cluster (through submitit)"))
    shard: str = setting("", role="runtime", flag=Flag("--shard", "K/N"), help=(
        "run only the K-th of N deterministic slices of the grid (1 <= K <= N), for any array-job engine; "
        "every slice into one --output-dir"))
    gpus_per_unit: int = setting(0, role="runtime", flag=Flag("--gpus-per-unit", "N"), help=(
        "GPUs each unit takes, on either executor; over 1 the unit runs under torchrun, one process a GPU "
        "(DDP). 0: the local pool gives a unit one GPU where there are GPUs; Slurm asks for none"))

    def __post_init__(self):
        if self.gpus_per_unit < 0:
            raise ValueError(f"--gpus-per-unit must not be negative (got {self.gpus_per_unit})")


@dataclass(frozen=True)
class LocalSettings:
    """The local pool's settings."""

    workers: int | None = setting(None, role="runtime", flag=Flag("--workers", "N"), help=(
        "units side by side (default: one per GPU; on a CPU machine one per core, the cores split "
        "among them as threads: one unit per core ran the most units an hour here, reports/results/"
        "performance.md, 'The grid's local pool')"))
    devices: str = setting("", role="runtime", flag=Flag("--devices", "0,2"), help=(
        "the GPUs to use, one worker pinned to each with CUDA_VISIBLE_DEVICES (default: every one visible)"))

    def __post_init__(self):
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"--workers must be at least 1 (got {self.workers}); leave it out for one a "
                             "GPU, or one a core on a CPU machine")


def add_grid_flags(parser: argparse.ArgumentParser) -> None:
    """The grid's flags on `harness run KIND`: the driver's, then each executor's (from their settings)."""
    from harness.config import add_flags
    from harness.kinds import load

    add_flags(parser.add_argument_group(GRID_TITLE), GridSettings, prefix="grid.")
    for row in EXECUTORS.values():
        add_flags(parser.add_argument_group(row.title), load(row.settings), prefix="grid.")


def given_flags(args: argparse.Namespace) -> list[str]:
    """The grid flags the command line gave (any of them asks for the grid)."""
    return sorted(key for key, value in vars(args).items() if key.startswith("grid.") and value is not None)


def load_grid(args: argparse.Namespace) -> tuple[GridSettings, Executor]:
    """The grid's settings and its executor, from the flags given; bad values as one UserError."""
    from harness.config import load_config
    from harness.kinds import load

    def values(cls) -> list[str]:
        return [f"{name}={getattr(args, 'grid.' + name)}" for name in cls.__dataclass_fields__
                if getattr(args, "grid." + name, None) is not None]

    grid = load_config(GridSettings, None, values(GridSettings))
    row = EXECUTORS[grid.executor]
    settings_class = load(row.settings)
    mine = set(settings_class.__dataclass_fields__)
    foreign = [key.removeprefix("grid.") for key in given_flags(args)
               if key.removeprefix("grid.") not in mine | set(GridSettings.__dataclass_fields__)]
    if foreign:
        raise UserError(f"--{foreign[0].replace('_', '-')} is not a setting of --executor {grid.executor}; "
                        "drop it or choose the executor it belongs to")
    return grid, load(row.executor)(load_config(settings_class, None, values(settings_class)))


def cpu_count() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

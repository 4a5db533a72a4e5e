"""`harness run KIND` as a grid: when it is one, and the grid its command line (or harness.run) describes.

A run is a grid when the user asks for one: several models, or any grid setting (--executor, --workers,
--devices, --shard, --gpus-per-unit, an executor's own); never because of the machine (a machine with
several GPUs runs one model's run in one process as any other does; --executor inline runs a grid's units
in this one process, on any machine). Under torchrun a grid is refused: its driver starts its units
itself (--gpus-per-unit N runs each under torchrun). Every bad value is one UserError before anything is
written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError
from harness.grid import executors, plan


def wanted(models: Sequence[str], given: Mapping[str, Any]) -> bool:
    """Whether this `harness run` goes through the grid: several models, or a grid setting given."""
    grid = len(models) > 1 or bool(given)
    if grid and "WORLD_SIZE" in os.environ:  # every rank would drive a grid of its own
        what = f"{len(models)} models" if len(models) > 1 else f"--{next(iter(given)).replace('_', '-')}"
        raise UserError(f"a grid ({what}) starts its units itself and cannot run under torchrun; run it "
                        "without torchrun (--gpus-per-unit N runs each unit under torchrun across N GPUs), "
                        "or give torchrun one model and no grid flag")
    return grid


def plan_grid(kind: str, models: Sequence[str], description: Any, task_file_dir: Path | None,
              settings: tuple[Any, ...], given: Mapping[str, Any], *, seeds: int, output_dir: Path | None,
              default_root: Path, argv: Sequence[str] | None = None, tracking_uri: str | None = None,
              search: dict | None = None) -> tuple[Any, executors.Executor]:
    """The Grid (harness/grid/driver.py) and its executor; `argv`: the command's words, which retry what is
    missing once the output folder is added where it was not given (None: harness.run)."""
    from foundation.infra.secrets import echoed
    from harness.grid.driver import Grid  # torch: after every cheap check of the settings

    if seeds < 1:
        raise UserError(f"--seeds must be at least 1 (got {seeds})")
    settings_, executor = executors.load_grid(given)
    shard = plan.parse_shard(settings_.shard)
    if shard and output_dir is None:
        raise UserError("--shard needs --output-dir: every slice, wherever it runs, writes into that folder")
    root = output_dir or default_root
    output_dirs = tuple(root / name for name in plan.run_names(models)) if len(models) > 1 else (root,)
    grid_dir = root / plan.GRID_DIR
    retry = ("the same harness.run call" if argv is None
             else f"harness {echoed([*argv, *([] if output_dir else ['--output-dir', str(root)])])}")
    grid = Grid(kind=kind, models=tuple(models), output_dirs=output_dirs, grid_dir=grid_dir,
                description=description, settings=settings, seeds=seeds, shard=shard,
                retry=retry, task_file_dir=task_file_dir, tracking_uri=tracking_uri,
                report_dir=None if shard else grid_dir / "leaderboard", gpus_per_unit=settings_.gpus_per_unit,
                search=search)
    return grid, executor

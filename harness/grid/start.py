"""`harness run KIND` as a grid: when it is one, and the grid its command line describes.

A run is a grid when it names several models, gives any grid flag (--executor, --workers, --devices,
--shard, an executor's own), or sees several GPUs with more than one unit to train; otherwise `harness run`
is the one in-process run it always was. Every bad value is one UserError before anything is written.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError
from foundation.infra.secrets import echoed
from harness.grid import executors, plan


def wanted(args: argparse.Namespace, models: list[str], description: Any, settings: tuple[Any, ...]) -> bool:
    """Whether this `harness run` goes through the grid."""
    if len(models) > 1 or executors.given_flags(args):
        return True
    if "WORLD_SIZE" in os.environ:  # one unit across GPUs under torchrun: the in-process run's DDP
        return False
    units = len(description.grid_tasks()) * args.seeds
    return units > 1 and _gpu_count() > 1


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def run(args: argparse.Namespace, kind: str, models: list[str], description: Any, task_file_dir: Path | None,
        settings: tuple[Any, ...], default_root: Path) -> int:
    """Plan and run the grid this command line describes; its exit status."""
    from harness.grid.driver import Grid, run_grid  # torch: after every cheap check of the settings

    if args.params_from:
        raise UserError("--params-from re-measures one model's search in one process; drop the grid's flags "
                        "and list one model")
    if args.seeds < 1:
        raise UserError(f"--seeds must be at least 1 (got {args.seeds})")
    settings_, executor = executors.load_grid(args)
    shard = plan.parse_shard(settings_.shard)
    if shard and args.output_dir is None:
        raise UserError("--shard needs --output-dir: every slice, wherever it runs, writes into that folder")
    root = args.output_dir or default_root
    output_dirs = tuple(root / name for name in plan.run_names(models)) if len(models) > 1 else (root,)
    grid_dir = root / plan.GRID_DIR
    argv = list(getattr(args, "argv", None) or [])
    if args.output_dir is None:
        argv += ["--output-dir", str(root)]
    grid = Grid(kind=kind, models=tuple(models), output_dirs=output_dirs, grid_dir=grid_dir,
                description=description, settings=settings, seeds=args.seeds, shard=shard,
                retry=f"harness {echoed(argv)}", task_file_dir=task_file_dir,
                tracking_uri=args.tracking_uri, report_dir=None if shard else grid_dir / "leaderboard",
                gpus_per_unit=settings_.gpus_per_unit)
    return run_grid(grid, executor)

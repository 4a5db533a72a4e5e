"""`harness experiment efficiency` with a grid flag (--workers, --executor slurm, ...): the arms'
fine-tunings as one grid.

Without one, each arm is fine-tuned in this process right after its pre-training (the default, and the
demo's path). With one, every arm is pre-trained first (one device, in turn, as before), then every arm x
task x seed is a unit of one grid (harness/grid: the local pool or Slurm), each arm's results in glue/ARM
as the in-process path leaves them; the tables and the report follow once the grid has run. Rerunning the
command keeps what is done: finished pre-trainings and every (task, seed) the arms' results.json hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError
from harness.grid.units import Unit
from reports import results_schema


def check(grid_settings: Any, executor: Any) -> None:
    """Refuse what an experiment's grid cannot do, and what its executor refuses (no sbatch, a partition,
    more GPUs a unit than the pool has), before any pre-training."""
    if grid_settings.shard:
        raise UserError(f"--shard {grid_settings.shard} slices a `harness run` grid; every slice of an "
                        "experiment would pre-train every arm: drop --shard (--executor slurm for a cluster)")
    # a unit as the grid's will be, but for its model: the executors check what it asks for
    executor.check([Unit(kind="glue", model="", task="", seed=0, output_dir=Path("."),
                         gpus=grid_settings.gpus_per_unit)])


def finetune_arms(exp: Any, job: Any, models: dict[str, str]) -> dict[str, dict]:
    """Every arm x task x seed of the experiment `exp` through its grid's executor, each arm as `job` (the
    experiment's GLUE Job) fine-tunes it into glue/ARM; each arm's results.json body, by name."""
    from harness.grid.driver import Grid, run_grid
    from harness.grid.plan import GRID_DIR

    grid_settings, executor = exp.pool
    glue = exp.output_dir / "glue"
    grid = Grid(kind="glue", models=tuple(models.values()), output_dirs=tuple(glue / n for n in models),
                grid_dir=glue / GRID_DIR, description=job.description, settings=job.settings,
                seeds=exp.seeds, retry=exp.command or "the same command", tracking_uri=exp.tracking_uri,
                report_dir=None, gpus_per_unit=grid_settings.gpus_per_unit,
                diverged_fails=False)  # the experiment reports itself, diverged arms too
    code = run_grid(grid, executor)
    if code == 130:
        raise KeyboardInterrupt
    if code != 0:
        raise UserError("the arms' grid left units unfinished (listed above); rerun the same command: it "
                        "keeps every pre-training and fine-tuning that finished")
    return {name: results_schema.read(glue / name / results_schema.FILE) for name in models}

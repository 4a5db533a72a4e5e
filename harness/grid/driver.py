"""The grid's driver: plan the units, skip the finished ones, run the rest through an executor, follow them
in one display, then log them to MLflow, list the failures with the command that retries them, and show
one leaderboard over every model.

Rerunning the same command trains only what results.json does not hold yet: a failed, cancelled or
preempted unit is retried (a stopped seed resumes from its saved state), a finished one never; a run folder
whose results.json holds other settings is refused as a single run refuses it, before anything starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.training import stop
from harness.grid import plan, tracking
from harness.grid.display import GridProgress
from harness.grid.executors import Executor, Handle

POLL_S = 0.5


@dataclass(frozen=True)
class Grid:
    """One grid: the kind, its models and their run folders, what each unit trains, and how to retry."""

    kind: str
    models: tuple[str, ...]
    output_dirs: tuple[Path, ...]  # each model's run folder
    grid_dir: Path  # the units' specs and logs
    description: Any  # the kind's task description (grid_tasks, for_task)
    settings: tuple[Any, ...]  # FinetuneConfig, then the kind's own
    seeds: int
    retry: str  # the command line that retries what is missing: the same command, --output-dir given
    shard: tuple[int, int] | None = None
    task_file_dir: Path | None = None
    tracking_uri: str | None = None
    report_dir: Path | None = None  # where the leaderboard's files go; None: no report (a shard's slice)
    progress: bool | None = None
    gpus_per_unit: int = 0  # over 1: each unit runs under torchrun across that many GPUs
    diverged_fails: bool = True  # a diverged unit ends the grid as a single run ends (False: the caller says)
    search: dict | None = None  # --params-from: the search that chose the settings (results.json `search`)


def run_grid(grid: Grid, executor: Executor) -> int:
    """Run the grid's missing units; 0 when every unit is done, 1 when one failed, 130 on Ctrl-C; a
    UserError (exit 2) when a run folder holds other settings (nothing run) or a unit diverged (listed)."""
    units = plan.shard(plan.plan_units(grid.kind, grid.models, grid.output_dirs, grid.description,
                                       grid.settings, grid.seeds, grid.task_file_dir, grid.gpus_per_unit,
                                       grid.search),
                       grid.shard)
    executor.check(units)
    done = plan.finished(units, _fresh)
    pending = [unit for unit in units if unit.name not in done]
    if pending:  # bad input: one line now, not a failure in every unit (nothing left to train: nothing read)
        _check_models(grid, {unit.model for unit in pending})
        _check_data(grid)
        _check_locks(grid, executor)
    tasks = grid.description.grid_tasks()
    slice_ = f", slice {grid.shard[0]}/{grid.shard[1]}" if grid.shard else ""
    print(f"grid: {len(units)} units ({len(grid.models)} model{'s' * (len(grid.models) > 1)} x "
          f"{len(tasks)} task{'s' * (len(tasks) > 1)} x {grid.seeds} seed{'s' * (grid.seeds > 1)}{slice_}) "
          f"through the {executor.name} executor; logs in {grid.grid_dir / 'logs'}", flush=True)
    if done:
        print(f"grid: {len(done)} of {len(units)} units finished already"
              + ("; nothing to train" if not pending else ""), flush=True)
    failed: list[Handle] = []
    if pending:
        try:
            failed = _follow(executor, executor.start(pending, grid.grid_dir), grid.progress)
        except KeyboardInterrupt:
            print(f"\ngrid: interrupted; stopping the running units (each saves its state)\n"
                  f"rerun to go on: {grid.retry}", flush=True)
            executor.cancel()
            return 130
    _log(grid)
    diverged = plan.diverged(units)
    failed = [handle for handle in failed if handle.unit.name not in {unit.name for unit, _ in diverged}]
    for handle in failed:
        print(f"failed: {handle.unit.name} (log: {handle.log})")
    for unit, record in diverged:  # finished: a rerun would diverge again, as a single run's would
        print(f"diverged: {unit.name} ({record['error']})")
    if failed:
        print(f"grid: {len(failed)} of {len(units)} units failed; retry what is missing with: {grid.retry}")
        return 1
    if diverged and grid.diverged_fails:  # a single run's status and line (harness/commands/run.py)
        from harness.finetuning.records import diverged_error

        raise diverged_error([record | {"task": f"{unit.output_dir.name}/{record['task']}"}
                              for unit, record in diverged], recorded_in="the models' results.json")
    return 0


def _fresh(unit):
    """The results.json body the unit's single run starts from, and the keys a resume must share."""
    from harness import kinds
    from harness.grid.unit import job_of

    return kinds.load(kinds.KINDS[unit.kind].runner).fresh_results(job_of(unit))


def _check_models(grid: Grid, models: set[str]) -> None:
    """Every model still to train resolved as its units will resolve it (foundation/models/resolve.py): a
    missing folder or a mistyped name is one UserError for them all, before any unit starts."""
    from foundation.infra.errors import UserError
    from foundation.models.resolve import resolve_model

    problems = []
    for model in (model for model in grid.models if model in models):
        try:
            resolve_model(model, grid.settings[0].trust_remote_code)
        except UserError as error:
            problems.append(str(error))
    if len(problems) > 1:
        raise UserError(f"{len(problems)} of the grid's models cannot be loaded: " + "; ".join(problems))
    if problems:
        raise UserError(problems[0])


def _check_locks(grid: Grid, executor: Executor) -> None:
    """The units merge their records into results.json under a file lock: where the output folder's file
    system takes it without excluding anyone (a second process here, or a process on another node where
    the executor spans nodes), units that finish together would drop each other's records."""
    from foundation.infra import locks
    from foundation.infra.errors import UserError

    folder = locks.nearest_folder(grid.grid_dir)
    fix = ("choose an --output-dir on a file system whose locks work: a local disk, NFS with locking "
           "(not nolock or local_lock), Lustre mounted with -o flock")
    if not locks.second_process_excluded(folder):
        raise UserError(f"file locks in {folder} keep no second process out, and the grid's units merge "
                        f"results.json under one; {fix}")
    why = locks.host_local_lock(folder) if getattr(executor, "spans_hosts", False) else None
    if why:
        raise UserError(f"--executor {executor.name} runs units on several nodes, and {why}; {fix}")


def _check_data(grid: Grid) -> None:
    """The kind's data read and validated as each unit will read it, without a model (KindRunner.check_data);
    a UserError names what is wrong before any unit starts or anything is written."""
    from harness import kinds
    from harness.finetuning.kind_runner import Job

    runner = kinds.load(kinds.KINDS[grid.kind].runner)
    runner.check_data(Job(model=grid.models[0], description=grid.description, settings=grid.settings,
                          task_file_dir=grid.task_file_dir))


def _follow(executor: Executor, handles: list[Handle], progress: bool | None) -> list[Handle]:
    """Poll the units until each ended, showing the counts; the failed ones. SIGTERM, like Ctrl-C,
    interrupts (the caller cancels the units)."""
    shown = GridProgress(len(handles), progress)
    with stop.handled():  # SIGTERM as KeyboardInterrupt: no loop is armed here
        try:
            while True:
                executor.poll()  # once a round; then each state is read, not asked for
                states = [handle.state() for handle in handles]
                shown.show(states)
                if all(state in ("done", "failed") for state in states):
                    return [h for h, state in zip(handles, states, strict=True) if state == "failed"]
                time.sleep(POLL_S)
        finally:
            shown.close()


def _log(grid: Grid) -> None:
    """MLflow's runs of every finished unit, then one leaderboard over the models (and its files)."""
    if grid.shard:  # the other slices may still run: one driver at the end logs and ranks them all
        print("grid: once every slice has run, run the command without --shard: it trains nothing, logs "
              "every unit to MLflow and shows the leaderboard")
        return
    folders = [d for d in grid.output_dirs if (d / "results.json").is_file()]
    logged = tracking.log_units(grid.kind, folders, grid.tracking_uri)
    if logged:
        print(f"grid: {logged} fine-tuning{'s' * (logged > 1)} logged to MLflow's {grid.kind!r} experiment")
    if grid.report_dir is None or not folders:
        return
    from harness.tracking import leaderboard_report, mlflow_leaderboard
    from reports import render
    from reports.leaderboard import published_rows, rows_from_results

    paths = [folder / "results.json" for folder in folders]
    mlflow_leaderboard.record(paths, grid.tracking_uri)
    rows = rows_from_results(paths)
    # the published rows too: the plot sets the models beside them where their FLOPs are known
    leaderboard_report.write_files(rows + published_rows(), grid.report_dir)
    print("\n" + render.markdown(rows, published=False))
    print(f"leaderboard of the grid, the published figures beside it: "
          f"{', '.join(str(grid.report_dir / n) for n in leaderboard_report.FILES)}")

"""electra-harness from Python: run, evaluate, compare and report as the commands do, for notebooks.

Each function takes what its command takes, as keyword arguments, and goes the command's way: the kind's
description and settings are loaded by the CLI's loader (harness/config.py; an unknown key is the same
one-line UserError), the kind's runner (harness/kinds.py) is handed the same Job, and compare and report
call the functions their commands call. Nothing here is imported before it is used, so `import harness`
loads neither torch nor pandas.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.api_results import Comparison, Results

Settings = Mapping[str, Any] | Iterable[str] | None


def run(kind: str, /, *, model: str | Path | Sequence[str | Path] | None = None,
        models: Sequence[str | Path] | None = None, output_dir: str | Path, seeds: int = 1,
        settings: Settings = None, config: str | Path | None = None, task_file: str | Path | None = None,
        tracking_uri: str | None = None, **description: Any) -> Results | list[Results] | None:
    """`harness run KIND`: fine-tune `model` on the described task, `seeds` times; the finished run.

    `description`: the kind's task fields, as `harness settings KIND` lists them (text: train, dev,
    text, label, ...; glue: tasks, data_dir), and any grid setting (executor, workers, devices, shard,
    gpus_per_unit, an executor's own: the grid flags as keywords); `settings`: the recipe's settings, a
    dict or key=value strings, over the TOML `config` file; `output_dir`: where results go, resumed if it
    holds a run. Several models (`model=[...]` or `models=`) or a grid setting run the grid `harness run`
    runs (harness/grid/), each model into OUTPUT_DIR/NAME: then a list of Results, one a model that
    finished a unit. Under torchrun, processes other than rank 0 get None (rank 0 reports).
    """
    from harness.finetuning.kind_runner import Job
    from harness.grid import executors, plan, start

    names = _models(model, models)
    _check_seeds(seeds)
    grid_keys = executors.grid_keys()
    given = {key: value for key, value in description.items() if key in grid_keys and value is not None}
    description = {key: value for key, value in description.items() if key not in grid_keys}
    names = plan.expand_models(names)
    grid = start.wanted(names, given) or isinstance(model, list | tuple) or models is not None
    found, loaded, base, chosen = _loaded(kind, description, task_file, config, settings)
    if grid:
        return _grid(found, names, loaded, base, chosen, given, seeds, Path(output_dir), tracking_uri)
    job = Job(model=names[0], description=loaded, settings=chosen, output_dir=Path(output_dir),
              seeds=seeds, task_file_dir=base, tracking_uri=tracking_uri)
    return _finished(found, job)


def _models(model: Any, models: Any) -> list[str]:
    """The --model values of `model` (one, or a list) or `models`; one line where neither or both."""
    from foundation.infra.errors import UserError

    if (model is None) == (models is None):
        raise UserError("pass model='...' (one model, or a list of them) or models=[...]; "
                        f"got {'neither' if model is None else 'both'}")
    given = models if models is not None else model
    if isinstance(given, str | Path):
        given = [given]
    if not isinstance(given, list | tuple) or not given or not all(isinstance(m, str | Path) for m in given):
        raise UserError(f"model(s) must be a model (a str or Path) or a list of them (got {given!r})")
    return [str(m) for m in given]


def _check_seeds(seeds: Any) -> None:
    from foundation.infra.errors import UserError

    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise UserError(f"seeds must be a whole number, at least 1 (got {seeds!r}); e.g. seeds=3")


def _grid(found, models: list[str], description, base, settings, given, seeds: int, output_dir: Path,
          tracking_uri: str | None) -> list[Results]:
    """The grid `harness run` runs (harness/grid/start.py, driver.py); each model's finished run."""
    import warnings

    from harness import kinds
    from harness.grid import start
    from harness.grid.driver import run_grid

    grid, executor = start.plan_grid(found.name, models, description, base, settings, given, seeds=seeds,
                                     output_dir=output_dir, default_root=output_dir,
                                     tracking_uri=tracking_uri)
    code = run_grid(grid, executor)
    if code == 130:
        raise KeyboardInterrupt
    if code:
        warnings.warn(f"some units of the grid failed (exit {code}); their logs are in "
                      f"{grid.grid_dir / 'logs'}; the same call trains what is missing", stacklevel=3)
    runner = kinds.load(found.runner)
    finished = []
    for folder in grid.output_dirs:
        if (folder / "results.json").is_file():
            body = json.loads((folder / "results.json").read_text())
            finished.append(Results(folder, body, runner.summary(body)))
    return finished


def evaluate(kind: str, /, *, model: str, output_dir: str | Path, settings: Settings = None,
             config: str | Path | None = None, task_file: str | Path | None = None,
             tracking_uri: str | None = None, **description: Any) -> Results:
    """`harness eval KIND`: score an already fine-tuned checkpoint on the described task's dev split,
    training nothing; its results as a run's (one seed, the interval over dev examples)."""
    from harness.finetuning.kind_runner import Job, evaluation_settings

    found, loaded, base, chosen = _loaded(kind, description, task_file, config, settings)
    job = Job(model=str(model), description=loaded, settings=evaluation_settings(chosen),
              output_dir=Path(output_dir), task_file_dir=base, tracking_uri=tracking_uri, evaluate_only=True)
    return _finished(found, job)


def compare(run_a: str | Path | Results, run_b: str | Path | Results,
            tasks: str | Sequence[str] | None = None, target: float = 1.0) -> Comparison:
    """`harness compare RUN_A RUN_B`: A - B per task with its 95% interval, p-value and verdict, paired on
    the same dev examples; `tasks`: a list or a comma list ("rte,sst2"), default every task both hold;
    `target`: the difference in points to size seed counts for."""
    from foundation.infra.errors import UserError
    from harness.experiments import comparison

    if not 0 < target < float("inf"):  # nan too
        raise UserError(f"target must be a positive, finite number of points (got {target})")
    if isinstance(tasks, str):  # "rte,sst2", as --tasks takes them (it was split into characters)
        tasks = [task.strip() for task in tasks.split(",") if task.strip()]
    folders = [comparison.load_results_folder(_folder(run)) for run in (run_a, run_b)]
    return Comparison(comparison.compare(*folders, list(tasks) if tasks else None, target))


def report(runs: Sequence[str | Path | Results] | None = None, output: str | Path = "runs/report",
           tracking_uri: str | None = None) -> Path:
    """`harness report`: the leaderboard (Markdown, CSV, HTML, the FLOPs plot) written to `output`, from
    `runs` (run folders or results) or, without them, from the MLflow leaderboard; the folder written."""
    from harness.tracking.leaderboard_report import write_report

    write_report([_folder(run) for run in runs] if runs else None, Path(output), tracking_uri)
    return Path(output)


def _loaded(kind: str, description: dict[str, Any], task_file, config, settings: Settings) -> tuple:
    """The kind, its task description (task file, then the fields given) and the folder the task file's
    paths start from, and its settings (config file, then `settings`): loaded as the commands load them."""
    from harness import kinds
    from harness.config import load_config, load_settings, shown

    found = kinds.kind(kind)
    given = [f"{key}={shown(tuple(value)) if isinstance(value, list | tuple) else value}"
             for key, value in description.items() if value is not None]  # None: not given, as a flag
    loaded = load_config(kinds.load(found.description), task_file, given)
    base = Path(task_file).resolve().parent if task_file else None
    chosen = load_settings(kinds.settings_classes(found), str(config) if config else None, _items(settings))
    return found, loaded, base, chosen


def _items(settings: Settings) -> list[str]:
    """key=value strings of a dict of settings (or the strings given): a list value as a comma list, a dict
    as LABEL=WEIGHT,... (class_weights)."""
    from foundation.infra.errors import UserError
    from harness.config import shown

    if settings is None:
        return []
    if isinstance(settings, str):
        return [settings]
    if isinstance(settings, Mapping):
        return [f"{key}={_value(value)}" for key, value in settings.items()]
    if isinstance(settings, Iterable) and all(isinstance(item, str) for item in settings):
        return list(settings)
    raise UserError(f"settings must be a dict ({{'learning_rate': 1e-4}}) or key=value strings "
                    f"(['learning_rate=1e-4']), not {type(settings).__name__} {shown(settings)}")


def _value(value: Any) -> str:
    from harness.config import shown

    if isinstance(value, Mapping):
        return ",".join(f"{key}={item}" for key, item in value.items())
    return shown(tuple(value) if isinstance(value, list) else value)


def _finished(found, job) -> Results | None:
    """Run the job through the kind's runner; a diverged seed is a warning, its outputs kept."""
    import warnings

    from harness import kinds
    from harness.finetuning.records import diverged_error

    runner = kinds.load(found.runner)
    body = runner.run(job)
    if body is None:  # a torchrun process but rank 0, which trained in step with rank 0 and reports
        return None
    error = diverged_error(body.get("diverged") or [])
    if error is not None:
        warnings.warn(str(error), stacklevel=3)
    return Results(job.output_dir, body, runner.summary(body))


def _folder(run: str | Path | Results) -> Path:
    return run.output_dir if isinstance(run, Results) else Path(run)

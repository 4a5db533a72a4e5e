"""electra-harness from Python: run, evaluate, compare and report as the commands do, for notebooks.

Each function takes what its command takes, as keyword arguments, and goes the command's way: the kind's
description and settings are loaded by the CLI's loader (harness/config.py; an unknown key is the same
one-line UserError), the kind's runner (harness/kinds.py) is handed the same Job, and compare and report
call the functions their commands call. Nothing here is imported before it is used, so `import harness`
loads neither torch nor pandas.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.api_results import Comparison, Results

Settings = Mapping[str, Any] | Iterable[str] | None


def run(kind: str, /, *, model: str, output_dir: str | Path, seeds: int = 1, settings: Settings = None,
        config: str | Path | None = None, task_file: str | Path | None = None,
        tracking_uri: str | None = None, **description: Any) -> Results:
    """`harness run KIND`: fine-tune `model` on the described task, `seeds` times; the finished run.

    `description`: the kind's task fields, as `harness settings KIND` lists them (text: train, dev,
    text, label, ...; glue: tasks, data_dir); `settings`: the recipe's settings, a dict or key=value
    strings, over the TOML `config` file; `output_dir`: where results go, resumed if it holds a run.
    """
    from harness.finetuning.kind_runner import Job

    found, loaded, base, chosen = _loaded(kind, description, task_file, config, settings)
    job = Job(model=str(model), description=loaded, settings=chosen, output_dir=Path(output_dir),
              seeds=seeds, task_file_dir=base, tracking_uri=tracking_uri)
    return _finished(found, job)


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


def compare(run_a: str | Path | Results, run_b: str | Path | Results, tasks: Sequence[str] | None = None,
            target: float = 1.0) -> Comparison:
    """`harness compare RUN_A RUN_B`: A - B per task with its 95% interval, p-value and verdict, paired on
    the same dev examples; `target`: the difference in points to size seed counts for."""
    from foundation.infra.errors import UserError
    from harness.experiments import comparison

    if not 0 < target < float("inf"):  # nan too
        raise UserError(f"target must be a positive, finite number of points (got {target})")
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
    """key=value strings of a dict of settings (or the strings given)."""
    from harness.config import shown

    if settings is None:
        return []
    if isinstance(settings, str):
        return [settings]
    if isinstance(settings, Mapping):
        return [f"{key}={shown(tuple(value) if isinstance(value, list) else value)}"
                for key, value in settings.items()]
    return [str(item) for item in settings]


def _finished(found, job) -> Results:
    """Run the job through the kind's runner; a diverged seed is a warning, its outputs kept."""
    import warnings

    from harness import kinds
    from harness.finetuning.records import diverged_error

    runner = kinds.load(found.runner)
    body = runner.run(job)
    error = diverged_error(body.get("diverged") or [])
    if error is not None:
        warnings.warn(str(error), stacklevel=3)
    return Results(job.output_dir, body, runner.summary(body))


def _folder(run: str | Path | Results) -> Path:
    return run.output_dir if isinstance(run, Results) else Path(run)

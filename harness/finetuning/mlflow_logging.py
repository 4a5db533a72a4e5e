"""MLflow around a fine-tuning run: the parent run's params, each (task, seed)'s nested run, its per-epoch
and final metrics, and the summary's medians and intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.config import as_dict
from harness.tracking import mlflow_runs
from reports.seed_summary import task_score
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult


def parent_params(config: FinetuneConfig, resolved: Mapping[str, FinetuneConfig],
                  used: Mapping[str, str]) -> dict:
    """The invocation's settings as used, for its parent MLflow run: a value all tasks share under its own
    key, one that differs per task (num_epochs: 3 or 10) as `{task}.{key}`; `used`
    (model_setup.resolved_device_settings) overrides."""
    per_task = {task: as_dict(found) for task, found in resolved.items()}
    params = {}
    for key, value in as_dict(config).items():
        values = {task: found[key] for task, found in per_task.items()} or {"": value}
        if len(set(map(repr, values.values()))) == 1:
            params[key] = next(iter(values.values()))
        else:
            params |= {f"{task}.{key}": found for task, found in values.items()}
    return params | dict(used)


def nested_run(task: str, config: FinetuneConfig, model: str, settings: Mapping[str, object] | None = None,
               resumes: Sequence[Mapping[str, int]] = ()):
    """The MLflow run of one (task, seed), inside the invocation's parent run; `settings` adds params.
    A seed resumed from a saved state (`resumes`: its epochs and steps) is tagged resumed."""
    tags = {"model": model, "task": task, "seed": str(config.seed)}
    if resumes:
        tags |= {"resumed": "true", "resumed_from": "; ".join(
            f"epoch {point['epoch'] + 1} step {point['step']}" for point in resumes)}
    params = as_dict(config) | dict(settings or {})
    return mlflow_runs.run(f"{task} seed {config.seed}", params=params, tags=tags, nested=True)


def log_epoch(epoch: int, row: dict[str, float]) -> None:
    mlflow_runs.log_metrics(row, step=epoch)


def log_final(result: FinetuneResult) -> float:
    """Log the final dev metrics and speed; return the run's score."""
    final = final_metrics(result.metrics, result.train_examples_per_s, result.train_time_s)
    mlflow_runs.log_metrics(final)
    return final["final_score"]


def final_metrics(metrics: Mapping[str, Mapping[str, float]], train_examples_per_s: float,
                  train_time_s: float) -> dict[str, float]:
    """A seed's final MLflow metrics: each split's dev metrics, its score and its speed (a live run's, and
    the grid driver's from results.json)."""
    final = {f"final_{split}_{name}": value
             for split, values in metrics.items() for name, value in values.items()}
    final["final_score"] = task_score(metrics)
    return final | {"train_examples_per_s": train_examples_per_s, "train_time_s": train_time_s}


def log_intervals(summary: Mapping[str, dict], glue: Mapping | None = None) -> None:
    """Medians and interval bounds of the active (parent) run as MLflow metrics."""
    values = {}
    for task, labels in summary.items():
        for label, found in labels.items():
            if isinstance(found, dict) and "median" in found:
                values |= {f"{task}_{label}_{key}": found[key] for key in ("median", "ci_low", "ci_high")
                           if key in found}
    if glue:
        values |= {f"glue_score{suffix}": glue[key] for key, suffix in
                   (("score", ""), ("ci_low", "_ci_low"), ("ci_high", "_ci_high")) if key in glue}
    mlflow_runs.log_metrics(values)

"""MLflow for a grid, from the driver alone: units run with tracking off (no two processes or nodes write
one SQLite file), and the driver logs what their results.json files hold.

Each model's run folder gets a parent run (found again by its output_dir and grid tags) and a nested run
per finished (task, seed), with its settings, per-epoch history and final metrics, as a live run logs
them (harness/finetuning/mlflow_logging.py). A (task, seed) already logged is not logged again, so a
rerun of the grid logs only what is new.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.finetuning import mlflow_logging
from harness.tracking import mlflow_runs
from reports import results_schema

GRID_TAG = "grid"  # "true" on a grid's parent runs


def log_units(kind: str, output_dirs: Sequence[Path], uri: str | None) -> int:
    """Log every (task, seed) of these run folders not yet in MLflow's `kind` experiment; how many."""
    if mlflow_runs.is_off(uri):
        return 0
    import mlflow

    mlflow_runs.use_experiment(kind, uri)
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(kind).experiment_id
    logged = 0
    for output_dir in output_dirs:
        body = results_schema.read(output_dir / results_schema.FILE)
        if body is None or not body["runs"]:
            continue
        tags = {"output_dir": str(output_dir.resolve()), GRID_TAG: "true"}
        parent = _parent(client, experiment, tags, body)
        filter_ = f"tags.mlflow.parentRunId = '{parent}'"
        known = {(run.data.tags.get("task"), run.data.tags.get("seed"))
                 for run in client.search_runs([experiment], filter_, max_results=50000)}
        new = [r for r in body["runs"] if (r["task"], str(r["seed"])) not in known]
        with mlflow.start_run(run_id=parent):
            for record in new:
                _log_seed(body["model"]["name"], record)
            mlflow_logging.log_intervals(body.get("summary") or {}, body.get("glue"))
        logged += len(new)
    return logged


def _parent(client, experiment: str, tags: dict[str, str], body: results_schema.ResultsBody) -> str:
    """The run folder's parent run: found by its tags, else made (ended; reopened to add children)."""
    filter_ = " and ".join(f"tags.{key} = '{value}'" for key, value in tags.items())
    for run in client.search_runs([experiment], filter_, max_results=1):
        return run.info.run_id
    model = body["model"]
    with mlflow_runs.run(f"{Path(model['name']).name} {' '.join(body['tasks'])}", params=body["config"],
                         tags=tags | {"model": model["name"], "tasks": ",".join(body["tasks"]),
                                      "family": str(model.get("family")), "recipe": str(model.get("recipe"))}
                         ) as active:
        return active.info.run_id


def _log_seed(model: str, record: results_schema.SeedRecord) -> None:
    """One (task, seed)'s nested run: settings, each epoch's history row, final metrics."""
    tags = {"model": model, "task": record["task"], "seed": str(record["seed"])}
    if record.get("resumed"):
        tags["resumed"] = "true"
    with mlflow_runs.run(f"{record['task']} seed {record['seed']}", params=record["resolved_config"],
                         tags=tags, nested=True):
        for row in record["history"]:
            mlflow_logging.log_epoch(int(row["epoch"]), row)
        mlflow_runs.log_metrics(mlflow_logging.final_metrics(
            record["metrics"], record["train_examples_per_s"], record["train_time_s"]))

"""The `leaderboard` MLflow experiment: one run per discriminator and recipe, found by tag and updated
in place.

Each row is a run tagged `leaderboard_key` (a hash of the model identity and the row's departures
from the recipe, safe in a filter string), `source` (measured or published), `recipe`, `model`,
`model_id`, `model_short`, `stage` (fine-tuned, evaluated or published), `task_set` (what it was
scored on: rows to compare share it), `reference` and `notes`, and on your own data `task` (its column),
`headline` (its headline metric) and `problem`; its numbers are metrics, so the MLflow UI can sort by them,
with `score`, the row's headline (GLUE score, SQuAD F1 or your own task's headline metric), for every
kind. Published rows are re-asserted on every update and never merged with measured ones.

Readable without configuring the UI: a run's name says what the row is, model and task set first (preset,
Hub id or random-init, never a path the narrow name column cuts; your own task with its data's digest),
then headline and score, stage and pre-training FLOPs (renamed when they change); its description
(`mlflow.note.content`) holds the whole
row, and the experiment has a description and a saved view of the runs table, grouped by task set
(mlflow_view.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from foundation.infra.errors import UserError
from harness.tracking import mlflow_runs, mlflow_view
from reports import render
from reports.leaderboard import (
    DEPARTS,
    MEASURED,
    OWN_PREFIX,
    PUBLISHED,
    SEEDS,
    VALUE_COLUMNS,
    Row,
    load_results,
    measured_row,
    merge,
    merge_rows,
    published_rows,
    short_name,
)
from reports.own_task import stored_column

EXPERIMENT = mlflow_runs.LEADERBOARD_EXPERIMENT
KEY_TAG = "leaderboard_key"
NOTE_TAG, RUN_NAME_TAG = "mlflow.note.content", "mlflow.runName"
# Rows compared together share a task set: the saved view sorts by this tag (mlflow_view.py).
TASK_SET_TAG, SHORT_NAME_TAG, STAGE_TAG = mlflow_view.TASK_SET_TAG, "model_short", "stage"
OWN_TAGS = ("task", "headline", "problem")  # a row of your own data: Row's fields of the same names
SCORE_COLUMNS = frozenset(c for c in VALUE_COLUMNS if c not in ("num_params", "pretrain_flops",
                                                                "inference_flops", "glue_tasks"))
SCORE_DECIMALS = 2
MAX_TAG_CHARS = 5000  # MLflow caps tag values at 8000 characters


def check_reachable(uri: str | None) -> str:
    """The resolved URI; a server that does not answer /health in 5 s is a one-line UserError."""
    return mlflow_runs.check_server(mlflow_runs.tracking_uri(uri))


def tracking_errors(uri: str, doing: str) -> contextlib.AbstractContextManager:
    """MLflow and HTTP failures as one line naming the store (its password hidden) and what was being
    done."""
    return mlflow_runs.store_errors(uri, doing)


def _open(uri: str | None):
    """Client and experiment id of the leaderboard; creates the experiment where it is missing."""
    from mlflow import MlflowClient

    resolved = check_reachable(uri)
    with tracking_errors(resolved, "opening the leaderboard"):
        mlflow_runs.use_experiment(EXPERIMENT, resolved)  # creates it with artefacts beside a SQLite store
        client = MlflowClient(resolved)
        experiment = client.get_experiment_by_name(EXPERIMENT)
        mlflow_view.describe_experiment(client, experiment)
        return client, experiment.experiment_id, resolved


def key_hash(key: str) -> str:
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def _row_of(run) -> Row:
    tags = run.data.tags
    values = {k: v for k, v in run.data.metrics.items()
              if k in VALUE_COLUMNS or k == SEEDS or k.startswith(OWN_PREFIX)}
    recipe = tags.get("recipe", "")
    measured = tags.get("source", MEASURED) != PUBLISHED
    short, stage = tags.get(SHORT_NAME_TAG, ""), tags.get(STAGE_TAG, "") if measured else ""
    if measured and not short:  # a row stored before rows were named: from its model and path
        short = short_name({"name": tags.get("model", ""), "path": tags.get("model_id", "")})
    return Row(tags.get("model_id", run.info.run_id), tags.get("model", run.info.run_name or ""),
               tags.get("source", "measured"), tags.get("reference", ""), values, tags.get("notes", ""),
               recipe.removeprefix(DEPARTS) if recipe.startswith(DEPARTS) else "", tags.get("family", ""),
               tags.get("pretrain_corpus", ""), short, stage,
               # a row stored before rows of your own data were tagged: its task from its one own column
               tags.get("task") or (stored_column(values) if measured else ""), tags.get("headline", ""),
               tags.get("problem", ""), tags.get("model_source", ""), tags.get("license", ""))


def _stored(client, experiment_id: str) -> dict[str, object]:
    """Leaderboard runs by key hash; of duplicates left by concurrent writers, the oldest wins."""
    found: dict[str, object] = {}
    token = None
    while True:
        page = client.search_runs([experiment_id], filter_string=f"tags.{KEY_TAG} != ''",
                                  order_by=["attributes.start_time DESC"], page_token=token)
        for run in page:
            found[run.data.tags[KEY_TAG]] = run
        token = page.token
        if not token:
            return found


def _tags(row: Row) -> dict[str, str]:
    text = {"source": row.source, "recipe": row.recipe, "model": row.model, "model_id": row.key,
            "reference": row.reference, "notes": row.notes, "family": row.family,
            "pretrain_corpus": row.corpus, "model_source": row.origin, "license": row.license,
            TASK_SET_TAG: row.task_set, SHORT_NAME_TAG: row.short_name,
            STAGE_TAG: row.stage or ("published" if row.source == PUBLISHED else ""),
            **({name: getattr(row, name) for name in OWN_TAGS} if row.task else {}),
            RUN_NAME_TAG: render.title(row),
            NOTE_TAG: render.details(row)}
    return {name: value[-MAX_TAG_CHARS:] for name, value in text.items()}


def _write(client, run_id: str, row: Row, stored_values: Mapping[str, float],
           stored_tags: Mapping[str, str]) -> None:
    """What differs from the run as stored; the name and description follow the row, so a run is
    renamed when its GLUE score or FLOPs change (and a run from before they existed gets them)."""
    from mlflow.entities import Metric, RunTag

    now = int(time.time() * 1000)
    # Scores (x100) to 2 decimals and the view's FLOPs to 4 significant digits: the UI prints a metric
    # as stored, so 43.4226618... and 0.000100000... filled its narrow columns. results.json keeps
    # the exact figures, and pretrain_flops stays exact.
    values = {k: round(v, SCORE_DECIMALS) if k in SCORE_COLUMNS or k.startswith(OWN_PREFIX) else v
              for k, v in row.values.items()}
    if "pretrain_flops" in values:  # for the saved view's narrow column (mlflow_view.py)
        values[mlflow_view.SCALED_FLOPS] = float(f"{values['pretrain_flops'] / 1e18:.4g}")
    found = render.headline(row)
    if found:  # the saved view's one score column, whatever the kind (mlflow_view.py)
        values[mlflow_view.SCORE] = values[found[1]]
    metrics = [Metric(k, float(v), now, 0) for k, v in values.items() if stored_values.get(k) != v]
    tags = [RunTag(k, v) for k, v in _tags(row).items() if stored_tags.get(k) != v]
    if metrics or tags:
        client.log_batch(run_id, metrics=metrics, tags=tags)


def upsert(rows: list[Row], uri: str | None = None) -> list[Row]:
    """Create or update one run per row key; returns the rows as now stored."""
    client, experiment_id, resolved = _open(uri)
    stored: list[Row | None] = [None] * len(rows)
    # Published rows are created first: within a task set the saved view lists the newest runs first,
    # so a user's own rows sit above the paper's from the first run on.
    order = sorted(range(len(rows)), key=lambda i: rows[i].source != PUBLISHED)
    with tracking_errors(resolved, "updating the leaderboard"):
        existing = _stored(client, experiment_id)
        for index in order:
            row = rows[index]
            run = existing.get(key_hash(row.row_id))
            if run is None:
                created = client.create_run(experiment_id, run_name=render.title(row),
                                            tags={KEY_TAG: key_hash(row.row_id)})
                _write(client, created.info.run_id, row, {}, created.data.tags)
                client.set_terminated(created.info.run_id, "FINISHED")
                stored[index] = row
            else:
                new = merge(_row_of(run), row)
                _write(client, run.info.run_id, new, run.data.metrics, run.data.tags)
                stored[index] = new
    return stored


def rename_measured(uri: str | None = None) -> None:
    """Give every stored measured row its current name and tags (task set, short name, stage); its
    numbers are left as stored (recomputing a GLUE score from rounded task scores could move it)."""
    from mlflow.entities import RunTag

    client, experiment_id, resolved = _open(uri)
    with tracking_errors(resolved, "renaming the leaderboard's rows"):
        for run in _stored(client, experiment_id).values():
            if run.data.tags.get("source") == PUBLISHED:
                continue
            tags = [RunTag(k, v) for k, v in _tags(_row_of(run)).items() if run.data.tags.get(k) != v]
            if tags:
                client.log_batch(run.info.run_id, tags=tags)


def browse_hint(uri: str | None = None) -> str:
    """The link to the leaderboard's runs table in its saved view (mlflow_view.browse_hint)."""
    if mlflow_runs.is_off(uri):
        return "none: tracking is off (--tracking-uri none), so nothing was logged to MLflow"
    _, experiment_id, resolved = _open(uri)
    return mlflow_view.browse_hint(resolved, experiment_id)


def fetch(uri: str | None = None) -> list[Row]:
    """Every leaderboard row in the store."""
    client, experiment_id, resolved = _open(uri)
    with tracking_errors(resolved, "reading the leaderboard"):
        return [_row_of(run) for run in _stored(client, experiment_id).values()]


def record(results_paths: list[Path], uri: str | None = None) -> list[Row]:
    """Fold finished runs' results files into their models' rows (and re-assert the published rows).

    Called as a run ends; returns the measured rows as stored. A model under the system temp dir is a
    one-off (a test, a scratch checkpoint): its results are left out, with a line saying how to add them.
    With tracking off there is no leaderboard: a line says how to add the results later.
    """
    if mlflow_runs.is_off(uri):
        paths = " ".join(str(path.parent) for path in results_paths)
        print(f"leaderboard: not added, tracking is off; add it later with `harness report --runs {paths}`")
        return []
    loaded = []
    for path, results in load_results(results_paths):
        if _one_off(results["model"].get("path") or ""):
            print(f"leaderboard: not added, the model {results['model']['path']} is under the temp dir "
                  f"{tempfile.gettempdir()} (a one-off); add it with `harness report --runs {path.parent}`")
        else:
            loaded.append((path, results))
    if not loaded:
        return []
    measured = merge_rows([measured_row(path, results) for path, results in loaded])
    try:
        stored = upsert(measured + published_rows(), uri)
    except UserError as error:
        paths = " ".join(str(path) for path in results_paths)
        raise UserError(f"{error}; the results are saved: add them later with `harness report --runs "
                        f"{paths}`") from error
    for row in stored[:len(measured)]:
        print(f"leaderboard: {render.title(row)}")
    print(f"leaderboard: {browse_hint(uri)}")
    return stored[:len(measured)]


def _one_off(model_path: str) -> bool:
    """Whether a model lives under the system temp dir (tempfile.gettempdir(), read at each call)."""
    temp = Path(tempfile.gettempdir()).resolve()
    return bool(model_path) and Path(model_path).resolve().is_relative_to(temp)


def log_flops(costs: Mapping) -> None:
    """The `flops` section as metrics (and its pre-training basis as a tag) of the active run."""
    metrics = {name: costs[name] for name in ("num_params", "pretrain_flops", "inference_flops",
                                             "finetune_flops_total") if costs.get(name) is not None}
    metrics |= {f"finetune_flops_{task}": value for task, value in costs.get("finetune_flops", {}).items()}
    mlflow_runs.log_metrics(metrics)
    mlflow_runs.set_tag("pretrain_flops_basis", str(costs.get("pretrain_flops_basis", ""))[:MAX_TAG_CHARS])

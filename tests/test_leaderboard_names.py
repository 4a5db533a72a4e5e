"""Leaderboard rows a reader can tell apart: each run is named for what it is (model, pre-training FLOPs,
stage, task set), the model first so that the MLflow UI's narrow name column separates a demo's two rows,
and rows of one task set sit together in the saved view. A real browser checks it where one is installed."""

import os
import shutil
import subprocess

import pytest

from foundation.models import pretrain_meta
from reports import results_schema
from reports.leaderboard import rows_from_results
from reports.render import title
from tests.mlflow_ui import mlflow_ui

NAME_COLUMN_CHARS = 20  # what the runs table shows of a name (harness/README.md)


def stats(median: float) -> results_schema.MetricSummary:
    return results_schema.MetricSummary(median=median, mean=median, std=0.0, best=median, n=3)


def demo_arm(root, folder: str, meta: dict, scores: dict[str, float], train_flops: float):
    """A `harness demo` arm: the model folder with its pre-training record, and its fine-tuning results."""
    model = root / folder
    model.mkdir(parents=True)
    pretrain_meta.write(model / "pretrain_meta.json", meta)
    run = root / "glue" / model.name
    run.mkdir(parents=True)
    metric = {"stsb": "spearman"}
    summary = {task: {"score": stats(value), metric.get(task, "accuracy"): stats(value)}
               for task, value in scores.items()}
    costs = {"model_id": str(model), "num_params": 1000, "pretrain_flops": train_flops, "inference_flops": 1e6}
    body = results_schema.body(results_schema.GLUE_FORMAT, results_schema.ModelBlock(
        name=f"runs/demo/{folder}", path=str(model)), {"max_train_examples": 1500}, list(scores), 3, device="cpu",
        versions={})
    results_schema.write(run / results_schema.FILE, body | {"flops": costs, "summary": summary})
    return run


@pytest.fixture
def demo(tmp_path):
    """The demo's two measured rows: electra-tiny pre-trained to 1e14 FLOPs, and its random-init control."""
    scores = {"sst2": 0.509, "stsb": 0.190, "rte": 0.521}
    trained = demo_arm(tmp_path, "pretrain/electra-1e+14", {"objective": "electra", "preset": "electra-tiny",
                                                           "steps": 641, "train_flops": 1e14}, scores, 1e14)
    control = demo_arm(tmp_path, "random-init", pretrain_meta.untrained(0),
                       {"sst2": 0.627, "stsb": 0.139, "rte": 0.537}, 0.0)
    return trained, control


def test_the_demo_rows_are_named_for_what_they_are(demo):
    trained, control = rows_from_results(list(demo))
    departs = " [departs: max_train_examples=1500]"
    assert title(trained) == "electra-tiny · sst2,stsb,rte · GLUE 40.7 · fine-tuned · 1e14 FLOPs" + departs
    assert title(control) == "random-init · sst2,stsb,rte · GLUE 43.4 · fine-tuned · 0 FLOPs" + departs
    # told apart by what the UI shows of a name; found together by their task set
    assert title(trained)[:NAME_COLUMN_CHARS] != title(control)[:NAME_COLUMN_CHARS]
    assert trained.task_set == control.task_set == "sst2,stsb,rte"
    # the path stays the row's identity (and in its description), not its name
    assert trained.key.endswith("pretrain/electra-1e+14") and trained.model == "runs/demo/pretrain/electra-1e+14"


def test_other_objectives_hub_ids_and_evaluated_checkpoints_say_so(tmp_path):
    from reports.leaderboard import EVALUATED, short_name, task_set

    mlm = tmp_path / "mlm-out"
    (mlm / "discriminator").mkdir(parents=True)
    pretrain_meta.write(mlm / "pretrain_meta.json", {"objective": "mlm", "preset": "electra-small"})
    assert short_name({"name": str(mlm), "path": str(mlm / "discriminator")}) == "electra-small (mlm)"
    assert short_name({"name": "google/electra-small-discriminator@abc1234", "path": str(tmp_path)}) == \
        "google/electra-small-discriminator@abc1234"
    assert short_name({"name": "electra-small", "path": str(tmp_path)}) == "electra-small"
    assert task_set({"squad20_f1": 80.0, "squad20_em": 77.0}) == "squad20"
    assert task_set({"glue_score": 79.9, "glue_tasks": 8.0}) == "GLUE (all 8)"
    evaluated = tmp_path / "evaluated"
    evaluated.mkdir()
    body = results_schema.body(results_schema.GLUE_FORMAT, results_schema.ModelBlock(name="org/fine-tuned",
                                                                                     path=str(tmp_path)),
                               {}, ["rte"], 1, device="cpu", versions={})
    body["runs"] = [{"task": "rte", "seed": 0, "num_train_steps": 0}]  # scored as it is, never trained
    summary = {"rte": {"score": stats(0.6), "accuracy": stats(0.6)}}
    results_schema.write(evaluated / results_schema.FILE, body | {"flops": {}, "summary": summary})
    (row,) = rows_from_results([evaluated])
    assert row.stage == EVALUATED and title(row) == "org/fine-tuned · rte · GLUE 60.0 · evaluated · FLOPs ?"
    assert row.row_id.endswith("(evaluated)")


@pytest.mark.slow  # an MLflow SQLite store: ~10 s
def test_rows_stored_before_names_are_renamed_with_their_numbers_kept(demo, tmp_path):
    from mlflow import MlflowClient

    from harness.tracking import mlflow_leaderboard

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow_leaderboard.upsert(rows_from_results(list(demo)), uri)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(mlflow_leaderboard.EXPERIMENT)
    (old,) = [r for r in client.search_runs([experiment.experiment_id]) if r.data.tags["model_short"] == "random-init"]
    for tag in ("task_set", "model_short", "stage"):  # as a row written before this change was stored
        client.delete_tag(old.info.run_id, tag)
    client.set_tag(old.info.run_id, "mlflow.runName", "runs/demo/random-init [departs: max_train_examples=1500] · "
                                                       "GLUE 43.4 (3/8) · 0 FLOPs")
    mlflow_leaderboard.rename_measured(uri)
    renamed = client.get_run(old.info.run_id)
    assert renamed.info.run_name == ("random-init · sst2,stsb,rte · GLUE 43.4 · fine-tuned · 0 FLOPs [departs: "
                                     "max_train_examples=1500]")
    assert renamed.data.tags["task_set"] == "sst2,stsb,rte" and renamed.data.metrics == old.data.metrics


def chromium() -> str | None:
    return (os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or shutil.which("google-chrome"))


# Slow tier, over 30 s: the only check of the saved view in a real browser (an MLflow server, Chromium).
@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="no browser: chromium, chromium-browser or google-chrome not on "
                                               "PATH (or $CHROMIUM); install one to see the MLflow UI")
def test_the_saved_view_shows_the_demo_rows_apart_and_together_in_a_browser(demo, tmp_path):
    from harness.tracking import mlflow_leaderboard, mlflow_view
    from reports.leaderboard import published_rows

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow_leaderboard.upsert(published_rows() + rows_from_results(list(demo)), uri)
    from mlflow import MlflowClient

    experiment_id = MlflowClient(uri).get_experiment_by_name(mlflow_leaderboard.EXPERIMENT).experiment_id
    with mlflow_ui(uri, tmp_path) as url:
        page = mlflow_view.runs_url(url, experiment_id)
        # tall enough that the grid renders all 20 rows (it leaves rows far below the window out); one
        # browser launch both saves the picture and prints the page's DOM
        browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1600,2400",
                   "--virtual-time-budget=20000"]
        dom = subprocess.run([*browser, f"--screenshot={tmp_path / 'leaderboard.png'}", "--dump-dom", page],
                             check=True, timeout=180, capture_output=True, text=True).stdout
    assert (tmp_path / "leaderboard.png").stat().st_size > 10_000  # a rendered page, not a blank one
    # Both demo rows are in the table under their names, next to each other (one task set): between
    # them in the name column no other row's name, such as the paper's eight-task rows.
    positions = sorted(dom.index(title(row)) for row in rows_from_results(list(demo)))
    between = dom[positions[0]:positions[1]]
    assert "GLUE (all 8)" not in between and "squad" not in between

"""The leaderboard for every kind: a run of each kind (classification, regression, multi-label, tagging, GLUE,
an eval) is a row of its own, named for its model and task (your own data: the task and its data's digest),
with its headline and interval, other metrics and seeds; MLflow names a reader can tell apart; an evaluated
checkpoint's row says so."""

import csv
import io
import json
import re
from pathlib import Path

import pytest

from reports import results_schema
from reports.leaderboard import rows_from_results
from reports.plot import plottable
from reports.render import markdown, title, to_csv, to_html

SHA = {"text": "e6ae98f7" + "0" * 56, "tagging": "705c5b3b" + "1" * 56}


def stats(median: float, n: int = 1, low: float | None = None, high: float | None = None) -> dict:
    found = {"median": median, "mean": median, "std": 0.0, "best": median, "n": n}
    return found | ({"ci_low": low, "ci_high": high} if low is not None else {})


def write(root: Path, name: str, body: dict) -> Path:
    (root / name).mkdir(parents=True)
    results_schema.write(root / name / results_schema.FILE, body)
    return root / name


def own(kind: str, name: str, problem: str, scores: dict[str, float], n: int = 1) -> dict:
    """A results.json of your own data as `harness run text|tagging` writes it, reduced to what rows read."""
    headline = next(iter(scores))
    summary = {metric: stats(value, n, value - 0.1, value + 0.1) for metric, value in scores.items()}
    return {"format": f"electra-harness/{kind}-results/1", "model": {"name": "tiny", "path": "/x/tiny"},
            "config": {}, "runs": [], "tasks": [name], "summary": {name: {"score": summary[headline]} | summary},
            "data": {"task": {"name": name, "kind": problem, "metrics": list(scores), "headline": headline},
                     "files": {"train": {"sha256": SHA[kind]}}}}


def glue(model: str, evaluated: bool = False) -> dict:
    body = {"format": results_schema.GLUE_FORMAT, "model": {"name": model, "path": f"/x/{model}"}, "config": {},
            "runs": [], "tasks": ["rte"], "summary": {"rte": {"score": stats(0.5), "accuracy": stats(0.5)}}}
    return body | ({"evaluated": True} if evaluated else {})


@pytest.fixture
def every_kind(tmp_path) -> list[Path]:
    """Results of each kind on one model: four tasks of your own data, a GLUE run and an eval of its model."""
    return [write(tmp_path, "classification", own("text", "intents", "classification",
                                                  {"accuracy": 0.75, "macro_f1": 0.5}, n=2)),
            write(tmp_path, "regression", own("text", "rating", "regression", {"spearman": 0.4, "pearson": 0.3})),
            write(tmp_path, "multilabel", own("text", "topics", "multilabel", {"micro_f1": 0.6, "macro_f1": 0.5})),
            write(tmp_path, "tagging", own("tagging", "phrases", "tagging", {"f1": 0.25, "f1_NP": 0.2})),
            write(tmp_path, "glue", glue("tiny")), write(tmp_path, "eval", glue("rte-seed0", evaluated=True))]


HEADLINES = [("intents (data e6ae98f7)", "accuracy 75.0"), ("rating (data e6ae98f7)", "spearman 40.0"),
             ("topics (data e6ae98f7)", "micro_f1 60.0"), ("phrases (data 705c5b3b)", "f1 25.0")]


def test_each_kind_is_a_row_named_for_its_model_and_task_with_its_headline(every_kind):
    rows = rows_from_results(every_kind)
    names = sorted(title(row) for row in rows)
    assert names == sorted([*(f"tiny · {task} · {score} · fine-tuned · FLOPs ?" for task, score in HEADLINES),
                            "tiny · rte · GLUE 50.0 · fine-tuned · FLOPs ?", "rte-seed0 · rte · GLUE 50.0 · evaluated · FLOPs ?"])
    # told apart by what the MLflow UI shows of a name: the model and the task first
    assert len({name[:len("tiny · intents")] for name in names}) == len(names)
    text = markdown(rows)
    own_rows = [line for line in text.splitlines() if "(data " in line]
    assert own_rows[0].startswith("| tiny | intents (data e6ae98f7) | classification | accuracy | 75.0 [65.0, 85.0] | "
                                  "2 | macro_f1 50.0 | electra | ")
    assert [line.split(" | ")[1] for line in own_rows] == sorted(task for task, _ in HEADLINES)  # by task
    (table,) = [line for line in text.splitlines() if "phrases" in line]
    assert "| tagging | f1 | 25.0 [15.0, 35.0] | 1 | f1_NP 20.0 |" in table
    # the plot names the GLUE rows it leaves out (an evaluated checkpoint; "tiny", of unknown FLOPs, is
    # drawn), not your own tasks, which have no GLUE score to plot
    assert sorted(row.label for row in plottable(rows)[1]) == ["rte-seed0 (evaluated)"]


def test_the_csv_has_every_rows_headline_score_and_seeds(every_kind):
    measured = [r for r in csv.DictReader(io.StringIO(to_csv(rows_from_results(every_kind))))
                if r["source"] == "measured"]
    assert sorted((r["task"], r["stage"], r["headline"], r["score"], r["seeds"]) for r in measured) == sorted([
        ("intents (data e6ae98f7)", "fine-tuned", "accuracy", "75", "2"),
        ("rating (data e6ae98f7)", "fine-tuned", "spearman", "40", "1"),
        ("topics (data e6ae98f7)", "fine-tuned", "micro_f1", "60", "1"),
        ("phrases (data 705c5b3b)", "fine-tuned", "f1", "25", "1"),
        ("rte", "fine-tuned", "GLUE", "50", "1"), ("rte", "evaluated", "GLUE", "50", "1")])
    (intents,) = [r for r in measured if r["task"].startswith("intents")]
    assert (intents["problem"], intents["score_ci_low"], intents["metrics"]) == ("classification", "65", "macro_f1=50")


def test_an_evaluated_checkpoint_is_marked_in_every_table(every_kind):
    rows = rows_from_results(every_kind)
    (evaluated,) = [row for row in rows if row.stage == "evaluated"]
    assert evaluated.label == "rte-seed0 (evaluated)"
    assert "| rte-seed0 (evaluated) | ? | ? | ? | 50.0 | 50.0 (1/8) | 1 |" in markdown(rows)
    assert ">rte-seed0 (evaluated)</td>" in to_html(rows, None)
    # harness eval text: a row of its own beside the fine-tuned one on the same task and data
    scored = own("text", "intents", "classification", {"accuracy": 0.5}) | {"evaluated": True}
    rows = rows_from_results([*every_kind, write(every_kind[0].parent, "eval-text", scored)])
    assert "| tiny (evaluated) | intents (data e6ae98f7) | classification | accuracy | 50.0 [40.0, 60.0] |" in \
        markdown(rows) and len([r for r in rows if r.task_set == "intents (data e6ae98f7)"]) == 2


def test_a_task_named_as_a_glue_task_stays_your_own(tmp_path):
    """Your own task's summary is read as its own, whatever its name: a task named rte is not GLUE's RTE."""
    (row,) = rows_from_results([write(tmp_path, "own", own("text", "rte", "classification", {"accuracy": 0.9}))])
    assert row.task_set == "rte (data e6ae98f7)" and "rte" not in row.values and "glue_score" not in row.values


# ---- end to end: tiny runs of each kind ------------------------------------------------------------------------

FAST = ["precision=fp32", "num_epochs=1", "batch_size=8", "--tracking-uri", "none"]


@pytest.fixture(scope="module")
def kind_runs(tiny_model, session_glue_data, tmp_path_factory) -> Path:
    """One run of each kind on the tiny model: classification (2 seeds), regression, multi-label and tagging
    on small files, GLUE RTE, and an eval of the RTE model."""
    from harness.cli import main

    root = tmp_path_factory.mktemp("kinds")
    words = [("the cat was very happy .", "joy", 0.2, ["joy", "animal"]), ("he was very sad .", "grief", 1.4, ["grief"]),
             ("a dog was very good .", "joy", 2.3, ["joy", "animal"]), ("she was bad .", "grief", 0.9, ["grief"])]
    for split, n in (("train", 24), ("dev", 8)):
        rows = [dict(zip(("sentence", "intent", "rating", "topics"), words[i % 4], strict=True)) for i in range(n)]
        (root / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        sentences = ["the DT B-NP\ncat NN I-NP\nsat VB B-VP\non IN B-PP", "a DT B-NP\ndog NN I-NP\nran VB B-VP"]
        (root / f"{split}.txt").write_text("\n\n".join(sentences[i % 2] for i in range(n // 2)) + "\n")
    text = ["--train", root / "train.jsonl", "--dev", root / "dev.jsonl", "--text", "sentence"]
    runs = {"classification": ["run", "text", *text, "--label", "intent", "--name", "intents", "--seeds", "2"],
            "regression": ["run", "text", *text, "--label", "rating", "--name", "rating"],
            "multilabel": ["run", "text", *text, "--label", "topics", "--name", "topics"],
            "tagging": ["run", "tagging", "--train", root / "train.txt", "--dev", root / "dev.txt", "--name", "phrases"],
            "glue": ["run", "glue", "--tasks", "rte", "--data-dir", session_glue_data, "predict_test=false"]}
    for name, (command, kind, *args) in runs.items():
        assert main([str(a) for a in [command, kind, "--model", tiny_model, *args, "--output-dir", root / name,
                                       *FAST]]) == 0, name
    assert main([str(a) for a in ["eval", "glue", "--model", root / "glue" / "models" / "rte-seed0", "--tasks", "rte",
                                   "--data-dir", session_glue_data, "--output-dir", root / "eval", *FAST]]) == 0
    return root


KINDS = ("classification", "regression", "multilabel", "tagging", "glue", "eval")
SCORED = r"-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]"  # a median and its interval


# Slow tier: six tiny runs, one of each kind (~20 s), then the report.
@pytest.mark.slow
def test_report_over_a_run_of_each_kind_shows_every_headline_in_its_own_row(kind_runs, tmp_path, capsys):
    from harness.cli import main

    assert main(["report", "--runs", *(str(kind_runs / kind) for kind in KINDS), "--output", str(tmp_path),
                 "--tracking-uri", "none"]) == 0
    lines = (tmp_path / "leaderboard.md").read_text().splitlines()
    for task, problem, name in (("intents", "classification", "accuracy"), ("rating", "regression", "spearman"),
                                ("topics", "multilabel", "micro_f1"), ("phrases", "tagging", "f1")):
        (row,) = [line for line in lines if f"| {task} (data " in line]
        assert re.search(rf"^\| tiny \| {task} \(data [0-9a-f]{{8}}\) \| {problem} \| {name} \| {SCORED} \| "
                         rf"{2 if task == 'intents' else 1} \| ", row), row
    (trained,) = [line for line in lines if re.match(r"\| \S+/tiny \[departs", line)]
    assert re.search(rf"\| {SCORED} \| {SCORED} \(1/8\) \| 1 \|", trained)
    (evaluated,) = [line for line in lines if "rte-seed0 (evaluated)" in line]
    assert re.search(rf"\| {SCORED} \| {SCORED} \(1/8\) \| 1 \|", evaluated)
    measured = [r for r in csv.DictReader((tmp_path / "leaderboard.csv").open()) if r["source"] == "measured"]
    assert len(measured) == 6 and all(r["score"] and r["score_ci_low"] and r["headline"] for r in measured)
    page = (tmp_path / "leaderboard.html").read_text()
    assert all(f">{task} (data " in page for task in ("intents", "rating", "topics", "phrases"))


# Slow tier: the runs above and an MLflow SQLite store (~10 s).
@pytest.mark.slow
def test_mlflow_names_a_run_of_each_kind_apart_and_the_view_scores_them_all(kind_runs, tmp_path, capsys):
    from mlflow import MlflowClient

    from harness.cli import main
    from harness.tracking import mlflow_view

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(["report", "--runs", *(str(kind_runs / kind) for kind in KINDS), "--output", str(tmp_path / "r"),
                 "--tracking-uri", uri]) == 0
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("leaderboard")
    runs = client.search_runs([experiment.experiment_id], filter_string="tags.source = 'measured'")
    names = [run.info.run_name.split(" [departs")[0] for run in runs]
    assert len(set(names)) == 6, names
    # the score and the data's digest aside, each name says the model, task, headline and stage
    assert {re.sub(r"\(data [0-9a-f]{8}\)", "(data D)", re.sub(r"-?\d+\.\d · ", "N · ", name)) for name in names} == {
        "rte-seed0 · rte · GLUE N · evaluated · FLOPs ?", "tiny · rte · GLUE N · fine-tuned · FLOPs ?",
        *(f"tiny · {task} (data D) · {metric} N · fine-tuned · FLOPs ?" for task, metric in (
            ("intents", "accuracy"), ("rating", "spearman"), ("topics", "micro_f1"), ("phrases", "f1")))}
    # every row has a score in the saved view's column, the headline its name ends with
    for run in runs:
        assert f" {run.data.metrics[mlflow_view.SCORE]:.1f} · " in run.info.run_name


def test_a_row_of_your_own_data_stored_before_rows_were_per_task_reads_back_as_its_task():
    """Renaming an older store's rows (harness report without --runs) names its own-data row for its task."""
    from types import SimpleNamespace

    from harness.tracking.mlflow_leaderboard import _row_of

    tags = {"source": "measured", "model": "/x/tiny", "model_id": "/x/tiny", "model_short": "tiny",
            "stage": "fine-tuned", "recipe": "electra"}
    metrics = {"own.intents.abababab": 50.0, "own.intents.abababab_ci_low": 40.0, "num_params": 1000.0}
    row = _row_of(SimpleNamespace(data=SimpleNamespace(tags=tags, metrics=metrics),
                                  info=SimpleNamespace(run_id="r", run_name="old name")))
    assert title(row) == "tiny · intents (data abababab) · score 50.0 · fine-tuned · FLOPs ?"

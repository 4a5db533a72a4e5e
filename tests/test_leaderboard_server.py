"""End to end through a real MLflow server on loopback: runs log through the harness, and the
leaderboard rows come back through the REST API, one per model, published rows tagged apart."""

import json
import subprocess
import urllib.request

import pytest

from harness.cli import main
from reports.leaderboard import published_rows
from tests.mlflow_ui import mlflow_ui


@pytest.fixture
def server(tmp_path):
    """`mlflow ui` on 127.0.0.1 with a fresh SQLite store; its URL, stopped after the test."""
    try:
        with mlflow_ui(f"sqlite:///{tmp_path / 'server.db'}", tmp_path) as url:
            yield url
    except RuntimeError as error:  # never came up: the test fails, naming the exit status
        pytest.fail(str(error))


def rest(url: str, endpoint: str, body: dict | None = None) -> dict:
    """GET (no body) or POST a JSON body to MLflow's REST API."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{url}/api/2.0/mlflow/{endpoint}", data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def leaderboard_rows(url: str, source: str) -> list[dict]:
    experiment = rest(url, "experiments/get-by-name?experiment_name=leaderboard")["experiment"]
    found = rest(url, "runs/search", {"experiment_ids": [experiment["experiment_id"]],
                                      "filter": f"tags.source = '{source}'", "max_results": 1000})
    return found.get("runs", [])


def flatten(run: dict) -> tuple[dict, dict]:
    tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
    metrics = {m["key"]: m["value"] for m in run["data"].get("metrics", [])}
    return tags, metrics


@pytest.mark.slow
def test_glue_runs_fill_the_leaderboard_on_a_server(server, tiny_model, glue_data, tmp_path, capsys,
                                                    temp_dir_elsewhere):
    for task in ("rte", "cola"):  # two invocations, one model: one row that gathers both tasks
        code = main(["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", task,
                     "--output-dir", str(tmp_path / task), "--tracking-uri", server, "num_epochs=1",
                     "batch_size=8", "precision=fp32", "save_models=false"])
        assert code == 0, capsys.readouterr().err
    (run,) = leaderboard_rows(server, "measured")
    tags, metrics = flatten(run)
    assert tags["model_id"] == str(tiny_model.resolve()) and tags["source"] == "measured"
    # num_epochs=1 and batch_size=8 leave the recipe: the row says so in its name and recipe tag.
    assert tags["recipe"] == "departs: batch_size=8, num_epochs=1"
    # named for what it is, the model first (its folder's name: no pre-training record, so FLOPs ?)
    assert tags["mlflow.runName"].startswith("tiny · cola,rte · GLUE ")
    assert tags["mlflow.runName"].endswith(" [departs: batch_size=8, num_epochs=1]") and tags["task_set"] == "cola,rte"
    assert {"rte", "cola", "glue_score", "num_params", "inference_flops"} <= metrics.keys()
    assert metrics["glue_tasks"] == 2.0 and "pretrain_flops" not in metrics
    assert tags["notes"].startswith("pre-training FLOPs unknown: no pretrain_meta.json beside")
    assert tags["reference"].splitlines() == [str(tmp_path / t / "results.json") for t in ("rte", "cola")]
    published = leaderboard_rows(server, "published")
    assert len(published) == len(published_rows())
    assert {flatten(r)[0]["model"] for r in published} >= {"ELECTRA-Small", "BERT-Base", "ELECTRA-Large"}

    capsys.readouterr()
    assert main(["report", "--output", str(tmp_path / "report"), "--tracking-uri", server]) == 0
    assert "1 measured and 18 published rows" in capsys.readouterr().out
    table = (tmp_path / "report" / "leaderboard.md").read_text()
    assert f"| {tiny_model} [departs: batch_size=8, num_epochs=1] | " in table and "(2/8)" in table
    assert len(leaderboard_rows(server, "measured")) == 1  # reporting did not add a row

    from mlflow import MlflowClient

    client = MlflowClient(server)
    (report,) = client.search_runs([client.get_experiment_by_name("leaderboard-reports").experiment_id])
    assert {f.path for f in client.list_artifacts(report.info.run_id)} == {
        "leaderboard.md", "leaderboard.csv", "leaderboard.html", "flops_vs_glue.png"}


@pytest.mark.slow  # a subprocess importing mlflow: 7.8 s alone with -n 2
def test_the_browse_command_runs_where_mlflow_is_not_on_the_path(tmp_path, monkeypatch):
    """After `tox -e demo` the mlflow script is in .tox/demo/bin, not on PATH: the printed command must
    still start the UI from where the user is."""
    import shlex

    from harness.tracking import mlflow_view

    monkeypatch.setenv("PATH", str(tmp_path))  # no mlflow (nor anything else) on it
    hint = mlflow_view.browse_hint(f"sqlite:///{tmp_path / 'mlflow.db'}", "1")
    command = shlex.split(hint.split("`")[1])
    assert command[0] == "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false" and command[1] != "mlflow"
    done = subprocess.run([*command[1:command.index("ui") + 1], "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "--backend-store-uri" in done.stdout, done.stderr

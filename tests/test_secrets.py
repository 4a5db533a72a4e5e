"""No password or token of a URI (MLflow tracking, Optuna storage, --params-from) in what the harness
prints, logs, saves or echoes: the one redaction (foundation/infra/secrets.py) on worked values, then each
place that shows a URI or a command line, and an unreachable tracking server as one line."""

from __future__ import annotations

import argparse
import json

import pytest

from foundation.infra.secrets import redact_argv, redact_uri
from tests.conftest import free_port, glue_args, run_cli

SECRET = "S3cr3t-pw"

REDACTED = {
    f"postgresql://harness:{SECRET}@db.example:5432/optuna": "postgresql://harness:***@db.example:5432/optuna",
    f"mysql://:{SECRET}@127.0.0.1/optuna": "mysql://:***@127.0.0.1/optuna",  # an empty user
    f"http://me:{SECRET}@mlflow.example:5000": "http://me:***@mlflow.example:5000",
    f"https://me:{SECRET}@mlflow.example/": "https://me:***@mlflow.example/",
    f"postgresql+psycopg2://u:{SECRET}@h/db": "postgresql+psycopg2://u:***@h/db",
    f"postgresql://u:p@ss/{SECRET}@h/db": "postgresql://u:***@h/db",  # '@' and '/' unescaped, as SQLAlchemy allows
    f"postgresql://u@h/db?password={SECRET}": "postgresql://u@h/db?password=***",
    f"postgresql://h/db?sslmode=require&PassWord={SECRET}&x=1": "postgresql://h/db?sslmode=require&PassWord=***&x=1",
    f"https://h/?token={SECRET}": "https://h/?token=***",
    f"https://h/?access_token={SECRET}#f": "https://h/?access_token=***#f",
    f"https://h/?api_key={SECRET}": "https://h/?api_key=***",
    f"mysql://h/db?passwd={SECRET};pwd={SECRET}": "mysql://h/db?passwd=***;pwd=***",
    f"postgresql://h/db?db_secret={SECRET}": "postgresql://h/db?db_secret=***",
    f"postgresql://u:{SECRET}@h/db#study": "postgresql://u:***@h/db#study",  # --params-from STORAGE#STUDY
    # nothing secret: as given
    "postgresql://harness@db.example/optuna": "postgresql://harness@db.example/optuna",
    "sqlite:///runs/mlflow.db": "sqlite:///runs/mlflow.db",
    "http://127.0.0.1:5000": "http://127.0.0.1:5000",
    "https://h/?page=2&tokens_seen=3": "https://h/?page=2&tokens_seen=3",
    "runs/best_params.json": "runs/best_params.json",
    "none": "none",
}


@pytest.mark.parametrize("uri", list(REDACTED))
def test_redact_uri_worked_values(uri):
    assert redact_uri(uri) == REDACTED[uri]


def test_redact_uri_in_a_message():
    message = (f"store 'postgresql://u:{SECRET}@h/db' failed (API request to http://me:{SECRET}@h:5000/api "
               f"failed) and mysql://:{SECRET}@h/x?token={SECRET}")
    shown = redact_uri(message)
    assert SECRET not in shown
    assert shown == ("store 'postgresql://u:***@h/db' failed (API request to http://me:***@h:5000/api failed) "
                     "and mysql://:***@h/x?token=***")


def test_redact_argv():
    argv = ["run", "glue", "--model", "m", "--tracking-uri", f"http://me:{SECRET}@h:5000",
            f"--storage=postgresql://u:{SECRET}@h/db", "--params-from", f"mysql://:{SECRET}@h/db#study",
            f"note=https://h/?token={SECRET}", "--storage", f"u:{SECRET}@h/db", "seed=3"]
    assert redact_argv(argv) == ["run", "glue", "--model", "m", "--tracking-uri", "http://me:***@h:5000",
                                 "--storage=postgresql://u:***@h/db", "--params-from", "mysql://:***@h/db#study",
                                 "note=https://h/?token=***", "--storage", "u:***@h/db", "seed=3"]
    assert redact_argv(["run", "glue", "--tracking-uri", "sqlite:///x.db"]) == \
        ["run", "glue", "--tracking-uri", "sqlite:///x.db"]


def test_optuna_storage_redaction_covers_every_form():
    from harness.search.study import redact

    for uri, shown in REDACTED.items():
        assert redact(uri) == shown


def test_a_best_record_holds_no_storage_password():
    """best_params.json, results.json's `search.storage` (origin_block) and the search's MLflow tag all
    take the storage from best_record or redact."""
    import optuna

    from harness.search import study as studies

    study = optuna.create_study(direction="maximize", study_name="s")
    study.set_user_attr("task", "rte")
    study.set_user_attr("trial_seeds", [0])
    study.enqueue_trial({"learning_rate": 1e-4})
    study.optimize(lambda trial: trial.suggest_float("learning_rate", 1e-5, 1e-3), n_trials=1)
    for url in (f"postgresql://:{SECRET}@h/db", f"postgresql://u@h/db?password={SECRET}",
                f"postgresql://u:{SECRET}@h/db"):
        record = studies.best_record(study, url)
        assert record["storage"] == redact_uri(url) and "***" in record["storage"]
        assert SECRET not in json.dumps(record) + json.dumps(studies.origin_block(record))


def test_the_leaderboard_hint_hides_the_password():
    from harness.tracking import mlflow_view

    for uri in (f"postgresql://u:{SECRET}@h/mlflow", f"mysql://:{SECRET}@h/mlflow",
                f"postgresql://u@h/mlflow?password={SECRET}", f"http://me:{SECRET}@h:5000"):
        hint = mlflow_view.browse_hint(uri, "1")
        assert SECRET not in hint and "***" in hint, hint


def test_the_resume_hint_hides_the_password(monkeypatch, capsys):
    from foundation.training.stop import Stopped
    from harness import cli

    def stopped(_args):
        raise Stopped("stopped by SIGTERM at step 3", 15)

    monkeypatch.setattr(cli, "parse", lambda argv: argparse.Namespace(handler=stopped))
    code = cli.main(["run", "glue", "--model", "m", "--tracking-uri", f"postgresql://u:{SECRET}@h/db",
                     "--params-from", f"mysql://:{SECRET}@h/o#s"])
    err = capsys.readouterr().err
    assert code == 143 and SECRET not in err
    assert "resume with: harness run glue --model m --tracking-uri 'postgresql://u:***@h/db' --params-from " \
           "'mysql://:***@h/o#s' (put the passwords shown as *** back)" in err


def test_the_experiment_records_no_password():
    from harness.commands.experiment import recorded_command

    command = recorded_command(["experiment", "efficiency", "--tracking-uri", f"http://me:{SECRET}@h:5000",
                                "finetune.num_epochs=1"])
    assert command == "harness experiment efficiency --tracking-uri 'http://me:***@h:5000' finetune.num_epochs=1"
    assert recorded_command(["demo"]) == ""


def test_tracking_errors_hide_the_password():
    from mlflow.exceptions import MlflowException

    from foundation.infra.errors import UserError
    from harness.tracking import mlflow_leaderboard

    uri = f"http://me:{SECRET}@h:5000"
    with pytest.raises(UserError) as raised, mlflow_leaderboard.tracking_errors(uri, "reading the leaderboard"):
        raise MlflowException(f"API request to {uri}/api/2.0/mlflow/runs/search failed with exception x")
    assert SECRET not in str(raised.value) and "http://me:***@h:5000" in str(raised.value)


def test_a_bad_tracking_uri_hides_the_password():
    from foundation.infra.errors import UserError
    from harness.tracking import mlflow_runs

    with pytest.raises(UserError) as raised:
        mlflow_runs.checked_uri(f"postgresql://u:{SECRET}@h:port/db")
    assert SECRET not in str(raised.value)


def test_an_unreachable_tracking_server_is_one_line_before_training(tiny_model, glue_data, tmp_path, capsys):
    """`harness run glue` at a server nobody answers: exit 2, one line naming it with the password hidden
    and what to do, no MLflow traceback, no training, the password in no output and no file."""
    uri = f"http://harness:{SECRET}@127.0.0.1:{free_port()}"
    args = glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "num_epochs=1", "precision=fp32")
    args[args.index("--tracking-uri") + 1] = uri
    code, out, err = run_cli(args, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("harness: error: MLflow tracking server http://harness:***@127.0.0.1:"), err
    assert "is unreachable" in err and "--tracking-uri" in err
    assert SECRET not in out + err
    assert not list(tmp_path.glob("out/**/*.pt")) and not list(tmp_path.glob("out/**/*.safetensors"))
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_mlflow_prints_no_run_url_for_a_uri_with_a_password(monkeypatch):
    """MLflow writes `View run NAME at: URI/#/...` to stdout as the URI was given; with a secret in it,
    that print is off (and a plain URI keeps it)."""
    import os

    from foundation.infra.errors import UserError
    from harness.tracking import mlflow_runs

    monkeypatch.delenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", raising=False)
    with pytest.raises(UserError):
        mlflow_runs.use_experiment("x", f"http://127.0.0.1:{free_port()}")
    assert "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT" not in os.environ
    with pytest.raises(UserError) as raised:
        mlflow_runs.use_experiment("x", f"http://me:{SECRET}@127.0.0.1:{free_port()}")
    assert os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] == "true" and SECRET not in str(raised.value)


def test_an_unreachable_postgresql_storage_is_one_line_with_the_password_hidden(tmp_path, capsys):
    """`harness search` at a PostgreSQL server nobody answers: exit 2, one line, no password anywhere."""
    uri = f"postgresql://optuna:{SECRET}@127.0.0.1:{free_port()}/studies?connect_timeout=3"
    code, out, err = run_cli(["search", "glue", "--task", "rte", "--model", tmp_path / "no-model", "--trials",
                              "1", "--storage", uri, "--output-dir", tmp_path / "out", "--tracking-uri",
                              f"sqlite:///{tmp_path / 'mlflow.db'}"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "cannot open Optuna storage 'postgresql://optuna:***@127.0.0.1:" in err
    assert SECRET not in out + err
    assert not (tmp_path / "out").exists()


def test_a_server_that_asks_for_credentials_is_left_to_mlflow(monkeypatch):
    """/health answered 401 (an auth proxy in front of MLflow) is a server that is up: no 'unreachable'."""
    import http.server
    import threading

    from harness.tracking import mlflow_runs

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(401)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        uri = f"http://me:{SECRET}@127.0.0.1:{server.server_port}"
        assert mlflow_runs.check_server(uri) == uri
    finally:
        server.shutdown()

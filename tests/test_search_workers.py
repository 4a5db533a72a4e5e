"""Several `harness search` processes on one study (SQLite, a real PostgreSQL); a worker killed mid-trial.

The workers are real subprocesses fine-tuning the tiny model; the trials must add up, none lost or
run twice, and a dead worker's trial must end FAIL and be queued again rather than stay RUNNING.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from harness.cli import main
from tests import mlflow_runs, postgres
from tests.test_search import fast_dir

REPO = Path(__file__).resolve().parents[1]
# trials long enough that both workers, started together, get some of the 8
SPACE = "num_epochs = [3, 6]\nbatch_size = [8]\nlearning_rate = [1e-4, 1e-2]\n"


@pytest.fixture(scope="module")
def postgres_url():
    reason = postgres.why_unavailable()
    if reason:
        pytest.skip(reason)
    with postgres.server() as url:
        yield url


@pytest.fixture(scope="module")
def mlflow_template(tmp_path_factory):
    """An initialised MLflow store: creating its tables takes seconds, so each test copies this one."""
    import mlflow

    with fast_dir(tmp_path_factory.mktemp("mlflow")) as folder:
        mlflow.MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}").search_experiments()
        yield folder / "mlflow.db"


@pytest.fixture
def tmp(tmp_path, mlflow_template):
    with fast_dir(tmp_path) as path:
        shutil.copy(mlflow_template, path / "mlflow.db")
        yield path


def worker_args(tiny_model, glue_data, tmp, storage, trials, *extra, space=SPACE):
    (tmp / "space.toml").write_text(space)
    return ["search", "glue", "--task", "rte", "--model", str(tiny_model), "--data-dir", str(glue_data),
            "--trials", str(trials), "--storage", storage, "--study-name", "shared", "--space",
            str(tmp / "space.toml"), "--output-dir", str(tmp / "out"), "--tracking-uri",
            f"sqlite:///{tmp / 'mlflow.db'}", "precision=fp32", *extra]


def start(args, tmp):
    env = os.environ | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                        "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def nested_runs(tmp):
    """(trial number, status, optuna_state) of every trial's MLflow run."""
    return [(run.data.tags["optuna_trial"], run.info.status, run.data.tags.get("optuna_state"))
            for run in mlflow_runs.runs(tmp / "mlflow.db") if "optuna_trial" in run.data.tags]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_workers_share_one_study(backend, tiny_model, glue_data, tmp, request):
    storage = (f"sqlite:///{tmp / 'optuna.db'}" if backend == "sqlite"
               else request.getfixturevalue("postgres_url"))
    args = worker_args(tiny_model, glue_data, tmp, storage, 8)
    workers = [start(args, tmp) for _ in range(2)]
    logs = [worker.communicate(timeout=480)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], logs
    study = optuna.load_study(study_name="shared", storage=postgres_storage(storage))
    trials = study.get_trials()
    finished = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    # Each worker stops once finished + running trials reach 8; two finishing in one instant add one each.
    assert 8 <= len(finished) <= 9 and not [t for t in trials if t.state.name == "RUNNING"]
    assert sorted(t.number for t in trials) == list(range(len(trials)))
    by_worker = {t.user_attrs["worker"] for t in finished}
    assert len(by_worker) == 2, logs  # both processes ran trials of the one study
    # one MLflow run per trial, none duplicated or lost, each ended with the trial's state
    runs = nested_runs(tmp)
    assert sorted(int(number) for number, _, _ in runs) == sorted(t.number for t in trials)
    assert {(int(n), state) for n, _, state in runs} == {(t.number, t.state.name) for t in trials}
    assert all(status != "RUNNING" for _, status, _ in runs)


def postgres_storage(url):
    """What optuna.load_study needs for a URL that harness search accepts (psycopg2 when only it is here)."""
    from harness.study import _with_driver

    return _with_driver(url)


def test_killed_worker_trial_fails_and_is_retried(tiny_model, glue_data, tmp, capsys):
    storage = f"sqlite:///{tmp / 'optuna.db'}"
    # trials long enough to be caught running
    args = worker_args(tiny_model, glue_data, tmp, storage, 2, "--heartbeat-s", "1",
                       space="num_epochs = [30, 30]\nbatch_size = [8]\n")
    victim = start(args, tmp)
    try:
        running = wait_for_running_trial(storage, victim)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    time.sleep(2.5)  # the grace period: 2 x --heartbeat-s
    assert main(args) == 0, capsys.readouterr()
    study = optuna.load_study(study_name="shared", storage=storage)
    killed = study.trials[running]
    assert killed.state.name == "FAIL" and not [t for t in study.trials if t.state.name == "RUNNING"]
    retry = [t for t in study.trials if t.system_attrs.get("failed_trial") == running]
    assert len(retry) == 1 and retry[0].params == killed.params and retry[0].state.name == "COMPLETE"
    assert (str(running), "KILLED", "FAIL") in nested_runs(tmp)  # its MLflow run closed by the next worker


def has_heartbeat(storage, trial_id) -> bool:
    import sqlalchemy

    with sqlalchemy.create_engine(storage).connect() as connection:
        query = sqlalchemy.text("select count(*) from trial_heartbeats where trial_id = :id")
        return connection.execute(query, {"id": trial_id}).scalar() > 0


def wait_for_running_trial(storage, process, timeout_s=120):
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        assert process.poll() is None, process.stdout.read()
        try:
            for name in optuna.study.get_all_study_names(storage):
                for trial in optuna.load_study(study_name=name, storage=storage).trials:
                    # Optuna only fails RUNNING trials that have beaten their heart at least once;
                    # on a loaded machine a worker can be killed before its first beat.
                    if trial.state.name == "RUNNING" and has_heartbeat(storage, trial._trial_id):
                        return trial.number
        except Exception:  # the worker may be creating the tables right now
            pass
        time.sleep(0.05)
    raise AssertionError("the worker never started a trial")

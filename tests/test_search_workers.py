"""Several `harness search` processes on one study (SQLite, a real PostgreSQL); a worker killed mid-trial.

The workers are real subprocesses fine-tuning the tiny model; the trials must add up, none lost or
run twice, and a dead worker's trial must end FAIL and be queued again rather than stay RUNNING.
"""

import shutil
import signal
import time
import warnings

import optuna
import pytest
import sqlalchemy
import sqlalchemy.exc

from harness.cli import main
from harness.search import study as studies
from harness.search.space import SEARCHED, SearchSpace
from harness.search.trials import SearchInvocation, run_search
from tests import mlflow_store, postgres, processes
from tests.search_fakes import fake_target, fast_dir

# 1 or 2 epochs of 2 steps a seed: what is checked is the trials' bookkeeping, not what they learn
SPACE = "num_epochs = [1, 2]\nbatch_size = [8]\nlearning_rate = [1e-4, 1e-2]\n"
TRIALS = 4
ALL_PARAMS = set(SEARCHED)  # a trial's parameters; never the seed


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


def start(args, tmp, module="harness.cli"):
    return processes.start(args, tmp, module)


def nested_runs(tmp):
    """(trial number, status, optuna_state) of every trial's MLflow run."""
    return [(run.data.tags["optuna_trial"], run.info.status, run.data.tags.get("optuna_state"))
            for run in mlflow_store.runs(tmp / "mlflow.db") if "optuna_trial" in run.data.tags]


# Slow tier, over 30 s (34 s alone): a real worker process and a worker in this one on one study on a real
# PostgreSQL server, the only check of that engine. On SQLite the same sharing runs in release: in CI,
# test_killed_worker_trial_fails_and_is_retried already puts two processes on one SQLite study.
@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param("sqlite", marks=pytest.mark.release), "postgresql"])
def test_two_workers_share_one_study(backend, tiny_model, glue_data, tmp, request, monkeypatch, capsys):
    from harness.search import trials as search_trials
    from tests import search_worker

    storage = (f"sqlite:///{tmp / 'optuna.db'}" if backend == "sqlite"
               else request.getfixturevalue("postgres_url"))
    args = worker_args(tiny_model, glue_data, tmp, storage, TRIALS, "--trial-seeds", "0,1")
    # tests.search_worker: each worker's first trial waits until the other has one running. One worker is
    # a real process, the other runs here (a second process would only add its ~10 s of imports): two
    # processes on one study, each with its own connections, as two machines would be.
    other = start(args, tmp, module="tests.search_worker")
    monkeypatch.setattr(search_worker, "_waited", False)
    monkeypatch.setattr(search_trials, "_train_trial", search_worker._after_rendezvous)
    try:
        here = main(args)
    except BaseException:
        other.kill()  # not left waiting at the rendezvous
        raise
    logs = [other.communicate(timeout=480)[0], capsys.readouterr().out]
    assert [other.returncode, here] == [0, 0], logs
    study = optuna.load_study(study_name="shared", storage=postgres_storage(storage))
    trials = study.get_trials()
    finished = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    # Each worker stops once finished + running trials reach TRIALS; two finishing in one instant add one each.
    assert TRIALS <= len(finished) <= TRIALS + 1 and not [t for t in trials if t.state.name == "RUNNING"]
    assert sorted(t.number for t in trials) == list(range(len(trials)))
    by_worker = {t.user_attrs["worker"] for t in finished}
    assert len(by_worker) == 2, logs  # both processes ran trials of the one study
    # every trial trained both seeds of one configuration (no seed parameter), scored by their mean
    assert all(t.params.keys() == ALL_PARAMS for t in finished)
    for trial in (t for t in finished if t.state.name == "COMPLETE"):
        scores = trial.user_attrs["seed_scores"]
        assert scores.keys() == {"0", "1"} and trial.value == pytest.approx((scores["0"] + scores["1"]) / 2)
    # one MLflow run per trial, none duplicated or lost, each ended with the trial's state
    runs = nested_runs(tmp)
    assert sorted(int(number) for number, _, _ in runs) == sorted(t.number for t in trials)
    assert {(int(n), state) for n, _, state in runs} == {(t.number, t.state.name) for t in trials}
    assert all(status != "RUNNING" for _, status, _ in runs)


def postgres_storage(url):
    """What optuna.load_study needs for a URL that harness search accepts (psycopg2 when only it is here)."""
    from harness.search.study import _with_driver

    return _with_driver(url)


@pytest.mark.slow
def test_killed_worker_trial_fails_and_is_retried(tiny_model, glue_data, tmp, capsys):
    storage = f"sqlite:///{tmp / 'optuna.db'}"
    # trials long enough to be caught running; one trial wanted, so the worker run here runs the retry alone
    args = worker_args(tiny_model, glue_data, tmp, storage, 1, "--heartbeat-s", "1",
                       space="num_epochs = [30, 30]\nbatch_size = [8]\n")
    victim = start(args, tmp)
    try:
        # killed mid-training: every parameter drawn (so its MLflow run is open) and its heart beating
        running = wait_for_trial(storage, victim, lambda trial: trial.params.keys() == ALL_PARAMS)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    wait_until_stale(storage, running)
    assert main(args) == 0, capsys.readouterr()
    study = optuna.load_study(study_name="shared", storage=storage)
    killed = study.trials[running]
    assert killed.state.name == "FAIL" and not [t for t in study.trials if t.state.name == "RUNNING"]
    retry = [t for t in study.trials if t.system_attrs.get("failed_trial") == running]
    assert len(retry) == 1 and retry[0].params == killed.params and retry[0].state.name == "COMPLETE"
    # its one MLflow run, ended by the next worker
    assert [run for run in nested_runs(tmp) if run[0] == str(running)] == [(str(running), "KILLED", "FAIL")]


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_trial_killed_while_drawing_is_retried_with_what_it_drew(tmp):
    """A worker killed after drawing learning_rate, before opening its run: the retry keeps that draw."""
    storage = f"sqlite:///{tmp / 'optuna.db'}"
    space = SearchSpace(learning_rate=(1e-4, 1e-2), num_epochs=(2, 3), batch_size=(16, 32))
    dead = studies.open_storage(storage, heartbeat_s=1)
    study = optuna.create_study(storage=dead, study_name="shared", direction="maximize")
    study.enqueue_trial({"learning_rate": 1e-3})
    trial = study.ask()
    trial.suggest_float("learning_rate", *space.learning_rate, log=True)
    dead.record_heartbeat(trial._trial_id)  # the beat Optuna's thread sends as the objective starts
    wait_until_stale(storage, trial.number)
    run_search(SearchInvocation("glue", "rte", "runs/fake", 2, tmp / "out", space, storage=storage,
                                study_name="shared", heartbeat_s=1,
                                tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}"),
               fake_target)
    study = optuna.load_study(study_name="shared", storage=storage)
    killed, retry = study.trials[0], study.trials[1]
    assert killed.state.name == "FAIL" and killed.params == {"learning_rate": 1e-3}
    assert retry.system_attrs["failed_trial"] == 0 and retry.state.name == "COMPLETE"
    assert retry.params["learning_rate"] == 1e-3 and retry.params.keys() == ALL_PARAMS
    # no run was opened for it: the worker that failed it records one, with the parameter it drew
    (run,) = mlflow_store.runs(tmp / "mlflow.db", "tags.optuna_trial = '0'")
    assert (run.info.status, run.data.tags["optuna_state"], run.data.params) == (
        "KILLED", "FAIL", {"learning_rate": "0.001"})


def has_heartbeat(storage: optuna.storages.RDBStorage, trial_id: int) -> bool:
    """Whether the trial has beaten its heart; Optuna fails only RUNNING trials that have."""
    with storage.engine.connect() as connection:  # Optuna's own table: it has no public reader
        query = sqlalchemy.text("select count(*) from trial_heartbeats where trial_id = :id")
        return connection.execute(query, {"id": trial_id}).scalar() > 0


def wait_for_trial(storage_url, process, ready, timeout_s=180) -> int:
    """The number of the first RUNNING trial with a heartbeat for which ready(trial) holds."""
    storage = None
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        assert process.poll() is None, process.stdout.read()
        try:  # the worker may be creating the tables (leave that to it) or the study right now
            storage = storage or optuna.storages.RDBStorage(storage_url, skip_table_creation=True)
            study = optuna.load_study(study_name="shared", storage=storage)
        except (KeyError, optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError):
            pass
        else:
            for trial in study.get_trials(states=(optuna.trial.TrialState.RUNNING,)):
                if ready(trial) and has_heartbeat(storage, trial._trial_id):
                    return trial.number
        time.sleep(0.1)
    raise AssertionError(f"no trial got ready in {timeout_s} s")


def wait_until_stale(storage_url, number, timeout_s=60) -> None:
    """Until the trial's last heartbeat is older than the grace period (2 s) by the database's clock."""
    with warnings.catch_warnings():  # heartbeat_interval is "experimental" since optuna 2.9
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = optuna.storages.RDBStorage(storage_url, heartbeat_interval=1, grace_period=2)
    study = optuna.load_study(study_name="shared", storage=storage)
    trial_id = study.trials[number]._trial_id
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if trial_id in storage._get_stale_trial_ids(study._study_id):  # what fail_stale_trials asks
            return
        time.sleep(0.1)
    raise AssertionError(f"trial {number} still has a fresh heartbeat after {timeout_s} s")

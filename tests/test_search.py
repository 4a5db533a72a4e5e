"""`harness search`: space, sampler, pruning and failures, MLflow records, best parameters, bad input."""

import contextlib
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import optuna
import pytest

from harness.cli import main
from harness.search import study as studies
from harness.search.space import SearchSpace
from harness.search.targets import dev_score
from harness.search.trials import SearchRun, SearchTarget, run_search
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult
from tests import mlflow_store


def run(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def fake_target(calls=None):
    """Dev scores peak at learning_rate 1e-3 and rise with epochs; above 8e-3 the loss "diverges"."""
    def train(config, on_epoch):
        if calls is not None:
            calls.append(config)
        if config.learning_rate > 8e-3:
            raise FloatingPointError("training loss became nan at step 3; lower learning_rate")
        if config.batch_size == 64:
            raise RuntimeError("CUDA out of memory")
        quality = 1 - abs(math.log10(config.learning_rate) + 3) / 2
        history = []
        for epoch in range(1, config.num_epochs + 1):
            score = quality * (0.5 + 0.5 * epoch / config.num_epochs)
            history.append({"epoch": epoch, "train_loss": 1 / epoch, "validation_accuracy": score,
                            "validation_score": score})
            on_epoch(epoch, history[-1])
        return FinetuneResult(history=history, metrics={"validation": {"score": score}}, outputs={},
                              num_train_steps=4, train_time_s=0.1, train_examples_per_s=160.0,
                              train_tokens_per_s=1000.0, train_examples_seen=16)
    return SearchTarget("glue", "rte", "fake", "small", 3, train, dev_score)


SPACE = SearchSpace(learning_rate=(1e-4, 1e-2), num_epochs=(2, 4), batch_size=(16, 32, 64))


@contextlib.contextmanager
def fast_dir(fallback: Path):
    """A fresh directory on tmpfs when there is one: SQLite's fsyncs on a busy disk cost seconds a trial."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield fallback
        return
    path = Path(tempfile.mkdtemp(dir=shm, prefix="harness-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def tmp(tmp_path):
    """The test's directory, for studies, MLflow stores and outputs alike."""
    with fast_dir(tmp_path) as path:
        yield path


@pytest.fixture(scope="module")
def mlflow_db(tmp_path_factory):
    """One MLflow store for the module: creating one costs seconds. Tests keep apart by study name."""
    with fast_dir(tmp_path_factory.mktemp("mlflow")) as path:
        yield path / "mlflow.db"


def search(tmp, mlflow_db, trials, make_target=fake_target, **kwargs):
    settings = {"benchmark": "glue", "task": "rte", "model": "runs/fake", "trials": trials,
                "output_dir": tmp / "out", "space": SPACE, "study_name": tmp.name,
                "storage": f"sqlite:///{tmp / 'optuna.db'}", "tracking_uri": f"sqlite:///{mlflow_db}"}
    return run_search(SearchRun(**settings | kwargs), make_target)


def load(tmp, file="optuna.db"):
    return optuna.load_study(study_name=tmp.name, storage=f"sqlite:///{tmp / file}")


def mlflow_trials(mlflow_db, study_name):
    """{trial number: (run name, status, optuna_state tag)} of a study's nested runs."""
    found = mlflow_store.runs(mlflow_db, f"tags.optuna_study = '{study_name}'")
    return {int(run.data.tags["optuna_trial"]): (run.info.run_name, run.info.status, run.data.tags["optuna_state"])
            for run in found if {"optuna_trial", "optuna_state"} <= run.data.tags.keys()}


def test_default_space_follows_the_recipe():
    small_rte = SearchSpace().resolved("small", 10)
    assert small_rte.learning_rate == pytest.approx((1e-4, 9e-4)) and small_rte.num_epochs == (5, 15)
    base_mrpc = SearchSpace().resolved("base", 3)
    assert base_mrpc.learning_rate == pytest.approx((1e-4 / 3, 3e-4)) and base_mrpc.num_epochs == (1, 4)
    fixed = SearchSpace(learning_rate=(2e-4, 5e-4), num_epochs=(2, 2)).resolved("large", 10)
    assert fixed.learning_rate == (2e-4, 5e-4) and fixed.num_epochs == (2, 2)


def test_sampler_draws_follow_the_trial_number():
    def draws(seed, numbers):
        sampler = studies.TrialSeededTPE(seed, n_startup_trials=10)
        study = optuna.create_study(sampler=sampler, direction="maximize")
        for _ in range(max(numbers) + 1):
            trial = study.ask()
            params = SPACE.resolved("small", 3).suggest(trial)
            study.tell(trial, 0.5)
            yield trial.number, params

    first = dict(draws(0, [0, 1, 2]))
    again = dict(draws(0, [0, 1, 2]))
    assert first == again and first[0] != first[1] != first[2]
    assert dict(draws(1, [0]))[0] != first[0]


def test_search_prunes_fails_and_records_every_trial(tmp, mlflow_db):
    record = search(tmp, mlflow_db, trials=10)
    study = load(tmp)
    counts = studies.count_states(study)
    # seeded: the same trials every time; failures do not count towards --trials
    assert (counts["COMPLETE"], counts["PRUNED"], counts["FAIL"], counts["RUNNING"]) == (4, 6, 3, 0)
    failed = [t for t in study.trials if t.state.name == "FAIL"]
    assert {t.user_attrs["error"] for t in failed} == {
        "FloatingPointError: training loss became nan at step 3; lower learning_rate",
        "RuntimeError: CUDA out of memory"}
    for trial in study.get_trials(states=(optuna.trial.TrialState.PRUNED,)):
        assert trial.user_attrs["epochs_run"] < trial.user_attrs["epochs_planned"]
        assert trial.user_attrs["epochs_planned"] == trial.params["num_epochs"]
        assert max(trial.intermediate_values) == trial.user_attrs["epochs_run"]
    # one nested MLflow run per trial, its status following the trial's state
    status = {"COMPLETE": "FINISHED", "PRUNED": "KILLED", "FAIL": "FAILED"}
    assert mlflow_trials(mlflow_db, tmp.name) == {
        t.number: (f"trial {t.number}", status[t.state.name], t.state.name) for t in study.trials}
    best = max((t for t in study.trials if t.state.name == "COMPLETE"), key=lambda t: t.value)
    saved = json.loads((tmp / "out" / "best_params.json").read_text())
    assert saved == record and saved["trial"] == best.number and saved["params"] == best.params
    assert saved["trials"]["PRUNED"] == 6 and saved["pruning"]["epochs_skipped"] == 12
    assert saved["settings"] == {} and saved["storage"].endswith("optuna.db")


def test_hyperband_pruner(tmp, mlflow_db):
    # Hyperband puts trials in brackets by a hash of the study name: fix it to pin the outcome.
    record = search(tmp, mlflow_db, trials=10, pruner="hyperband", study_name="hyperband")
    assert (record["trials"]["COMPLETE"], record["trials"]["PRUNED"], record["trials"]["FAIL"]) == (7, 3, 3)
    assert record["pruning"]["epochs_skipped"] == 7


def test_rerun_resumes_the_study(tmp, mlflow_db):
    search(tmp, mlflow_db, trials=3)
    before = len(load(tmp).trials)
    search(tmp, mlflow_db, trials=3)  # already there: no new trial
    assert len(load(tmp).trials) == before
    search(tmp, mlflow_db, trials=5)
    counts = studies.count_states(load(tmp))
    assert counts["COMPLETE"] + counts["PRUNED"] == 5


def test_worker_gives_up_when_every_trial_fails(tmp, mlflow_db):
    def broken():
        target = fake_target()
        target.train = lambda config, on_epoch: 1 / 0
        return target

    record = search(tmp, mlflow_db, 3, broken)
    assert record["gave_up"] == "5 trials failed in a row, the last with ZeroDivisionError: division by zero"
    assert studies.count_states(load(tmp))["FAIL"] == 5 and not (tmp / "out" / "best_params.json").exists()


def test_fixed_settings_reach_every_trial(tmp, mlflow_db):
    calls = []
    search(tmp, mlflow_db, 3, lambda: fake_target(calls),
           config=FinetuneConfig(max_train_examples=500, precision="fp32"))
    assert {(c.max_train_examples, c.precision, c.adam_epsilon) for c in calls} == {(500, "fp32", 1e-6)}
    trial = load(tmp).trials[0]
    assert calls[0].learning_rate == trial.params["learning_rate"] and calls[0].seed == trial.params["seed"]
    saved = json.loads((tmp / "out" / "best_params.json").read_text())
    assert saved["settings"] == {"precision": "fp32", "max_train_examples": 500}


def test_params_from_file_and_study_with_overrides_winning(tmp, mlflow_db, capsys, monkeypatch):
    search(tmp, mlflow_db, trials=3)
    saved = json.loads((tmp / "out" / "best_params.json").read_text())
    import harness.finetuning.glue_run

    seen = []
    monkeypatch.setattr(harness.finetuning.glue_run, "run_glue", lambda glue_run: seen.append(glue_run) or {})
    monkeypatch.setattr("harness.finetuning.table.glue_table", lambda results: "table")
    base = ["run", "glue", "--model", "m", "--tasks", "rte", "--seeds", "3",
            "--output-dir", str(tmp / "g")]
    study = f"sqlite:///{tmp / 'optuna.db'}#{tmp.name}"
    for source in (str(tmp / "out" / "best_params.json"), study):
        code, out, err = run([*base, "--params-from", source, "num_epochs=1"], capsys)
        assert code == 0, err
        assert f"{tmp.name} trial {saved['trial']} (rte, dev score" in out
    first, second = seen
    assert first == second and first.seeds == 3
    best, config = saved["params"], first.config
    assert (config.learning_rate, config.batch_size, config.seed, config.num_epochs) == (
        best["learning_rate"], best["batch_size"], best["seed"], 1)


BAD_SEARCH = {
    "unknown space parameter": ("space", "lerning_rate = [1e-4, 1e-3]\n",
                                "search space '{space}': unknown setting 'lerning_rate' (known: batch_size"),
    "bad space range": ("space", "learning_rate = [1e-3, 1e-4]\n",
                        "learning_rate must be [low, high] with low"),
    "searched fixed setting": ("args", ["seed=3"], "seed cannot be a fixed setting: the search sets it; "
                               "fix it in the --space file instead (seed = [3, 3])"),
    "unreachable storage": ("args", ["--storage", "postgresql://harness:secret@127.0.0.1:1/optuna"],
                            "cannot open Optuna storage 'postgresql://harness:***@127.0.0.1:1/optuna' ("),
    "zero trials": ("args", ["--trials", "0"], "--trials must be at least 1 (got 0)"),
}


@pytest.mark.parametrize("case", list(BAD_SEARCH))
def test_bad_search_input(case, tmp, capsys, monkeypatch):
    kind, value, message = BAD_SEARCH[case]
    monkeypatch.setattr("harness.search.targets.glue_target", lambda *a: fake_target())
    args = ["search", "glue", "--task", "rte", "--model", "m", "--storage", f"sqlite:///{tmp / 'o.db'}",
            "--output-dir", str(tmp / "out"), "--tracking-uri", f"sqlite:///{tmp / 'm.db'}"]
    if kind == "space":
        (tmp / "space.toml").write_text(value)
        args += ["--space", str(tmp / "space.toml")]
    else:
        args += value
    code, _, err = run(args, capsys)
    assert code == 2 and message.format(space=tmp / "space.toml") in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp / "out").exists()


def test_existing_study_of_another_kind(tmp, capsys, monkeypatch):
    monkeypatch.setattr("harness.search.targets.glue_target", lambda *a: fake_target())
    storage = f"sqlite:///{tmp / 'o.db'}"
    optuna.create_study(storage=storage, study_name="loss", direction="minimize")
    other = optuna.create_study(storage=storage, study_name="mrpc", direction="maximize")
    other.set_user_attr("task", "mrpc")
    args = ["search", "glue", "--task", "rte", "--model", "m", "--storage", storage,
            "--tracking-uri", f"sqlite:///{tmp / 'm.db'}", "--output-dir", str(tmp / "out")]
    code, _, err = run([*args, "--study-name", "loss"], capsys)
    assert code == 2 and f"study 'loss' in '{storage}' exists and has direction minimize, but harness " \
        "search maximizes dev scores; pass another --study-name" in err and len(err.splitlines()) == 1
    code, _, err = run([*args, "--study-name", "mrpc"], capsys)
    assert code == 2 and 'was created with task "mrpc", not "rte"' in err and len(err.splitlines()) == 1


def test_bad_params_from(tmp, capsys):
    (tmp / "other.json").write_text('{"format": "electra-harness/glue-results/1"}')
    cases = [(str(tmp / "missing.json"), "does not exist"),
             (str(tmp / "other.json"), "is not a best_params.json"),
             (f"sqlite:///{tmp / 'missing.db'}#s", "no Optuna storage file"),
             (f"sqlite:///{tmp / 'o.db'}#nope", "no study 'nope' in")]
    optuna.create_study(storage=f"sqlite:///{tmp / 'o.db'}", study_name="other")
    for source, message in cases:
        code, _, err = run(["run", "glue", "--model", "m", "--params-from", source], capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_cli_builds_the_search_run(tmp, capsys, monkeypatch):
    import harness.search.trials

    seen = []
    monkeypatch.setattr(harness.search.trials, "run_search", lambda run, make: seen.append(run) or {
        "trials": {"COMPLETE": 4, "PRUNED": 2, "FAIL": 1, "RUNNING": 0},
        "pruning": {"epochs_skipped": 5.0, "time_saved_s": 120.0}})
    (tmp / "space.toml").write_text("num_epochs = [1, 4]\nbatch_size = [8]\n")
    code, out, err = run(["search", "glue", "--task", "rte", "--model", "runs/tiny", "--trials", "10",
                          "--space", str(tmp / "space.toml"), "--pruner", "hyperband", "--seed", "7",
                          "max_train_examples=500"], capsys)
    assert code == 0, err
    assert seen == [SearchRun(benchmark="glue", task="rte", model="runs/tiny", trials=10,
                              output_dir=Path("runs/search/glue-rte-tiny"),
                              space=SearchSpace(num_epochs=(1, 4), batch_size=(8,)),
                              config=FinetuneConfig(max_train_examples=500), storage="sqlite:///runs/optuna.db",
                              study_name="glue-rte-tiny", pruner="hyperband", seed=7, heartbeat_s=60)]
    assert "4 complete, 2 pruned, 1 failed" in out and "pruning skipped 5 epochs, about 2.0 min" in out


@pytest.mark.slow
def test_search_squad_end_to_end(tiny_model, tmp, capsys):
    from tests.test_squad_run import SMALL, write_squad

    write_squad(tmp / "squad" / "dev-v1.1.json", "1.1")
    (tmp / "space.toml").write_text("num_epochs = [1, 2]\nbatch_size = [8]\n")
    small = [item for item in SMALL if not item.startswith("batch_size")]
    code, out, err = run(["search", "squad", "--version", "1.1", "--model", str(tiny_model), "--data-dir",
                          str(tmp / "squad"), "--trials", "2", "--space", str(tmp / "space.toml"),
                          "--storage", f"sqlite:///{tmp / 'o.db'}", "--output-dir", str(tmp / "out"),
                          "--tracking-uri", f"sqlite:///{tmp / 'm.db'}", *small], capsys)
    assert code == 0, err
    saved = json.loads((tmp / "out" / "best_params.json").read_text())
    assert (saved["benchmark"], saved["task"], saved["study"]) == ("squad", "squad", "squad-squad-tiny")
    assert saved["settings"] == {"max_length": 64, "precision": "fp32", "doc_stride": 16,
                                 "max_query_length": 16}
    assert 0 <= saved["value"] <= 100 and saved["trials"]["COMPLETE"] == 2  # dev F1, in percent
    best = str(tmp / "out" / "best_params.json")
    code, _, err = run(["run", "glue", "--model", "m", "--params-from", best], capsys)
    assert code == 2 and "holds a squad search, not a glue one" in err


@pytest.mark.slow
def test_search_glue_then_rerun_the_best_over_seeds(tiny_model, glue_data, tmp, capsys):
    (tmp / "space.toml").write_text("num_epochs = [1, 2]\nbatch_size = [8]\n")
    code, out, err = run(["search", "glue", "--task", "rte", "--model", str(tiny_model), "--data-dir",
                          str(glue_data), "--trials", "2", "--space", str(tmp / "space.toml"), "--storage",
                          f"sqlite:///{tmp / 'o.db'}", "--output-dir", str(tmp / "out"), "--tracking-uri",
                          f"sqlite:///{tmp / 'm.db'}", "precision=fp32"], capsys)
    assert code == 0, err
    assert "study glue-rte-tiny: 2 complete, 0 pruned, 0 failed, 0 running" in out
    best = json.loads((tmp / "out" / "best_params.json").read_text())
    code, out, err = run(["run", "glue", "--model", str(tiny_model), "--tasks", "rte", "--data-dir",
                          str(glue_data), "--params-from", str(tmp / "out" / "best_params.json"),
                          "--seeds", "2", "--output-dir", str(tmp / "rerun"), "--tracking-uri",
                          f"sqlite:///{tmp / 'm.db'}", "save_models=false"], capsys)
    assert code == 0, err
    results = json.loads((tmp / "rerun" / "results.json").read_text())
    seed = best["params"]["seed"]
    assert [r["seed"] for r in results["runs"]] == [seed, seed + 1]
    used = results["runs"][0]["resolved_config"]
    assert {key: used[key] for key in best["params"]} == best["params"] | {"seed": seed}
    assert used["precision"] == "fp32" and used["save_models"] is False


def test_interrupted_worker_ends_its_trial_and_runs(tmp, capsys, monkeypatch):
    def interrupted():
        target = fake_target()
        target.train = lambda config, on_epoch: (_ for _ in ()).throw(KeyboardInterrupt)
        return target

    monkeypatch.setattr("harness.search.targets.glue_target", lambda *a: interrupted())
    code, _, err = run(["search", "glue", "--task", "rte", "--model", "m", "--storage",
                        f"sqlite:///{tmp / 'o.db'}", "--study-name", tmp.name, "--output-dir",
                        str(tmp / "out"), "--tracking-uri", f"sqlite:///{tmp / 'm.db'}"], capsys)
    assert code == 130 and "harness: interrupted" in err
    assert [t.state.name for t in load(tmp, "o.db").trials] == ["FAIL"]
    assert [run.info.status for run in mlflow_store.runs(tmp / "m.db")] == ["KILLED", "KILLED"]

"""`harness search`: space, sampler, pruning and failures, MLflow records, best parameters, bad input."""

import dataclasses
import json
from pathlib import Path

import optuna
import pytest

from foundation.infra.errors import UserError
from harness.search import study as studies
from harness.search.space import SEARCHED, SearchSpace
from harness.search.targets import dev_score
from harness.search.trials import SearchInvocation, SearchTarget, run_search
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult
from tests import mlflow_store
from tests.conftest import SQUAD_SMALL, write_squad
from tests.conftest import run_cli as run
from tests.search_fakes import fake_target, fast_dir

SPACE = SearchSpace(learning_rate=(1e-4, 1e-2), num_epochs=(2, 4), batch_size=(16, 32, 64))


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
    settings = {"kind": "glue", "task": "rte", "model": "runs/fake", "trials": trials,
                "output_dir": tmp / "out", "space": SPACE, "study_name": tmp.name,
                "storage": f"sqlite:///{tmp / 'optuna.db'}", "tracking_uri": f"sqlite:///{mlflow_db}"}
    return run_search(SearchInvocation(**settings | kwargs), make_target)


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


def test_a_range_is_checked_by_the_config_it_searches():
    # SearchSpace restates no bounds: the end of a range FinetuneConfig refuses is refused in its words
    cases = {"learning_rate": ((0.0, 1e-3), 0.0), "layerwise_lr_decay": ((0.5, 1.5), 1.5),
             "num_epochs": ((0, 3), 0), "warmup_fraction": ((0.1, 2.0), 2.0), "weight_decay": ((-0.1, 0.1), -0.1)}
    for name, (bad, end) in cases.items():
        refusal = str(pytest.raises(ValueError, FinetuneConfig, **{name: end}).value)
        assert str(pytest.raises(ValueError, SearchSpace, **{name: bad}).value) == (
            f"{name} range {list(bad)}: {refusal}")
    assert str(pytest.raises(ValueError, SearchSpace, batch_size=(16, 0)).value).startswith(
        "batch_size choices [16, 0]: batch_size must be positive (got 0)")
    assert SEARCHED == ("learning_rate", "layerwise_lr_decay", "num_epochs", "batch_size", "warmup_fraction",
                        "weight_decay")  # the space's fields FinetuneConfig has: not trial_seeds


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


@pytest.mark.slow
def test_search_prunes_fails_and_records_every_trial(tmp, mlflow_db):
    record = search(tmp, mlflow_db, trials=10)
    study = load(tmp)
    counts = studies.count_states(study)
    # Which trials TPE draws and the pruner cuts is theirs to change between versions: held here is what
    # any outcome must show. Failures do not count towards --trials; the pruner cut some trials.
    assert counts["COMPLETE"] + counts["PRUNED"] == 10 and counts["RUNNING"] == 0
    assert counts["PRUNED"] >= 1 and counts["FAIL"] >= 1
    failed = [t for t in study.trials if t.state.name == "FAIL"]
    for trial in failed:  # each failure recorded as the one its parameters raise in fake_target
        assert trial.user_attrs["error"] == (
            "FloatingPointError: training loss became nan at step 3; lower learning_rate"
            if trial.params["learning_rate"] > 8e-3 else "RuntimeError: CUDA out of memory")
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
    pruned = study.get_trials(states=(optuna.trial.TrialState.PRUNED,))
    assert saved["trials"]["PRUNED"] == counts["PRUNED"] and saved["pruning"]["epochs_skipped"] == sum(
        t.user_attrs["epochs_planned"] - t.user_attrs["epochs_run"] for t in pruned)
    assert saved["settings"] == {} and saved["storage"].endswith("optuna.db")


@pytest.mark.slow
def test_hyperband_pruner(tmp, mlflow_db, monkeypatch):
    made, make = [], studies.make_pruner
    monkeypatch.setattr(studies, "make_pruner", lambda *args: made.append(make(*args)) or made[-1])
    # Hyperband puts trials in brackets by a hash of the study name: a fixed one runs the same brackets.
    record = search(tmp, mlflow_db, trials=10, pruner="hyperband", study_name="hyperband")
    assert [type(pruner) for pruner in made] == [optuna.pruners.HyperbandPruner]
    assert record["trials"]["COMPLETE"] + record["trials"]["PRUNED"] == 10 and record["trials"]["PRUNED"] >= 1
    study = optuna.load_study(study_name="hyperband", storage=f"sqlite:///{tmp / 'optuna.db'}")
    pruned = study.get_trials(states=(optuna.trial.TrialState.PRUNED,))
    # successive halving from 1 to 4 epochs keeping a third: a trial stops only at a rung, epoch 1 or 3
    # (the median pruner stops at any epoch)
    assert pruned and {t.user_attrs["epochs_run"] for t in pruned} <= {1, 3}
    assert record["pruning"]["epochs_skipped"] == sum(
        t.user_attrs["epochs_planned"] - t.user_attrs["epochs_run"] for t in pruned)


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
    assert calls[0].learning_rate == trial.params["learning_rate"] and {c.seed for c in calls} == {0}
    saved = json.loads((tmp / "out" / "best_params.json").read_text())
    assert saved["settings"] == {"precision": "fp32", "max_train_examples": 500}


def test_params_from_file_and_study_with_overrides_winning(tmp, mlflow_db, capsys, monkeypatch):
    search(tmp, mlflow_db, trials=3)
    saved = json.loads((tmp / "out" / "best_params.json").read_text())
    import harness.finetuning.glue_finetuning

    seen = []
    monkeypatch.setattr(harness.finetuning.glue_finetuning, "run_glue", lambda invocation, progress: seen.append(invocation) or {})
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
    # fresh seeds: past the search's trial seed 0
    assert (config.learning_rate, config.batch_size, config.seed, config.num_epochs) == (
        best["learning_rate"], best["batch_size"], 1, 1)
    assert first.search == {"study": tmp.name, "storage": saved["storage"], "task": "rte",
                            "trial": saved["trial"], "trials": 3, "score": saved["value"],
                            "trial_seeds": [0], "search_seeds": [0]}


BAD_SEARCH = {
    "unknown space parameter": ("space", "lerning_rate = [1e-4, 1e-3]\n",
                                "search space '{space}': unknown setting 'lerning_rate' (did you mean "
                                "'learning_rate'? known: batch_size"),
    "bad space range": ("space", "learning_rate = [1e-3, 1e-4]\n",
                        "learning_rate must be [low, high] with low"),
    "searched fixed setting": ("args", ["batch_size=8"], "batch_size cannot be a fixed setting: the search "
                               "sets it; fix it in the --space file instead (batch_size = [8])"),
    "fixed seed": ("args", ["seed=3"], "seed cannot be a fixed setting of harness search: each trial trains "
                   "on the same trial_seeds and is scored by their mean; pass --trial-seeds 3"),
    "space names the seed": ("space", "seed = [0, 9]\n", "search space '{space}': seed is not searched: a "
                             "trial trains on the fixed trial_seeds and is scored by their mean, so the search "
                             "cannot pick a lucky seed; remove seed and set trial_seeds = [0, 1, 2]"),
    "repeated trial seeds": ("args", ["--trial-seeds", "1,1"],
                             "trial_seeds must list distinct seeds of 0 or more (got [1, 1])"),
    "unreachable storage": ("args", ["--storage", "postgresql://harness:secret@127.0.0.1:1/optuna"],
                            "cannot open Optuna storage 'postgresql://harness:***@127.0.0.1:1/optuna' ("),
    "zero trials": ("args", ["--trials", "0"], "--trials must be at least 1 (got 0)"),
}


@pytest.mark.parametrize("case", list(BAD_SEARCH))
def test_bad_search_input(case, tmp, capsys, monkeypatch):
    kind, value, message = BAD_SEARCH[case]
    monkeypatch.setattr("harness.search.targets.search_target", lambda *a: fake_target())
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
    monkeypatch.setattr("harness.search.targets.search_target", lambda *a: fake_target())
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
    monkeypatch.setattr(harness.search.trials, "run_search", lambda invocation, make: seen.append(invocation) or {
        "trials": {"COMPLETE": 4, "PRUNED": 2, "FAIL": 1, "RUNNING": 0},
        "pruning": {"epochs_skipped": 5.0, "time_saved_s": 120.0}})
    (tmp / "space.toml").write_text("num_epochs = [1, 4]\nbatch_size = [8]\n")
    code, out, err = run(["search", "glue", "--task", "rte", "--model", "runs/tiny", "--trials", "10",
                          "--space", str(tmp / "space.toml"), "--pruner", "hyperband", "--seed", "7",
                          "--trial-seeds", "3,5", "max_train_examples=500"], capsys)
    assert code == 0, err
    assert seen == [SearchInvocation(
        kind="glue", task="rte", model="runs/tiny", trials=10, output_dir=Path("runs/search/glue-rte-tiny"),
        space=SearchSpace(num_epochs=(1, 4), batch_size=(8,), trial_seeds=(3, 5)),
        config=FinetuneConfig(max_train_examples=500), storage="sqlite:///runs/optuna.db",
        study_name="glue-rte-tiny", pruner="hyperband", seed=7, heartbeat_s=60)]
    assert "4 complete, 2 pruned, 1 failed" in out and "pruning skipped 5 epochs, about 2.0 min" in out


@pytest.mark.slow
def test_search_squad_end_to_end(tiny_model, tmp, capsys):
    write_squad(tmp / "squad" / "dev-v1.1.json", "1.1")
    (tmp / "space.toml").write_text("num_epochs = [1, 2]\nbatch_size = [8]\n")
    small = [item for item in SQUAD_SMALL if not item.startswith("batch_size")]
    code, out, err = run(["search", "squad", "--version", "1.1", "--model", str(tiny_model), "--data-dir",
                          str(tmp / "squad"), "--trials", "2", "--space", str(tmp / "space.toml"),
                          "--storage", f"sqlite:///{tmp / 'o.db'}", "--output-dir", str(tmp / "out"),
                          "--tracking-uri", f"sqlite:///{tmp / 'm.db'}", *small], capsys)
    assert code == 0, err
    saved = json.loads((tmp / "out" / "best_params.json").read_text())
    assert (saved["benchmark"], saved["task"], saved["study"]) == ("squad", "squad", "squad-squad-tiny")
    assert saved["settings"] == {"max_length": 64, "precision": "fp32", "doc_stride": 16,
                                 "max_query_length": 16}
    assert saved["trials"]["COMPLETE"] == 2
    # the value is the best trial's dev F1 (percent), as its MLflow run logged it after its last epoch
    study = optuna.load_study(study_name="squad-squad-tiny", storage=f"sqlite:///{tmp / 'o.db'}")
    assert (saved["trial"], saved["value"]) == (study.best_trial.number, study.best_value)
    (trial_run,) = mlflow_store.runs(tmp / "m.db", f"tags.optuna_study = 'squad-squad-tiny' and "
                                                   f"tags.optuna_trial = '{saved['trial']}'")
    assert saved["value"] == pytest.approx(trial_run.data.metrics["validation_f1"])
    best = str(tmp / "out" / "best_params.json")
    code, _, err = run(["run", "glue", "--model", "m", "--params-from", best], capsys)
    assert code == 2 and "holds a squad search, not a glue one" in err
    code, out, err = run(["run", "squad", "--version", "1.1", "--model", str(tiny_model), "--data-dir",
                          str(tmp / "squad"), "--params-from", best, "--output-dir", str(tmp / "rerun"),
                          "--tracking-uri", f"sqlite:///{tmp / 'm.db'}", "save_models=false"], capsys)
    assert code == 0, err
    results = json.loads((tmp / "rerun" / "results.json").read_text())
    assert [r["seed"] for r in results["runs"]] == [1] and results["search"]["trials"] == 2
    assert results["settings"]["doc_stride"] == 16 and results["runs"][0]["resolved_config"]["max_length"] == 64
    assert f"fresh seeds 1: mean {results['summary']['squad']['score']['mean']:.4f}" in out


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
    assert "seed" not in best["params"] and best["trial_seeds"] == [0]
    assert [r["seed"] for r in results["runs"]] == [1, 2]  # seeds the search never trained on
    used = results["runs"][0]["resolved_config"]
    assert {key: used[key] for key in best["params"]} == best["params"]
    assert used["precision"] == "fp32" and used["save_models"] is False
    assert results["search"] == {"study": "glue-rte-tiny", "storage": best["storage"], "task": "rte",
                                 "trial": best["trial"], "trials": 2, "score": best["value"],
                                 "trial_seeds": [0], "search_seeds": [0]}
    # the fresh seeds' mean and the interval harness compare builds, beside the search's score
    score = results["summary"]["rte"]["score"]
    assert f"search score {best['value']:.4f}: glue-rte-tiny trial {best['trial']}, the best of 2 trials" in out
    assert (f"fresh seeds 1, 2: mean {score['mean']:.4f}, 95% interval [{score['ci_low']:.4f}, "
            f"{score['ci_high']:.4f}] (seeds and dev examples)") in out


def test_interrupted_worker_ends_its_trial_and_runs(tmp, capsys, monkeypatch):
    def interrupted():
        target = fake_target()
        target.train = lambda config, on_epoch: (_ for _ in ()).throw(KeyboardInterrupt)
        return target

    monkeypatch.setattr("harness.search.targets.search_target", lambda *a: interrupted())
    code, _, err = run(["search", "glue", "--task", "rte", "--model", "m", "--storage",
                        f"sqlite:///{tmp / 'o.db'}", "--study-name", tmp.name, "--output-dir",
                        str(tmp / "out"), "--tracking-uri", f"sqlite:///{tmp / 'm.db'}"], capsys)
    assert code == 130 and "harness: interrupted" in err
    assert [t.state.name for t in load(tmp, "o.db").trials] == ["FAIL"]
    assert [run.info.status for run in mlflow_store.runs(tmp / "m.db")] == ["KILLED", "KILLED"]


def test_best_parameters_hold_no_seed(tmp, mlflow_db):
    record = search(tmp, mlflow_db, trials=4)
    assert set(record["params"]) == set(SEARCHED) and "seed" not in record["params"]
    assert all("seed" not in trial.params for trial in load(tmp).trials)
    assert record["trial_seeds"] == record["search_seeds"] == [0]


def seeded_target(calls):
    """Dev score after epoch e of N: 0.5 e / N + 0.01 seed + weight_decay, a known function of both."""
    def train(config, on_epoch):
        calls.append(config)
        history = []
        for epoch in range(1, config.num_epochs + 1):
            score = 0.5 * epoch / config.num_epochs + 0.01 * config.seed + config.weight_decay
            history.append({"epoch": epoch, "validation_score": score})
            on_epoch(epoch, history[-1])
        return FinetuneResult(history=history, metrics={"validation": {"score": score}}, outputs={},
                              num_train_steps=4, train_time_s=0.1, train_examples_per_s=160.0,
                              train_tokens_per_s=1000.0, train_examples_seen=16)
    return SearchTarget("glue", "rte", "fake", "small", 3, train, dev_score)


def test_a_trials_score_is_the_mean_of_its_seeds(tmp, mlflow_db):
    calls = []
    space = SearchSpace(learning_rate=(1e-4, 1e-2), num_epochs=(2, 3), batch_size=(16,), trial_seeds=(1, 2, 6))
    search(tmp, mlflow_db, 3, lambda: seeded_target(calls), space=space, pruner="none")
    trials = load(tmp).trials
    # every trial trains seeds 1, 2, 6 in order with the same drawn parameters
    assert [c.seed for c in calls] == [1, 2, 6] * 3
    for trial, seeds in zip(trials, (calls[0:3], calls[3:6], calls[6:9]), strict=True):
        assert {(c.learning_rate, c.weight_decay, c.num_epochs) for c in seeds} == {
            (trial.params["learning_rate"], trial.params["weight_decay"], trial.params["num_epochs"])}
        wd, epochs = trial.params["weight_decay"], trial.params["num_epochs"]
        # by hand: the seeds add 0.01 x (1 + 2 + 6) / 3 = 0.03 to the mean
        assert trial.value == pytest.approx(0.5 + 0.03 + wd)
        assert trial.user_attrs["seed_scores"] == pytest.approx({"1": 0.51 + wd, "2": 0.52 + wd, "6": 0.56 + wd})
        # what the pruner saw: the mean over the seeds at each epoch
        assert trial.intermediate_values == pytest.approx(
            {e: 0.5 * e / epochs + 0.03 + wd for e in range(1, epochs + 1)})
        assert (trial.user_attrs["epochs_planned"], trial.user_attrs["epochs_run"]) == (3 * epochs, 3 * epochs)
    best = json.loads((tmp / "out" / "best_params.json").read_text())
    assert best["trial_seeds"] == [1, 2, 6] and best["value"] == max(t.value for t in trials)


def test_pruning_waits_for_the_mean_of_every_seed(tmp, mlflow_db):
    search(tmp, mlflow_db, 10, space=dataclasses.replace(SPACE, trial_seeds=(0, 1)))
    pruned = load(tmp).get_trials(states=(optuna.trial.TrialState.PRUNED,))
    assert pruned
    for trial in pruned:  # the first seed ran in full, the second was stopped on the mean
        epochs = trial.params["num_epochs"]
        assert epochs < trial.user_attrs["epochs_run"] < 2 * epochs == trial.user_attrs["epochs_planned"]
        assert len(trial.intermediate_values) == trial.user_attrs["epochs_run"] - epochs


def old_study(storage: str, name: str = "old") -> None:
    """A study as harness search made it before trial_seeds: `seed` in its space and its trials' params."""
    study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
    for key, value in {"benchmark": "glue", "task": "rte", "model": "m", "settings": {},
                       "space": {"learning_rate": [1e-4, 1e-2], "seed": [0, 9]}}.items():
        study.set_user_attr(key, value)
    distributions = {"learning_rate": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True),
                     "seed": optuna.distributions.IntDistribution(0, 9)}
    for seed, value in ((3, 0.7), (5, 0.6)):
        study.add_trial(optuna.trial.create_trial(params={"learning_rate": 1e-3, "seed": seed},
                                                  distributions=distributions, value=value))


def test_old_studies_are_refused_or_read_with_a_note(tmp, capsys, monkeypatch):
    storage = f"sqlite:///{tmp / 'o.db'}"
    old_study(storage)
    monkeypatch.setattr("harness.search.targets.search_target", lambda *a: fake_target())
    code, _, err = run(["search", "glue", "--task", "rte", "--model", "m", "--storage", storage, "--study-name",
                        "old", "--tracking-uri", f"sqlite:///{tmp / 'm.db'}", "--output-dir", str(tmp / "out")],
                       capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"study 'old' in '{storage}' was made before trials measured fixed seeds" in err
    import harness.finetuning.glue_finetuning

    seen = []
    monkeypatch.setattr(harness.finetuning.glue_finetuning, "run_glue", lambda invocation, progress: seen.append(invocation) or {})
    monkeypatch.setattr("harness.finetuning.table.glue_table", lambda results: "table")
    base = ["run", "glue", "--model", "m", "--tasks", "rte", "--output-dir", str(tmp / "g"),
            "--params-from", f"{storage}#old"]
    code, out, err = run([*base, "--seeds", "4"], capsys)  # seeds 0-3 hold seed 3, which the search used
    assert code == 0, err
    assert ("note: study 'old' was made before trials measured fixed seeds: its trials drew the seed as a "
            "parameter, so its scores are each one seed's, the best likely a lucky one; its best trial's seed 3 "
            "is dropped and its score 0.7000 is that seed's") in out
    (invocation,) = seen
    assert invocation.config.seed == 6 and invocation.config.learning_rate == 1e-3  # past seeds 3 and 5
    assert invocation.search["trial_seeds"] == [3] and invocation.search["search_seeds"] == [3, 5]
    code, _, err = run([*base, "--seeds", "2", "seed=4"], capsys)  # seeds 4, 5: the search trained seed 5
    assert code == 2 and len(err.strip().splitlines()) == 1 and (
        "seed=4 with --seeds 2 trains seed 5, which the search 'old' trained on; its configuration is "
        "re-measured on seeds it never used: leave seed unset or pass seed=6 or more") in err
    (tmp / "best_params.json").write_text(json.dumps({"format": "electra-harness/best-params/1",
                                                      "study": "old", "params": {"seed": 3}}))
    code, _, err = run(["run", "glue", "--model", "m", "--params-from", str(tmp / "best_params.json")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and (
        "comes from a search that was made before trials measured fixed seeds") in err


def test_leaderboard_row_says_the_settings_came_from_a_search(tmp):
    from reports.leaderboard import measured_row

    stats = {"median": 0.6, "mean": 0.6, "std": 0.0, "best": 0.6, "n": 1}
    results = {"format": "electra-harness/glue-results/1", "model": {"name": "m", "path": "/m"},
               "config": {"learning_rate": 2e-4}, "tasks": ["rte"], "summary": {"rte": {"score": stats}},
               "search": {"study": "glue-rte-m", "trials": 30, "score": 0.7}}
    row = measured_row(tmp / "results.json", results)
    assert row.departures == "learning_rate=0.0002, search=glue-rte-m (30 trials)"
    assert row.label == "m [departs: learning_rate=0.0002, search=glue-rte-m (30 trials)]"
    assert measured_row(tmp / "results.json", results | {"search": None}).departures == "learning_rate=0.0002"


def test_a_study_keeps_its_trial_seeds(tmp, mlflow_db):
    search(tmp, mlflow_db, 1)
    with pytest.raises(UserError, match=r"was created with trial_seeds \[0\], not \[0, 1\]; pass another "):
        search(tmp, mlflow_db, 2, space=dataclasses.replace(SPACE, trial_seeds=(0, 1)))


def test_departures_are_searched_only_when_asked_and_recorded_as_such(tmp, mlflow_db):
    """class_weights and select_epoch are drawn only where the space lists choices; the best trial's
    departures from ELECTRA's recipe are named in best_params.json, and a run from it departs."""
    assert "class_weights" not in SPACE.ranges() and SPACE.departures() == ()
    assert str(pytest.raises(ValueError, SearchSpace, select_epoch=("last", "first")).value) == \
        "select_epoch choice 'first': choose from last, best"
    calls = []
    space = dataclasses.replace(SPACE, batch_size=(16,), select_epoch=("last", "best"),
                                class_weights=("none", "balanced"))
    record = search(tmp, mlflow_db, 6, lambda: fake_target(calls), space=space)
    assert {c.select_epoch for c in calls} == {"last", "best"}  # both drawn, into each trial's config
    assert {c.class_weights for c in calls} == {"none", "balanced"}
    assert load(tmp).user_attrs["space"]["select_epoch"] == ["last", "best"]
    best = record["params"]
    expected = {key: best[key] for key, recipe in (("class_weights", "none"), ("select_epoch", "last"))
                if best[key] != recipe}
    assert record.get("departures", {}) == expected
    with pytest.raises(UserError, match=r"^select_epoch is both a fixed setting and searched"):
        search(tmp, mlflow_db, 1, space=space, study_name="both",
               config=FinetuneConfig(select_epoch="best"))

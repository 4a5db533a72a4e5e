"""The seed loop GLUE and SQuAD share (harness/finetuning/orchestration.py), through `harness run glue`
and `harness run squad` alike: a diverged seed is recorded and the next one runs, a rerun keeps finished
seeds and refuses other settings, an interrupt ends the runs KILLED, and wall time adds up over a kill; the
results.json written holds the keys reports/results_schema.py declares, in its order."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from reports import results_schema as schema
from tests import mlflow_store
from tests.conftest import SQUAD_SMALL, glue_args, run_cli, squad_args, write_glue_dir, write_squad


@dataclass(frozen=True)
class Finetuning:
    """One benchmark's command line on one task, and what its outputs call things."""

    experiment: str  # the MLflow experiment of its runs
    task: str  # results.json's and MLflow's name of the task trained
    args: Callable[..., list[str]]  # the command line with these extra arguments
    diverged_note: str  # the printed line for a diverged seed 0, given the reason
    changed: tuple[str, str]  # a setting that differs from the default, and how a refusal names it


@pytest.fixture(params=["glue", "squad"])
def benchmark(request, tiny_model, tmp_path) -> Finetuning:
    if request.param == "glue":
        data = write_glue_dir(tmp_path / "glue_data")
        return Finetuning("glue", "rte", lambda *extra: glue_args(tiny_model, data, tmp_path, "--tasks", "rte", *extra),
                         "diverged: rte seed 0 ({reason}), left out of medians and GLUE",
                         ("num_epochs=2", "num_epochs: 1.0 -> 2.0"))
    data = write_squad(tmp_path / "squad" / "dev-v1.1.json", "1.1").parent
    return Finetuning("squad", "squad",
                     lambda *extra: squad_args(tiny_model, tmp_path, "--data-dir", str(data), *SQUAD_SMALL, *extra),
                     "seed 0: diverged ({reason}), left out", ("null_threshold=1", "null_threshold: -2.75 -> 1.0"))


def in_declared_order(found: dict, declared: type) -> bool:
    """`found`'s keys are ones the TypedDict declares, in its order."""
    keys = list(declared.__annotations__)
    return list(found) == [key for key in keys if key in found]


def assert_follows_schema(results: dict) -> None:
    """Every block of a written results.json is its schema type's, keys in order; `diverged` sits where the
    first diverged record landed (before wall_time_s when it was the first record written)."""
    assert in_declared_order({k: v for k, v in results.items() if k != "diverged"}, schema.ResultsBody)
    assert "diverged" in schema.ResultsBody.__annotations__
    assert list(results["model"]) == list(schema.ModelBlock.__annotations__)
    assert all(in_declared_order(record, schema.SeedRecord) for record in results["runs"])
    assert all(list(record) == list(schema.DivergedRecord.__annotations__) for record in results["diverged"])
    assert list(results["flops"]) == list(schema.Flops.__annotations__)
    for summary in results["summary"].values():
        assert [k for k, v in summary.items() if not isinstance(v, dict)] == [
            "train_examples_per_s", "train_time_s", "diverged_seeds"]
        assert all(in_declared_order(v, schema.MetricSummary) for v in summary.values() if isinstance(v, dict))
    for key, declared in (("data", schema.SquadData), ("glue", schema.GlueSection)):
        assert key not in results or in_declared_order(results[key], declared)
    assert "submission" not in results or list(results["submission"]) == list(schema.Submission.__annotations__)


def statuses(benchmark: Finetuning, tmp_path) -> dict[str, str]:
    """{run name: status} of the benchmark's MLflow runs (not the leaderboard's rows)."""
    return mlflow_store.statuses(tmp_path / "mlflow.db", experiment=benchmark.experiment)


def test_a_diverged_seed_is_recorded_and_the_next_seed_runs(benchmark, tmp_path, capsys, monkeypatch):
    import harness.finetuning.orchestration

    real, reason = harness.finetuning.orchestration.finetune, "training loss became nan by step 2; lower learning_rate"

    def diverges_on_seed0(model, built, config, *a, **k):
        if config.seed == 0:
            raise FloatingPointError(reason)
        return real(model, built, config, *a, **k)

    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", diverges_on_seed0)
    args = benchmark.args("--seeds", "2", "num_epochs=1", "save_models=false")
    code, out, err = run_cli(args, capsys)
    message = (f"harness: error: 1 fine-tuning diverged ({benchmark.task} seed 0: {reason}); they are recorded "
               "as diverged in results.json and left out of the summaries; re-run with a lower learning_rate "
               "into a new --output-dir")
    assert code == 2 and err.splitlines()[-1] == message and "Traceback" not in err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(r["task"], r["seed"]) for r in results["runs"]] == [(benchmark.task, 1)]
    assert [(r["task"], r["seed"]) for r in results["diverged"]] == [(benchmark.task, 0)]
    summary = results["summary"][benchmark.task]
    assert summary["score"]["n"] == 1 and summary["diverged_seeds"] == 1
    assert_follows_schema(results)
    assert benchmark.diverged_note.format(reason=reason) in out
    found = statuses(benchmark, tmp_path)
    assert found[f"{benchmark.task} seed 0"] == "FAILED" and found[f"{benchmark.task} seed 1"] == "FINISHED"
    # Resuming does not retry it (the same seed diverges again) nor hides it: same line, same exit.
    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", lambda *a, **k: pytest.fail("trained again"))
    code, _, err = run_cli(args, capsys)
    assert code == 2 and err.splitlines()[-1] == message


def test_a_run_whose_every_seed_diverged_adds_nothing_to_the_leaderboard(tiny_model, tmp_path, capsys,
                                                                        monkeypatch):
    import harness.finetuning.orchestration
    from harness.tracking.mlflow_runs import LEADERBOARD_EXPERIMENT

    def diverges(*a, **k):
        raise FloatingPointError("training loss became nan by step 1; lower learning_rate")

    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", diverges)
    data = write_glue_dir(tmp_path / "glue_data")
    code, out, err = run_cli(glue_args(tiny_model, data, tmp_path, "--tasks", "rte", "num_epochs=1",
                                       "learning_rate=1e9", "save_models=false"), capsys)
    assert code == 2 and "re-run with a lower learning_rate" in err.splitlines()[-1]
    assert "leaderboard: not added, every seed diverged" in out
    assert mlflow_store.runs(tmp_path / "mlflow.db", experiment=LEADERBOARD_EXPERIMENT) == []


def test_a_rerun_keeps_finished_seeds_and_refuses_other_settings(benchmark, tmp_path, capsys, monkeypatch):
    import harness.finetuning.orchestration

    args = benchmark.args("num_epochs=1", "save_models=false")
    assert run_cli(args, capsys)[0] == 0

    def must_not_train(*a, **k):
        raise AssertionError("a finished (task, seed) was trained again")

    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", must_not_train)
    code, out, _ = run_cli(args, capsys)
    assert code == 0 and f"resume {benchmark.task}: kept seed 0 from results.json; nothing left to train" in out
    setting, difference = benchmark.changed
    key = setting.split("=")[0]
    code, _, err = run_cli([a for a in args if not a.startswith(f"{key}=")] + [setting], capsys)
    assert code == 2 and err.splitlines()[-1] == (
        f"harness: error: {str(tmp_path / 'out')!r} holds results made with other settings ({difference}); "
        "resume it with the same settings, or pass a new --output-dir")


def test_an_interrupt_marks_the_runs_killed(benchmark, tmp_path, capsys, monkeypatch):
    import harness.finetuning.orchestration

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(harness.finetuning.orchestration, "finetune", interrupted)
    code, _, _ = run_cli(benchmark.args(), capsys)
    assert code == 130
    assert set(statuses(benchmark, tmp_path).values()) == {"KILLED"}
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.slow
def test_wall_time_adds_up_over_an_interrupted_run_and_its_resume(benchmark, tmp_path, capsys, monkeypatch):
    """Kill the first invocation (exit 130) as seed 1 starts, then resume it: results.json's wall_time_s
    must hold the first invocation's time plus seed 1's training, and no more than both took."""
    import harness.finetuning.orchestration as orchestration

    args = benchmark.args("--seeds", "2", "num_epochs=1", "save_models=false")
    results, real, trained, kills = tmp_path / "out" / "results.json", orchestration.finetune, {}, [1]

    def timed(model, built, config, *a, **k):
        if config.seed in kills:
            kills.remove(config.seed)
            raise KeyboardInterrupt
        started = time.perf_counter()
        result = real(model, built, config, *a, **k)
        trained[config.seed] = time.perf_counter() - started
        return result

    monkeypatch.setattr(orchestration, "finetune", timed)
    assert run_cli(args, capsys)[0] == 130
    first = json.loads(results.read_text())
    assert [r["seed"] for r in first["runs"]] == [0] and first["wall_time_s"] >= trained[0]
    started = time.perf_counter()
    assert run_cli(args, capsys)[0] == 0
    second_s = time.perf_counter() - started
    final = json.loads(results.read_text())["wall_time_s"]
    assert first["wall_time_s"] + trained[1] <= final <= first["wall_time_s"] + second_s


def test_a_run_stopped_right_after_a_seed_is_recorded_has_it_summarised(tiny_model, tmp_path, capsys, monkeypatch):
    """The seed's record and the summary are one write: a stop just after it (here, as its saved state is
    discarded) leaves a finished seed that the summary holds; a grid's rerun trains nothing to mend one."""
    from tasks import finetune_state

    def stopped(path):
        raise KeyboardInterrupt  # a signal arriving between the seed's record and anything after it

    monkeypatch.setattr(finetune_state, "discard", stopped)
    data = write_glue_dir(tmp_path / "glue_data")
    code, _, _ = run_cli(glue_args(tiny_model, data, tmp_path, "--tasks", "rte", "--tracking-uri", "none",
                                   "num_epochs=1", "save_models=false", "predict_test=false"), capsys)
    assert code == 130
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(r["task"], r["seed"]) for r in results["runs"]] == [("rte", 0)]
    assert results["summary"]["rte"]["score"]["n"] == 1 and results["glue_score"] is not None
    assert results["flops"]["inference_flops"] > 0

"""The grid (harness/grid): its plan as pure functions, bad input refused in one line with nothing
written, and the local pool's real child processes, bit-equal to single runs."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

from foundation.infra.errors import UserError
from harness.grid import plan
from harness.grid.display import GridProgress
from harness.grid.units import Unit, read_spec, write_spec
from tasks.config import FinetuneConfig
from tasks.glue_task import GlueDescription
from tests import grid_fixtures, mlflow_store
from tests.conftest import run_cli
from tests.fixtures_processes import mlflow_store_copy
from tests.grid_fixtures import GRID_SEEDS, grid_args, records

# the shared set-up's session fixtures, here by name (tests/grid_fixtures.py)
grid_models, grid_glue, single_runs = grid_fixtures.grid_models, grid_fixtures.grid_glue, grid_fixtures.single_runs


def test_models_expand_from_globs_and_files_in_order(tmp_path):
    for name in ("step-200", "step-1000", "step-900", "other"):
        (tmp_path / "run" / name).mkdir(parents=True)
    listed = tmp_path / "models.txt"
    listed.write_text("# the baselines\ngoogle/electra-small-discriminator  # from the Hub cache\n\n")
    found = plan.expand_models([str(tmp_path / "run" / "step-*"), f"@{listed}"])
    # steps by number, as the pre-training ran them (a string sort puts step-1000 first)
    assert found == [str(tmp_path / "run" / f"step-{step}") for step in (200, 900, 1000)] + [
        "google/electra-small-discriminator"]


@pytest.mark.parametrize("values, message", [
    (["{run}/step-1", "{run}/../run/step-1"], "is listed twice (as '{run}/step-1')"),
    (["hub/model", "hub/model"], "'hub/model' is listed twice; list each model once"),
    (["{run}/none-*"], "matches nothing"),
    (["@{run}/missing.txt"], "cannot read the list of models"),
    # a RecursionError and a 21-line UnicodeDecodeError before
    (["@{run}/self.txt"], "--model @{run}/self.txt includes itself (@{run}/self.txt -> @{run}/self.txt); list "
                          "models in it, not the file"),
    (["@{run}/latin1.txt"], "--model @{run}/latin1.txt is not UTF-8 text (byte 3); pass a text file with one "
                            "model a line"),
])
def test_bad_model_lists_are_one_line(tmp_path, values, message):
    run = tmp_path / "run"
    (run / "step-1").mkdir(parents=True)
    (run / "self.txt").write_text(f"{run}/step-1\n@{run}/self.txt\n")
    (run / "latin1.txt").write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(UserError, match=None) as raised:
        plan.expand_models([value.format(run=run) for value in values])
    assert message.format(run=run) in str(raised.value)


def test_run_folders_are_named_apart_deterministically():
    models = ["runs/a/checkpoints/step-1000", "runs/b/checkpoints/step-1000", "x/step-2", "org/grid"]
    assert plan.run_names(models) == ["a-checkpoints-step-1000", "b-checkpoints-step-1000", "step-2",
                                      "org-grid"]  # `grid` is the grid's own folder


def _units(tasks: str = "rte,mnli,ax", seeds: int = 2) -> list[Unit]:
    return plan.plan_units("glue", ["m1", "m2"], [Path("out/m1"), Path("out/m2")], GlueDescription(tasks=tasks),
                           (FinetuneConfig(seed=3),), seeds)


def test_units_are_model_by_task_by_seed_and_ax_rides_with_mnli():
    units = _units()
    assert [u.name for u in units[:4]] == ["m1/mnli/seed3", "m1/mnli/seed4", "m1/rte/seed3", "m1/rte/seed4"]
    assert len(units) == 8 and units[4].model == "m2"
    assert units[0].description["tasks"] == "mnli,ax" and units[2].description["tasks"] == "rte"


def test_shards_are_disjoint_slices_that_cover_the_grid():
    units = _units()
    slices = [plan.shard(units, (k, 3)) for k in (1, 2, 3)]
    assert [u.name for u in slices[1]] == [units[1].name, units[4].name, units[7].name]
    assert sorted(u.name for s in slices for u in s) == sorted(u.name for u in units)
    for bad in ("3/2", "0/2", "2", "a/b"):
        with pytest.raises(UserError, match="is no slice; give K/N with 1 <= K <= N"):
            plan.parse_shard(bad)


def test_a_unit_spec_comes_back_as_the_same_job(tmp_path):
    from harness.grid.unit import job_of

    unit = _units()[1]
    read = read_spec(write_spec(unit, tmp_path))
    assert read == unit and read.file_stem == "m1.mnli.seed4"
    job = job_of(read)
    assert job.config == FinetuneConfig(seed=4) and job.seeds == 1 and job.description.tasks == "mnli,ax"
    assert (job.tracking_uri, job.leaderboard, job.output_dir) == ("none", False, Path("out/m1"))


def test_results_json_counts_the_seeds_its_units_merged(tmp_path):
    from harness.finetuning.results_file import ResultsFile
    from reports import results_schema

    def unit_body(task: str, seed: int, diverged: bool = False) -> dict:  # what a unit writes: seeds=1
        found = results_schema.body("glue", {"path": "m"}, {}, [task], 1, "cpu", {})
        return found | {"diverged" if diverged else "runs": [{"task": task, "seed": seed}]}

    written = ResultsFile(tmp_path, 0.0)
    counts = []
    for task, seed, diverged in [("rte", 0, False), ("stsb", 1, False), ("rte", 1, True), ("rte", 2, False)]:
        written.save(unit_body(task, seed, diverged))
        counts.append(json.loads((tmp_path / "results.json").read_text())["seeds"])
    # the most seeds one task holds (a diverged seed is held too); a run's own --seeds when larger
    assert counts == [1, 1, 2, 3]
    written.save(results_schema.body("glue", {"path": "m"}, {}, ["rte"], 5, "cpu", {}))
    assert json.loads((tmp_path / "results.json").read_text())["seeds"] == 5


def test_progress_counts_and_eta_in_lines(capsys):
    shown = GridProgress(4, progress=None)  # pytest's capture is no terminal: lines
    shown.show(["done", "running", "failed", "queued"])
    shown.show(["done", "running", "failed", "queued"])  # unchanged: no second line within 30 s
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("grid: 1/4 done, 1 running, 1 failed, 1 queued, ETA ")


@pytest.mark.parametrize("extra, message", [
    (["--shard", "3/2"], "--shard '3/2' is no slice"),
    (["--devices", "0"], "--devices '0' names no GPU here (0); no GPU is visible here"),
    (["--workers", "0"], "--workers must be at least 1 (got 0)"),
    (["--gpus-per-unit", "2"], "--gpus-per-unit 2 asks for 2 GPUs a unit and no GPU is visible here"),
    (["--gpus-per-unit", "-1"], "--gpus-per-unit must not be negative (got -1)"),
    (["--model", "{model}"], "is listed twice"),
    (["--model", "{model}-*"], "matches nothing"),
    # the data, read once by the grid's driver as each unit would read it (this GLUE folder has no SST-2/)
    (["--workers", "1", "--tasks", "rte,sst2"], "no SST-2/ folder in "),
    (["--workers", "1", "--data-dir", "{model}-missing"], "-missing' (--data-dir) does not exist"),
])
def test_bad_grid_input_is_one_line_and_writes_nothing(tiny_model, glue_data, tmp_path, capsys, extra, message):
    args = grid_args([tiny_model], glue_data, tmp_path / "out", *[w.format(model=tiny_model) for w in extra])
    code, out, err = run_cli(args, capsys)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_gpus_per_unit_is_one_grid_setting_that_every_unit_carries(tiny_model, glue_data, tmp_path, capsys,
                                                                    monkeypatch):
    from harness.grid.local import LocalPool
    from harness.grid.slurm import SlurmExecutor

    planned = {}

    def check(executor, units):  # the driver's first call on its executor: stop the grid there
        planned[executor.name] = units
        raise UserError("stopped by the test")

    for cls in (LocalPool, SlurmExecutor):
        monkeypatch.setattr(cls, "check", check)
    for executor in ("local", "slurm"):
        code, _, err = run_cli(grid_args([tiny_model], glue_data, tmp_path / "out", "--executor", executor,
                                         "--gpus-per-unit", "1"), capsys)
        assert (code, err) == (2, "harness: error: stopped by the test\n")
    assert {name: [u.gpus for u in units] for name, units in planned.items()} == {"local": [1] * 4,
                                                                                  "slurm": [1] * 4}
    assert read_spec(write_spec(planned["local"][0], tmp_path)).gpus == 1


@pytest.fixture(scope="session")
def pool_grid(grid_models, grid_glue, tmp_path_factory):
    """The grid of both models (one glob) through the local pool, one thread per unit; its folder, MLflow
    store, exit code and output."""
    import subprocess
    import sys

    from tests import processes

    root = tmp_path_factory.mktemp("grid_pool")
    uri = mlflow_store_copy(tmp_path_factory, root / "mlflow.db")
    workers = max(2, os.cpu_count() or 1)  # cpu_count() // workers: one thread, as the single runs
    args = grid_args([grid_models[0].parent / "*"], grid_glue, root / "out", "--workers", str(workers),
                     "--tracking-uri", uri)
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=root, env=processes.child_env(),
                          capture_output=True, text=True, timeout=600)
    return root, uri, done


@pytest.mark.slow
def test_the_pool_equals_single_runs_bit_for_bit_and_a_rerun_trains_nothing(pool_grid, single_runs, capsys):
    # The one check of the pool's real processes: 8 units, each a child process (~40 s on 2 cores).
    root, uri, done = pool_grid
    assert done.returncode == 0, done.stdout + done.stderr
    assert "grid: 8 units (2 models x 2 tasks x 2 seeds) through the local executor" in done.stdout
    assert "grid: 8/8 done, 0 running, 0 failed, 0 queued" in done.stdout
    for name, single in single_runs.items():
        body = json.loads((root / "out" / name / "results.json").read_text())
        assert records(body) == records(single) and len(records(body)) == 2 * GRID_SEEDS
        assert body["seeds"] == single["seeds"] == GRID_SEEDS  # each unit asked for one
        assert (root / "out" / "grid" / "logs" / f"{name}.rte.seed1.log").is_file()
    assert (root / "out" / "grid" / "leaderboard" / "leaderboard.md").is_file()
    # MLflow: a parent per model, a child per (task, seed), logged by the driver from results.json
    children = mlflow_store.runs(uri, "tags.mlflow.parentRunId != ''", experiment="glue")
    parents = mlflow_store.runs(uri, "tags.grid = 'true'", experiment="glue")
    assert len(parents) == 2 and len(children) == 8
    history = children[0].data.metrics
    assert "train_loss" in history and "final_score" in history
    # the same command again: nothing trained, nothing logged twice
    code, out, _ = run_cli(done.args[3:], capsys)
    assert code == 0 and "grid: 8 of 8 units finished already; nothing to train" in out
    assert len(mlflow_store.runs(uri, "tags.mlflow.parentRunId != ''", experiment="glue")) == 8


@pytest.mark.slow
def test_a_failing_unit_stops_no_other_and_is_listed_with_its_retry(tiny_model, glue_data, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    (broken / "model.safetensors").write_bytes(b"not weights")  # found by the driver, damaged in the unit
    args = ["run", "glue", "--model", str(tiny_model), "--model", str(broken), "--data-dir", str(glue_data),
            "--tasks", "rte", "--workers", "2", "--output-dir", str(tmp_path / "out"), "--tracking-uri", "none",
            "num_epochs=1", "save_models=false", "predict_test=false"]
    code, out, _ = run_cli(args, capsys)
    assert code == 1, out
    log = tmp_path / "out" / "grid" / "logs" / "broken.rte.seed0.log"
    assert f"failed: broken/rte/seed0 (log: {log})" in out
    assert "model.safetensors' is damaged" in log.read_text()
    assert f"grid: 1 of 2 units failed; retry what is missing with: harness {shlex.join(args)}" in out
    assert [r["task"] for r in json.loads((tmp_path / "out" / "tiny" / "results.json").read_text())["runs"]] \
        == ["rte"]


# Slow tier, ~6 s on idle cores (30 s under other load): the one check of a several-GPU unit's command
# (torchrun, two CPU processes over gloo).
@pytest.mark.slow
def test_a_unit_of_two_gpus_runs_under_torchrun_and_rank_0_alone_writes(grid_models, grid_glue, tmp_path):
    import subprocess

    from harness.grid.slurm import unit_command
    from tests import processes

    unit = Unit(kind="glue", model=str(grid_models[0]), task="rte", seed=0, output_dir=tmp_path / "out",
                description={"tasks": "rte", "data_dir": str(grid_glue)},
                settings=({"num_epochs": 1, "batch_size": 4, "save_models": False, "predict_test": False},),
                gpus=2)
    command = unit_command(unit, tmp_path / "specs")  # what a Slurm array task (and the pool) runs
    assert command[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    done = subprocess.run(command, cwd=tmp_path, env=processes.child_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = json.loads((tmp_path / "out" / "results.json").read_text())["runs"]
    # one record, written once; 16 examples in global batches of 4 (2 a process): 4 steps, as one process
    assert [(r["task"], r["seed"], r["num_train_steps"]) for r in runs] == [("rte", 0, 4)]
    assert done.stdout.count(f"unit {unit.name}: glue on") == 1, done.stdout  # rank 0 alone says so


def test_a_unit_with_bad_input_exits_2_in_one_line(tmp_path, glue_data, capsys):
    from harness.grid import unit as unit_module

    unit = Unit(kind="glue", model=str(tmp_path / "missing"), task="rte", seed=0, output_dir=tmp_path / "out",
                description={"tasks": "rte", "data_dir": str(glue_data)}, settings=({},))
    code = unit_module.main([str(write_spec(unit, tmp_path))])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("harness: error: model directory") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()

"""You choose the grid (harness/grid/start.py): a grid is what the command line asks for (several models or
a grid flag), never a side effect of the machine's GPUs; --executor inline runs the units in this process;
--params-from works with a grid; under torchrun a grid is one line; models the grid cannot load are one
line before anything is written."""

from __future__ import annotations

import json

import pytest

from foundation.infra.errors import UserError
from harness import kinds
from tests import grid_fixtures
from tests.conftest import run_cli
from tests.grid_fixtures import grid_args, records

grid_models, grid_glue, single_runs = grid_fixtures.grid_models, grid_fixtures.grid_glue, grid_fixtures.single_runs


class _Runner:
    """The GLUE runner, stopped at the first thing each path does: a single run runs, a grid checks data."""

    def run(self, job):
        raise UserError(f"single run of {job.seeds} seeds")

    def check_data(self, job):
        raise UserError("grid")


def test_several_gpus_never_turn_a_run_into_a_grid(tiny_model, glue_data, tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    real = kinds.load
    monkeypatch.setattr(kinds, "load", lambda name: _Runner() if name == kinds.KINDS["glue"].runner else real(name))
    args = ["run", "glue", "--model", tiny_model, "--data-dir", glue_data, "--tasks", "rte,stsb", "--seeds", "2",
            "--output-dir", tmp_path / "out", "--tracking-uri", "none"]
    assert run_cli(args, capsys)[2] == "harness: error: single run of 2 seeds\n"  # the grid before
    assert run_cli([*args, "--workers", "1"], capsys)[2] == "harness: error: grid\n"  # asked for: a grid


@pytest.mark.parametrize("extra", [["--model", "{model}"], ["--workers", "1"], ["--executor", "inline"]])
def test_a_grid_under_torchrun_is_one_line_and_writes_nothing(tiny_model, glue_data, tmp_path, monkeypatch,
                                                             capsys, extra):
    # every rank ran a grid driver of its own (the models were counted before WORLD_SIZE was looked at)
    monkeypatch.setenv("WORLD_SIZE", "2")
    second = tmp_path / "second"
    second.mkdir()
    args = grid_args([tiny_model], glue_data, tmp_path / "out", *[w.format(model=second) for w in extra])
    code, _, err = run_cli(args, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "starts its units itself and cannot run under torchrun; run it without torchrun" in err
    assert not (tmp_path / "out").exists()


def test_two_missing_models_are_one_line_before_anything_is_written(glue_data, tmp_path, capsys):
    # each failed in its own unit before, the reason only in the units' logs, specs and logs written
    args = grid_args([tmp_path / "nope-a", tmp_path / "nope-b"], glue_data, tmp_path / "out", "--workers", "1")
    code, _, err = run_cli(args, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("harness: error: 2 of the grid's models cannot be loaded: model directory ")
    assert "nope-a" in err and "nope-b" in err and "pass an existing checkpoint directory" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("executor", ["local", "inline"])
def test_gpus_per_unit_without_a_gpu_is_one_line(tiny_model, glue_data, tmp_path, capsys, executor):
    # the local pool trained on the CPU without a word
    args = grid_args([tiny_model], glue_data, tmp_path / "out", "--executor", executor, "--gpus-per-unit", "1")
    code, _, err = run_cli(args, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "--gpus-per-unit 1 asks for 1 GPU a unit and no GPU is visible here; leave --gpus-per-unit out" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_inline_executor_equals_single_runs_bit_for_bit(grid_models, grid_glue, single_runs, tmp_path,
                                                            capsys):
    # the one check of --executor inline end to end: every unit in this process, in turn (~15 s)
    out = tmp_path / "inline"
    code, stdout, err = run_cli(grid_args(grid_models, grid_glue, out, "--executor", "inline", "--tracking-uri",
                                          "none"), capsys)
    assert code == 0, err
    assert "through the inline executor" in stdout
    for model in grid_models:
        body = json.loads((out / model.name / "results.json").read_text())
        assert records(body) == records(single_runs[model.name])
    logs = sorted(path.name for path in (out / "grid" / "logs").iterdir())
    assert logs == sorted(f"{m.name}.{t}.seed{s}.log" for m in grid_models for t in ("rte", "stsb")
                          for s in range(2))


@pytest.mark.slow
def test_params_from_works_with_a_grid(grid_models, grid_glue, tmp_path, capsys):
    # "drop the grid's flags" when none was given, before; two models, one unit each, inline (~6 s)
    from harness.search.study import BEST_FORMAT

    best = tmp_path / "best_params.json"
    best.write_text(json.dumps({
        "format": BEST_FORMAT, "study": "glue-rte-tiny", "storage": "sqlite:///o.db", "benchmark": "glue",
        "task": "rte", "model": "tiny", "trial": 1, "value": 0.5, "params": {"learning_rate": 2e-4},
        "trial_seeds": [0], "search_seeds": [0], "settings": {}, "trials": {"COMPLETE": 2, "PRUNED": 0}}))
    out = tmp_path / "out"
    args = ["run", "glue", *[w for m in grid_models for w in ("--model", m)], "--data-dir", grid_glue, "--tasks",
            "rte", "--params-from", best, "--executor", "inline", "--output-dir", out, "--tracking-uri", "none",
            *grid_fixtures.GRID_SETTINGS]
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    for model in grid_models:
        body = json.loads((out / model.name / "results.json").read_text())
        assert [(r["task"], r["seed"]) for r in body["runs"]] == [("rte", 1)]  # a seed the search never used
        assert body["runs"][0]["resolved_config"]["learning_rate"] == 2e-4
        assert body["search"]["study"] == "glue-rte-tiny"
        assert f"\n{model.name}:\n\nsearch score 0.5000: glue-rte-tiny trial 1" in stdout

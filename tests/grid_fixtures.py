"""A grid's test set-up, shared by the local pool's tests and Slurm's: two tiny models, GLUE's tiny files,
the settings, and what single `harness run`s of each model give, which every executor must equal bit for
bit (score, metrics, loss history of each task and seed).

Threads: a child of the pool runs with cpu_count() // workers threads, and the single runs here with one
(tests/processes.py's run_here). Both sides are pinned to one thread: a different count gave the same bits
here (reports/results/performance.md, "The grid's local pool"), but a reduction split across threads may
round otherwise elsewhere. Import the fixtures into a test module to use them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import processes
from tests.conftest import write_glue_dir, write_tiny_model

GRID_TASKS = "rte,stsb"
GRID_SEEDS = 2
GRID_SETTINGS = ["num_epochs=1", "save_models=false", "predict_test=false"]


def grid_args(models, data: Path, out: Path, *extra) -> list[str]:
    """`run glue` of every model (repeated --model) on the grid's tasks and seeds into `out`."""
    named = [word for model in models for word in ("--model", str(model))]
    return ["run", "glue", *named, "--data-dir", str(data), "--tasks", GRID_TASKS, "--seeds", str(GRID_SEEDS),
            "--output-dir", str(out), *extra, *GRID_SETTINGS]


def records(body: dict) -> dict[tuple[str, int], tuple]:
    """What must be bit-equal across executors: each (task, seed)'s score, metrics and loss history."""
    return {(r["task"], r["seed"]): (r["score"], r["metrics"], r["history"]) for r in body["runs"]}


@pytest.fixture(scope="session")
def grid_models(tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny random models, differently drawn, side by side in one folder (a glob takes both)."""
    folder = tmp_path_factory.mktemp("grid_models")
    return write_tiny_model(folder / "first", seed=0), write_tiny_model(folder / "second", seed=1)


@pytest.fixture(scope="session")
def grid_glue(tmp_path_factory) -> Path:
    return write_glue_dir(tmp_path_factory.mktemp("grid_glue") / "glue_data")


@pytest.fixture(scope="session")
def single_runs(grid_models, grid_glue, tmp_path_factory) -> dict[str, dict]:
    """Each model's results.json from one plain `harness run glue` (in this process, one thread), by the
    model folder's name."""
    root = tmp_path_factory.mktemp("grid_single")
    found = {}
    for model in grid_models:
        out = root / model.name
        code = processes.run_here(grid_args([model], grid_glue, out, "--tracking-uri", "none"), root)
        assert code == 0
        found[model.name] = json.loads((out / "results.json").read_text())
    return found


# A grid whose units train long enough to be stopped mid-way (80 epochs of 4 steps, ~4 s of training a
# unit on idle cores) and save their weights: each model on RTE, one seed.
LONG_EPOCHS = 80
LONG_STEPS = 4 * LONG_EPOCHS
LONG_SETTINGS = [f"num_epochs={LONG_EPOCHS}", "batch_size=4", "save_models=true", "predict_test=false"]


def long_args(models, data: Path, out: Path, *extra) -> list[str]:
    """`run glue` of every model on RTE, one seed, LONG_SETTINGS, into `out`."""
    named = [word for model in models for word in ("--model", str(model))]
    return ["run", "glue", *named, "--data-dir", str(data), "--tasks", "rte", "--output-dir", str(out), *extra,
            *LONG_SETTINGS]


@pytest.fixture(scope="session")
def long_runs(grid_models, grid_glue, tmp_path_factory) -> Path:
    """Each model's unbroken `harness run glue` of LONG_SETTINGS (in this process, one thread), in
    FOLDER/MODEL: what a grid whose units were stopped and resumed must end equal to."""
    root = tmp_path_factory.mktemp("grid_long")
    for model in grid_models:
        assert processes.run_here(long_args([model], grid_glue, root / model.name, "--tracking-uri", "none"),
                                  root) == 0
    return root


def same_as_unbroken(out: Path, unbroken: Path, name: str) -> dict:
    """The model's stopped-and-resumed RTE seed ended as the unbroken one did: score, metrics, loss
    history and final weights, bit for bit; its record returned (its `resumed` says from where)."""
    from safetensors.torch import load_file

    [resumed], [whole] = (json.loads((folder / name / "results.json").read_text())["runs"]
                          for folder in (out, unbroken))
    assert "resumed" in resumed and "resumed" not in whole
    for key in ("metrics", "score", "history", "num_train_steps", "train_examples_seen"):
        assert resumed[key] == whole[key], key
    expected, got = (load_file(folder / name / "models" / "rte-seed0" / "model.safetensors")
                     for folder in (unbroken, out))
    assert expected.keys() == got.keys() and all(expected[key].equal(got[key]) for key in expected)
    return resumed


def wait_for(found, what: str, timeout_s: float = 300.0, process=None):
    """Poll `found()` until it is true (its value returned); fail saying `what` after timeout_s, or when
    `process` ended first."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"ended ({process.returncode}) before {what}: {process.communicate()[0][-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"not {what} after {timeout_s} s")

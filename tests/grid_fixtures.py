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

"""The CLI where MLflow and Optuna are not installed, as on the GPU image: with `--tracking-uri none` it
pre-trains, fine-tunes, reports and exports without importing them; without it, one line says how to
install MLflow or turn tracking off. And the parts of the GPU check that need neither `datasets` nor
`evaluate` (the CLI's parsers, the benchmarks' modules) load without them.

Each run is a real subprocess in which benchmarks/image_like/sitecustomize.py makes the packages named in
HARNESS_BLOCK_IMPORTS unimportable (nothing is uninstalled).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import MICRO, REPO, write_corpus, write_glue_dir

IMAGE_LIKE = REPO / "benchmarks" / "image_like"
NO_TRACKERS = "mlflow,optuna"


def image_like(command: list[str], cwd, blocked: str = NO_TRACKERS) -> subprocess.CompletedProcess:
    """`python COMMAND` with `blocked` unimportable and no MLFLOW_TRACKING_URI."""
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    env |= {"HARNESS_BLOCK_IMPORTS": blocked,
            "PYTHONPATH": os.pathsep.join(filter(None, (str(IMAGE_LIKE), str(REPO), os.environ.get("PYTHONPATH"))))}
    return subprocess.run([sys.executable, *command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_blocker_blocks():
    code = "import importlib.util; print(importlib.util.find_spec('optuna'), importlib.util.find_spec('json').name)"
    done = image_like(["-c", code + "; import mlflow"], REPO)
    assert done.stdout == "None json\n"  # seen as missing by libraries that probe for it; others untouched
    assert done.returncode == 1 and "ModuleNotFoundError: import of mlflow halted" in done.stderr


# The CLI's commands for the two tests below, run one after another by one image-like interpreter
# (tests/image_commands.py): what matters is that none of them imports MLflow or Optuna, which one
# interpreter shows as well as one per command, without paying the imports five times.
def _commands(tiny_model, glue_data, folder) -> list[tuple[str, list[str]]]:
    """(working directory, arguments) of each command."""
    glue, corpus = str(folder / "glue"), str(write_corpus(folder / "corpus.txt"))
    (folder / "refused").mkdir()
    no_tracking = [  # run glue without --tracking-uri, where the default store would go
        "run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", "rte", "--output-dir",
        "glue", "num_epochs=1"]
    untracked = [
        ["pretrain", "--preset", MICRO.name, "--corpus", corpus, "--output", str(folder / "pre"), "--tracking-uri",
         "none", "max_steps=4", "tokenizer=train", "train_vocab_size=200", "precision=fp32",
         f"cache_dir={folder / 'cache'}"],
        ["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", "stsb", "--output-dir",
         glue, "--tracking-uri", "none", "num_epochs=1", "batch_size=8"],
        ["report", "--runs", glue, "--output", str(folder / "report"), "--tracking-uri", "none"],
        ["report", "--tracking-uri", "none"],
        ["export", "onnx", "--run", glue, "--task", "stsb", "--data-dir", str(glue_data), "--tracking-uri", "none"],
    ]
    return [(str(folder / "refused"), no_tracking)] + [(str(folder), argv) for argv in untracked]


@pytest.fixture(scope="module")
def untracked(tiny_model, tmp_path_factory):
    """The commands above, run by one interpreter without MLflow and Optuna: (folder they ran in, glue data,
    [{"code", "out", "err"} of each command])."""
    folder = tmp_path_factory.mktemp("untracked")
    glue_data = write_glue_dir(folder / "glue_data")
    (folder / "commands.json").write_text(json.dumps(_commands(tiny_model, glue_data, folder)))
    done = image_like(["-m", "tests.image_commands", str(folder / "commands.json"),
                       str(folder / "results.json")], folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, glue_data, json.loads((folder / "results.json").read_text())


@pytest.mark.slow
def test_without_mlflow_a_run_says_to_install_it_or_pass_tracking_none(untracked):
    folder, _, results = untracked
    done = results[0]
    assert done["code"] == 2, done["err"][-2000:]
    assert done["err"].strip().splitlines()[-1] == (
        "harness: error: MLflow is not installed: `pip install mlflow`, or pass --tracking-uri none (or set "
        "MLFLOW_TRACKING_URI=none) to run without tracking")
    refused = folder / "refused"  # where it ran, with the default store runs/mlflow.db and --output-dir glue
    assert not (refused / "runs" / "mlflow.db").exists() and not (refused / "glue" / "predictions").exists()


@pytest.mark.slow
def test_parsers_and_benchmarks_load_without_datasets_evaluate_or_trackers(tmp_path):
    """What the GPU check starts before any data is read: every subcommand's --help, the benchmarks."""
    code = ("from harness.cli import build_parser\n"
            "def helps(parser):\n"
            "    print(parser.format_help())\n"
            "    for action in parser._subparsers._group_actions if parser._subparsers else ():\n"
            "        for sub in action.choices.values():\n"
            "            helps(sub)\n"
            "helps(build_parser())\n")
    done = image_like(["-c", code], tmp_path, blocked="datasets,evaluate," + NO_TRACKERS)
    assert done.returncode == 0, done.stderr[-2000:]
    for usage in ("harness run glue", "harness run squad", "harness pretrain", "harness demo",
                  "harness export onnx", "harness experiment efficiency", "harness search glue"):
        assert f"usage: {usage} " in done.stdout
    for script in ("pretrain_step.py", "gpu_ceilings.py"):
        done = image_like([str(REPO / "benchmarks" / script), "--help"], tmp_path,
                          blocked="datasets,evaluate," + NO_TRACKERS)
        assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr[-2000:]


@pytest.mark.slow
def test_pretrain_finetune_report_and_export_with_tracking_none(tiny_model, untracked):
    folder, glue_data, results = untracked
    pretrain, finetune, report, no_runs, export = results[1:]
    assert pretrain["code"] == 0, pretrain["err"][-2000:]
    assert json.loads((folder / "pre" / "pretrain_meta.json").read_text())["steps"] == 4

    glue = folder / "glue"
    assert finetune["code"] == 0, finetune["err"][-2000:]
    assert [r["task"] for r in json.loads((glue / "results.json").read_text())["runs"]] == ["stsb"]
    assert f"leaderboard: not added, tracking is off; add it later with `harness report --runs {glue}`" \
        in finetune["out"]

    assert report["code"] == 0, report["err"][-2000:]
    assert tiny_model.name in (folder / "report" / "leaderboard.md").read_text()
    assert no_runs["code"] == 2 and "pass --runs RUN_DIR" in no_runs["err"]

    assert export["code"] == 0, export["err"][-2000:]
    manifest = json.loads((glue / "onnx" / "stsb-seed0" / "manifest.json").read_text())
    assert manifest["mlflow_run_id"] is None and manifest["parity"]["max_abs_diff"] <= 1e-4
    assert not (folder / "runs").exists()  # no MLflow store anywhere

"""One fine-tuning seed across processes (tasks/data_parallel.py): the processes' shards give one process's
gradient once DDP averages them, a batch_size that does not split is refused, and `torchrun
--nproc_per_node 2 -m harness.cli run glue` on the CPU (gloo) trains as one process does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from foundation.training import placement
from foundation.training.distributed import Context
from tasks.data_parallel import Replicas
from tests import mlflow_store
from tests.conftest import REPO, glue_args, run_cli, write_glue_dir, write_tiny_model
from tests.fixtures_processes import mlflow_store_copy
from tests.processes import child_env, finish, run_here, start

CPU = torch.device("cpu")


def _gradient(layer: torch.nn.Linear, batch: dict, replicas: Replicas, slices: int, reduction: str):
    """The gradient one process leaves (through Shard.weight, as the loop weighs its slices) and its
    shard's share of the global batch's mean loss."""
    layer.zero_grad()
    shard = replicas.shard(batch)
    mean = 0.0
    for share, part in placement.batch_slices(shard.rows, slices):
        loss = torch.nn.functional.cross_entropy(layer(part["input_ids"]), part["labels"])
        (loss * shard.weight(len(part["input_ids"]), share, reduction)).backward()
        mean += float(loss.detach()) * share * shard.fraction
    return layer.weight.grad.clone(), mean


@pytest.mark.parametrize("reduction", ["sum", "mean"])
# 4 rows: 2 each; 5: 2 and 3 (a short last batch); 1: the second process steps on a stand-in row
@pytest.mark.parametrize("rows", [4, 5, 1])
def test_the_average_of_two_processes_gradients_is_one_processs_gradient(reduction, rows):
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    batch = {"input_ids": torch.randn(rows, 3), "labels": torch.tensor([0, 1, 1, 0, 1][:rows])}
    one, one_loss = _gradient(layer, batch, Replicas(Context(0, 1, CPU)), 1, reduction)
    shards = [_gradient(layer, batch, Replicas(Context(rank, 2, CPU)), 2, reduction) for rank in (0, 1)]
    averaged = (shards[0][0] + shards[1][0]) / 2  # what DDP's all-reduce leaves in every process
    torch.testing.assert_close(averaged, one, rtol=1e-6, atol=1e-7)
    # the losses all-reduced (Replicas.global_loss) are the global batch's mean
    assert shards[0][1] + shards[1][1] == pytest.approx(one_loss, rel=1e-6)
    if reduction == "sum":  # the batch's summed loss: rows times the mean's gradient
        layer.zero_grad()
        (torch.nn.functional.cross_entropy(layer(batch["input_ids"]), batch["labels"]) * rows).backward()
        torch.testing.assert_close(one, layer.weight.grad)


def test_a_batch_size_that_does_not_split_over_the_processes_is_refused(tiny_model, glue_data, tmp_path,
                                                                         capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun --nproc_per_node 2 sets it
    code, _, err = run_cli(glue_args(tiny_model, glue_data, tmp_path, "--tasks", "rte", "batch_size=5"), capsys)
    assert code == 2
    assert err == ("harness: error: batch_size=5 does not split over torchrun's 2 processes, each of which "
                   "takes batch_size/2 of every step's examples; choose a multiple of 2\n")
    assert not (tmp_path / "out").exists() and not (tmp_path / "mlflow.db").exists()


def _dropout_free(directory: Path) -> Path:
    """The tiny model with dropout off, so that processes drawing their own masks cannot differ."""
    write_tiny_model(directory)
    config = json.loads((directory / "config.json").read_text())
    config |= {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def _weights(out: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(out / "models" / "rte-seed0" / "model.safetensors")


# Slow tier: the one check of DDP fine-tuning (torchrun, two CPU processes over gloo), ~60 s on two shared
# cores, most of it two processes importing torch, transformers and MLflow.
@pytest.mark.slow
def test_torchrun_with_two_processes_fine_tunes_as_one_process(tmp_path, tmp_path_factory):
    model = _dropout_free(tmp_path / "tiny")
    data = write_glue_dir(tmp_path / "glue_data")
    # head=hf: its dropout is the config's (the electra head's is ELECTRA's fixed 0.1). 15 examples in
    # batches of 4: the last batch of 3 splits 2 and 1; each process's 2 rows in 2 slices (no_sync).
    settings = ["--tasks", "rte", "precision=fp32", "head=hf", "batch_size=4", "max_train_examples=15",
                "gradient_accumulation_steps=2", "num_epochs=2", "learning_rate=2e-3", "max_length=32",
                "predict_test=false"]
    runs = {}
    for name in ("ddp", "one"):
        mlflow_store_copy(tmp_path_factory, tmp_path / name / "mlflow.db")
        runs[name] = glue_args(model, data, tmp_path / name, *settings)
    launched = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                               "--nproc_per_node=2", "-m", "harness.cli", *map(str, runs["ddp"])],
                              cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
    assert launched.returncode == 0, launched.stderr[-3000:]
    assert run_here(runs["one"], tmp_path) == 0
    ddp, one = (json.loads((tmp_path / name / "out" / "results.json").read_text())["runs"] for name in runs)
    assert len(ddp) == len(one) == 1
    assert ddp[0]["num_train_steps"] == one[0]["num_train_steps"] == 8  # 4 steps an epoch, as one process
    assert ddp[0]["train_examples_seen"] == one[0]["train_examples_seen"] == 30
    # The history's train loss is the global batch's (rank 0's own shard would differ), and it moved.
    losses = [[row.pop("train_loss") for row in run["history"]] for run in (ddp[0], one[0])]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5) and abs(losses[1][0] - losses[1][1]) > 1e-3
    assert ddp[0]["history"] == one[0]["history"] and ddp[0]["metrics"] == one[0]["metrics"]
    torch.testing.assert_close(_weights(tmp_path / "ddp" / "out"), _weights(tmp_path / "one" / "out"),
                               rtol=1e-4, atol=1e-6)
    # rank 0 alone reported and logged: one summary, one parent run and one seed's run
    assert launched.stdout.count("results: ") == 1, launched.stdout
    assert len(mlflow_store.runs(tmp_path / "ddp" / "mlflow.db")) == 2


# Release tier (three torchrun launches, ~4 min here): a SIGTERM to torchrun stops both processes at one
# step, rank 0 saves the seed with both processes' generators, and the resumed run, dropout on, ends as
# the unbroken one does, bit for bit.
@pytest.mark.slow
@pytest.mark.release
def test_a_seed_stopped_under_torchrun_resumes_as_the_unbroken_run(tiny_model, tmp_path, tmp_path_factory):
    data = write_glue_dir(tmp_path / "glue_data", n_train=64)
    settings = ["--tasks", "rte", "precision=fp32", "batch_size=4", "num_epochs=4", "max_length=32",
                "predict_test=false", "save_models=false"]
    runs = {}
    for name in ("stopped", "unbroken"):
        mlflow_store_copy(tmp_path_factory, tmp_path / name / "mlflow.db")
        runs[name] = ["--standalone", "--nproc_per_node=2", "-m", "harness.cli",
                      *glue_args(tiny_model, data, tmp_path / name, *settings)]
    process = start(runs["stopped"], REPO, module="torch.distributed.run")
    seen = ""
    for line in process.stdout:  # the end of the first epoch: its dev scores, printed by rank 0
        seen += line
        if "epoch 1/4" in line and "| dev" in line:
            process.send_signal(signal.SIGTERM)
            break
    code, output = finish(process, seen)
    assert code != 0 and (tmp_path / "stopped" / "out" / "checkpoints" / "rte-seed0.pt").is_file(), output
    assert output.count("resume with: torchrun --nproc_per_node 2 -m harness.cli run glue") == 1, output
    for name in runs:  # the resume, then the unbroken run
        assert finish(start(runs[name], REPO, module="torch.distributed.run"))[0] == 0
    stopped, unbroken = (json.loads((tmp_path / name / "out" / "results.json").read_text())["runs"][0]
                         for name in runs)
    assert stopped.pop("resumed")[0]["epoch"] >= 1 and "resumed" not in unbroken
    assert stopped["history"] == unbroken["history"] and stopped["metrics"] == unbroken["metrics"]

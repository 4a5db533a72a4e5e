"""Stop without loss: a SIGTERM or Ctrl-C writes the run's state at the next step boundary and the run
resumed from it ends bit-identical to an unbroken one; a second signal stops at once. Real signals: sent
to this process (the loop in-process) or to real `harness` processes (slow)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time

import pytest
import torch
import transformers

from foundation.training import stop
from tasks import batching, glue
from tasks.config import FinetuneConfig
from tasks.finetune import LoopIO, finetune
from tasks.finetune_state import SeedState, seed_path
from tasks.glue_data import load_glue
from tasks.registry import GLUE_TASKS
from tests.conftest import write_corpus, write_glue_dir
from tests.fixtures_processes import mlflow_store_copy
from tests.pretrain_helpers import final_weights
from tests.processes import finish, run_here, start


def test_a_signal_asks_an_armed_loop_to_stop_and_a_second_one_interrupts():
    # what this process had: Python's default, or SIG_IGN where a shell started it in the background
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    with stop.handled():
        with pytest.raises(KeyboardInterrupt):  # no loop armed yet: nothing to save, stop at once
            os.kill(os.getpid(), signal.SIGTERM)
        stop.arm()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested() == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):  # asked twice: at once
            os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(stop.Stopped, match="^stopped by SIGTERM before rte seed 1$") as stopped:
            stop.raise_if_requested("before rte seed 1")
        assert stopped.value.exit_status == 128 + 15
    assert stop.requested() is None
    assert {number: signal.getsignal(number) for number in before} == before  # the handlers are given back


def test_a_repeated_sigterm_is_a_forward_and_the_loop_still_saves():
    """torchrun's agent forwards the SIGTERM that Slurm (or a process group's kill) gave each worker too:
    the second one must not interrupt the step the save comes after; Ctrl-C twice still does."""
    with stop.handled():
        stop.arm()
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # the forward: no KeyboardInterrupt
        assert stop.requested() == signal.SIGTERM
        with pytest.raises(stop.Stopped, match="^stopped by SIGTERM at step 3$"):
            stop.raise_if_requested("at step 3")
    with stop.handled():
        stop.arm()
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


def test_a_loop_armed_in_a_nested_block_is_over_when_it_ends():
    with stop.handled():  # the invocation's MLflow run
        with stop.handled():  # a seed's, whose loop arms
            stop.arm()
        with pytest.raises(KeyboardInterrupt):  # between seeds: nothing armed, at once
            os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested() is None


class SignalOnBatch:
    """A collator that sends this process `signum` as it pads its `call`-th batch (eval batches count)."""

    def __init__(self, collate, call: int, signum: int = signal.SIGTERM):
        self.collate, self.call, self.signum, self.calls = collate, call, signum, 0

    def __call__(self, features):
        self.calls += 1
        if self.calls == self.call:
            os.kill(os.getpid(), self.signum)
        return self.collate(features)


def _train(tiny_model, glue_data, state=None, signal_on_batch=None, on_epoch=None, init_seed=0, **settings):
    """RTE of the fixture (16 examples: 4 steps of 4 an epoch) on the tiny model, with dropout."""
    task = GLUE_TASKS["rte"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    built = glue.build_task(task, load_glue(task, glue_data), tokenizer, max_length=32)
    config = FinetuneConfig(**{"precision": "fp32", "batch_size": 4, "num_epochs": 3, "learning_rate": 2e-3,
                               **settings}).resolved("small", 1)
    transformers.set_seed(init_seed)  # a resumed seed's weights and RNGs come from its state, not from here
    model = glue.load_model(str(tiny_model), task, "eager")
    collate = batching.collator(tokenizer)
    if signal_on_batch:
        collate = SignalOnBatch(collate, signal_on_batch)
    with stop.handled():
        return finetune(model, built, config, collate, LoopIO(on_epoch, progress=False, state=state)), model


def _same(whole, resumed) -> None:
    (result_a, model_a), (result_b, model_b) = whole, resumed
    assert result_b.history == result_a.history and result_b.metrics == result_a.metrics
    assert result_b.num_train_steps == result_a.num_train_steps
    assert result_b.train_examples_seen == result_a.train_examples_seen
    weights_a, weights_b = model_a.state_dict(), model_b.state_dict()
    assert [name for name in weights_a if not torch.equal(weights_a[name], weights_b[name])] == []
    for split in result_a.outputs:
        assert all(torch.equal(torch.as_tensor(a), torch.as_tensor(b))
                   for a, b in zip(result_a.outputs[split], result_b.outputs[split], strict=True))


@pytest.mark.parametrize("group_by_length", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_a_seed_stopped_mid_epoch_resumes_bit_identical(tiny_model, glue_data, tmp_path, group_by_length):
    whole = _train(tiny_model, glue_data, group_by_length=group_by_length)
    path = seed_path(tmp_path, "rte", 0)
    # batches 1-4 train epoch 1, 5 is its dev set; the signal comes as batch 7 (epoch 2's second) is
    # padded, so step 6 is the last one taken
    with pytest.raises(stop.Stopped, match=rf"^stopped by SIGTERM at step 6 \(epoch 2\); its state is '{path}'$"):
        _train(tiny_model, glue_data, SeedState(path), signal_on_batch=7, group_by_length=group_by_length)
    state = SeedState(path)
    assert state.resumes == [{"epoch": 1, "step": 6}]  # from 0: epoch 2, two of its steps taken
    _same(whole, _train(tiny_model, glue_data, state, init_seed=99, group_by_length=group_by_length))


class Killed(Exception):
    """Stands for a kill -9 of the process after an epoch's state was written."""


def test_a_seed_killed_after_an_epoch_resumes_from_it_bit_identical(tiny_model, glue_data, tmp_path):
    whole = _train(tiny_model, glue_data)
    path = seed_path(tmp_path, "rte", 0)

    def killed_in_epoch_3(epoch, row):  # epoch 2's state is written after this returns for epoch 2
        if epoch == 3:
            raise Killed

    with pytest.raises(Killed):
        _train(tiny_model, glue_data, SeedState(path), on_epoch=killed_in_epoch_3)
    state = SeedState(path)
    assert state.resumes == [{"epoch": 2, "step": 8}] and len(state.point.history) == 2
    _same(whole, _train(tiny_model, glue_data, state, init_seed=99))


def test_a_state_of_other_settings_is_refused_in_one_line(tiny_model, glue_data, tmp_path):
    from foundation.infra.errors import UserError

    path = seed_path(tmp_path, "rte", 0)
    with pytest.raises(stop.Stopped):
        _train(tiny_model, glue_data, SeedState(path, {"learning_rate": 2e-3}), signal_on_batch=2)
    with pytest.raises(UserError) as error:
        SeedState(path, {"learning_rate": 1e-4})
    assert str(error.value) == (f"{str(path)!r} holds a stopped seed trained with other settings (learning_rate: "
                                "0.002 -> 0.0001); resume it with the same settings, or delete it to train "
                                "that seed afresh")
    path.write_bytes(path.read_bytes()[:1000])  # cut short, as by a full disk
    with pytest.raises(UserError, match="is not a readable fine-tuning state .*; delete it to train that seed"):
        SeedState(path, {"learning_rate": 2e-3})


def test_persistent_workers_resume_the_same_batches_and_random_draws(tiny_model, glue_data, tmp_path):
    """On a GPU the loader keeps two workers, and its iterator draws a seed from the global RNG only at
    the first epoch's start: a state written at an epoch's end still gives the later epochs the batches
    and the (dropout's) random draws of an unbroken run."""
    from tasks.finetune_state import LoopPoint

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    built = glue.build_task(GLUE_TASKS["rte"], load_glue(GLUE_TASKS["rte"], glue_data), tokenizer, max_length=32)
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)

    def epochs(state: SeedState, first: int, last: int) -> list:
        loader = batching.train_loader(built.train, 4, 0, True, batching.collator(tokenizer), accelerator=True)
        assert loader.persistent_workers
        seen = []
        for epoch in range(first, last):
            for batch in state.batches(loader, epoch):
                seen.append((batch["input_ids"].tolist(), torch.rand(1).item()))  # a step's dropout draw
            state.save({"model": model, "optimizer": optimizer, "schedule": schedule}, LoopPoint(epoch=epoch + 1))
        return seen

    torch.manual_seed(0)
    whole = epochs(SeedState(None), 0, 3)
    torch.manual_seed(0)
    path = seed_path(tmp_path, "rte", 0)
    first = epochs(SeedState(path), 0, 1)
    torch.manual_seed(1)  # another process, another RNG: the state decides
    assert first + epochs(SeedState(path), 1, 3) == whole


# --- real `harness` processes -------------------------------------------------------------------------

def _resume_line(output: str, signum: int, where: str) -> list[str]:
    """The one line a stopped run ends with, checked; the command it says resumes the run."""
    last = output.strip().splitlines()[-1]
    name = signal.Signals(signum).name
    assert re.fullmatch(rf"harness: stopped by {name} {where}; resume with: harness .+", last), output
    assert len([line for line in output.splitlines() if line.startswith("harness: stopped")]) == 1
    return shlex.split(last.split("; resume with: ")[1])[1:]


# 30 steps of electra-tiny, signalled after step 5: 25 steps (seconds) for the signal to arrive in.
STEPS, FIRST_LINE = 30, 5
PRETRAIN = ["pretrain", "--preset", "electra-tiny", f"max_steps={STEPS}", "batch_size=4", "seq_len=32",
            "tokenizer=train", "train_vocab_size=200", "precision=fp32", f"log_every_steps={FIRST_LINE}"]


def _pretrain_args(tmp_path, corpus, name: str, tracking_uri: str | None = None) -> list[str]:
    return [*PRETRAIN, "--corpus", str(corpus), "--output", str(tmp_path / name),
            "--tracking-uri", tracking_uri or f"sqlite:///{tmp_path / 'mlflow.db'}",
            f"cache_dir={tmp_path / 'cache'}"]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """An unbroken `harness pretrain` of STEPS steps, in this process (its process is not what is
    checked): the corpus and the folder it ran in (its MLflow store, for the signalled runs, copied
    ready-made: the reference run tracks nothing)."""
    folder = tmp_path_factory.mktemp("pretrain")
    corpus = write_corpus(folder / "corpus.txt")
    mlflow_store_copy(tmp_path_factory, folder / "mlflow.db")
    assert run_here(_pretrain_args(folder, corpus, "whole", tracking_uri="none"), folder) == 0
    return folder, corpus


# A real `harness pretrain` process (the signalled one; the reference and the resume run in this one,
# ~19 s alone): the only check that a signal to the CLI checkpoints and that the resumed run ends
# bit-identical. SIGINT (Ctrl-C) is in the release tier: the same handler takes both
# signals (foundation.training.stop.SIGNALS); CI sends SIGINT to a real fine-tuning process instead
# (test_a_seed_stopped_by_a_signal_resumes_bit_identical), and both to the loop in-process (above).
@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.release)])
def test_a_signalled_pretrain_checkpoints_and_resumes_bit_identical(pretrained, signum):
    folder, corpus = pretrained
    out = folder / f"stopped-{signum}"
    process = start(_pretrain_args(folder, corpus, out.name), folder)
    seen = ""
    while f"pretrain {out.name}: step {FIRST_LINE} " not in seen:  # the first progress line: step 5 is done
        line = process.stdout.readline()
        assert line, seen
        seen += line
    process.send_signal(signum)
    code, output = finish(process, seen)
    assert code == 128 + signum, output
    step = int(re.search(r"stopped by \w+ at step (\d+);", output).group(1))
    assert FIRST_LINE <= step < STEPS  # within a step or two of the signal, before the run's end
    checkpoint = out / "checkpoints" / f"step-{step}"
    argv = _resume_line(output, signum, rf"at step {step}; its checkpoint is {re.escape(repr(str(checkpoint)))}")
    assert (checkpoint / "training_state.pt").is_file() and not (out / "pretrain_meta.json").exists()

    assert run_here(argv, folder) == 0  # the command it printed, here: the signalled process is the point
    expected, got = final_weights(folder / "whole"), final_weights(out)
    assert expected.keys() == got.keys()
    assert [name for name in expected if not torch.equal(expected[name], got[name])] == []


# Epochs of 4 steps; the signal comes once the first epoch's state is written, so the rest (a second
# or two) is the time it has to arrive in before the run ends.
EPOCHS = 8


def _glue_args(tiny_model, glue_data, tmp_path, name: str, tracking_uri: str | None = None) -> list[str]:
    return ["run", "glue", "--model", str(tiny_model), "--data-dir", str(glue_data), "--tasks", "rte",
            "--output-dir", str(tmp_path / name),
            "--tracking-uri", tracking_uri or f"sqlite:///{tmp_path / name}.db",
            f"num_epochs={EPOCHS}", "batch_size=4", "save_models=true", "predict_test=false"]


@pytest.fixture(scope="module")
def finetuned(tiny_model, tmp_path_factory):
    """An unbroken `harness run glue` of one RTE seed, EPOCHS epochs of 4 steps, in this process (its
    process is not what is checked), tracking nothing (the stopped runs' stores are copied ready-made,
    so their MLflow runs are still checked): the folder."""
    folder = tmp_path_factory.mktemp("finetune")
    write_glue_dir(folder / "glue_data")
    for name in ("killed", "stopped"):
        mlflow_store_copy(tmp_path_factory, folder / f"{name}.db")
    assert run_here(_glue_args(tiny_model, folder / "glue_data", folder, "whole", "none"), folder) == 0
    return folder


def _stop_after_an_epoch(args: list[str], folder, signum: int) -> tuple[int, str]:
    """Start `args`, send `signum` once the seed's first epoch state is written, and wait for the end."""
    process = start(args, folder)
    state = seed_path(folder / args[args.index("--output-dir") + 1], "rte", 0)
    deadline = time.monotonic() + 300
    while not state.is_file():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[0]
        time.sleep(0.05)
    process.send_signal(signum)
    return finish(process)


def _same_seed(folder, name: str) -> dict:
    """The run `name` ended like the unbroken one: weights, scores and history; its record returned."""
    from safetensors.torch import load_file

    whole, resumed = (json.loads((folder / run / "results.json").read_text())["runs"] for run in ("whole", name))
    assert len(resumed) == 1 and "resumed" not in whole[0]
    for key in ("metrics", "score", "history", "num_train_steps", "train_examples_seen"):
        assert resumed[0][key] == whole[0][key], key
    expected, got = (load_file(folder / run / "models" / "rte-seed0" / "model.safetensors") for run in ("whole", name))
    assert expected.keys() == got.keys()
    assert [key for key in expected if not torch.equal(expected[key], got[key])] == []
    assert list((folder / name / "checkpoints").iterdir()) == []  # the seed's state is gone once recorded
    return resumed[0]


def _resumed_tag(folder, name: str) -> str:
    from tests import mlflow_store

    seeds = mlflow_store.runs(folder / f"{name}.db", "tags.task = 'rte' and attributes.status = 'FINISHED'",
                              experiment="glue")
    assert len(seeds) == 1 and seeds[0].data.tags["resumed"] == "true"
    return seeds[0].data.tags["resumed_from"]


# Slow tier, ~17 s alone (one real process, the killed one; the reference and the resume run in this
# one): the only check that a real `harness run glue` process killed with -9 (no handler runs) resumes
# from its last epoch's state bit-identical.
@pytest.mark.slow
def test_a_seed_killed_9_after_an_epoch_resumes_from_it_bit_identical(tiny_model, finetuned):
    folder = finetuned
    args = _glue_args(tiny_model, folder / "glue_data", folder, "killed")
    code, output = _stop_after_an_epoch(args, folder, signal.SIGKILL)
    assert code == -signal.SIGKILL and seed_path(folder / "killed", "rte", 0).is_file(), output

    assert run_here(args, folder) == 0  # the same command again, in this process: the kill is the point
    record = _same_seed(folder, "killed")
    [point] = record["resumed"]
    assert point["step"] == 4 * point["epoch"] and 1 <= point["epoch"] < EPOCHS  # an epoch's end: 4 steps each
    assert _resumed_tag(folder, "killed") == f"epoch {point['epoch'] + 1} step {point['step']}"


# Slow tier, ~19 s alone (one real process, the signalled one): the only check that Ctrl-C to a real
# `harness run glue` process saves the seed's state mid-epoch and that the resumed run ends bit-identical.
@pytest.mark.slow
def test_a_seed_stopped_by_a_signal_resumes_bit_identical(tiny_model, finetuned):
    """Ctrl-C (SIGINT) here: the signalled pre-training above takes SIGTERM, the same handler."""
    folder = finetuned
    code, output = _stop_after_an_epoch(_glue_args(tiny_model, folder / "glue_data", folder, "stopped"), folder,
                                        signal.SIGINT)
    assert code == 128 + signal.SIGINT, output
    step = int(re.search(r"stopped by SIGINT at step (\d+) ", output).group(1))
    state = seed_path(folder / "stopped", "rte", 0)
    argv = _resume_line(output, signal.SIGINT,
                        rf"at step {step} \(epoch {(step - 1) // 4 + 1}\); its state is {re.escape(repr(str(state)))}")
    assert 4 <= step < 4 * EPOCHS and state.is_file()

    assert run_here(argv, folder) == 0  # the command it printed, here: the signalled process is the point
    assert _same_seed(folder, "stopped")["resumed"] == [{"epoch": (step - 1) // 4, "step": step}]
    assert _resumed_tag(folder, "stopped") == f"epoch {(step - 1) // 4 + 1} step {step}"


DDP_LAUNCHER = """import os, sys
from pathlib import Path
Path(sys.argv[1], f"rank-{os.environ['RANK']}.pid").write_text(str(os.getpid()))
from harness.cli import main
sys.exit(main(sys.argv[2:]))
"""


# Release tier (tox -e release), not CI: three two-process torchrun launches of STEPS steps.
# CI keeps DDP's parity with one process (test_pretrain_cli.py) and the one-process signal tests above.
@pytest.mark.release
def test_a_signal_to_one_ddp_process_stops_both_at_one_step_and_resumes_bit_identical(pretrained):
    """`torchrun` with two CPU processes: SIGTERM to rank 1 alone; rank 0 stops at the same step and writes
    the checkpoint (both processes' RNGs), and `torchrun` on it ends like an unbroken `torchrun`."""
    folder, corpus = pretrained
    (folder / "launch.py").write_text(DDP_LAUNCHER)

    def torchrun(name: str) -> subprocess.Popen:
        return start(["--nproc_per_node=2", "--standalone", folder / "launch.py", folder,
                      *_pretrain_args(folder, corpus, name)], folder, module="torch.distributed.run")

    code, output = finish(torchrun("ddp-whole"))
    assert code == 0, output[-3000:]
    process, seen = torchrun("ddp-stopped"), ""
    while f"pretrain ddp-stopped: step {FIRST_LINE} " not in seen:
        line = process.stdout.readline()
        assert line, seen[-3000:]
        seen += line
    os.kill(int((folder / "rank-1.pid").read_text()), signal.SIGTERM)
    code, output = finish(process, seen)
    assert code != 0
    steps = set(re.findall(r"harness: stopped by SIGTERM at step (\d+);", output))
    assert len(steps) == 1, output[-3000:]  # each process says so, at the same step
    state = torch.load(folder / "ddp-stopped" / "checkpoints" / f"step-{steps.pop()}" / "training_state.pt",
                       weights_only=True)
    assert state["world_size"] == 2 and len(state["rng"]) == 2

    code, output = finish(torchrun("ddp-stopped"))
    assert code == 0, output[-3000:]
    expected, got = final_weights(folder / "ddp-whole"), final_weights(folder / "ddp-stopped")
    assert [name for name in expected if not torch.equal(expected[name], got[name])] == []


def test_an_fp16_seed_resumes_with_its_loss_scale(tiny_model, glue_data, tmp_path):
    """fp16's scaler is part of a seed's state: its scale (halved at each overflow, each skipping a step)
    and its count of steps since the last overflow go on across a stop as in an unbroken run."""
    whole = _train(tiny_model, glue_data, precision="fp16")
    path = seed_path(tmp_path, "rte", 0)
    with pytest.raises(stop.Stopped):  # after step 6, as above
        _train(tiny_model, glue_data, SeedState(path), signal_on_batch=7, precision="fp16")
    saved = torch.load(path, weights_only=True)["scaler"]
    assert saved["scale"] < 2.0 ** 16 and saved["_growth_tracker"] > 0  # an overflow, then steps without
    _same(whole, _train(tiny_model, glue_data, SeedState(path), init_seed=99, precision="fp16"))

"""Stop without loss: a SIGTERM or Ctrl-C writes the run's state at the next step boundary and the run
resumed from it ends bit-identical to an unbroken one; a second signal stops at once. Real signals: sent
to this process (the loop in-process) or to real `harness` processes (slow)."""

from __future__ import annotations

import os
import signal

import pytest
import torch
import transformers

from pretrain.common import stop
from tasks import batching, glue
from tasks.config import FinetuneConfig
from tasks.finetune import finetune
from tasks.finetune_state import SeedState, seed_path
from tasks.glue_data import load_glue
from tasks.registry import GLUE_TASKS


def test_a_signal_asks_an_armed_loop_to_stop_and_a_second_one_interrupts():
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
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are given back


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
        return finetune(model, built, config, collate, on_epoch=on_epoch, progress=False, state=state), model


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
    from pretrain.common.errors import UserError

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

"""GPU features users expect, tested on the CPU: fp16 autocast with a gradient scaler, for GPUs without
bf16 (V100, T4; `auto` picks it there, both loops train with it, and the CPU's autocast and GradScaler
take fp16 too), and gradient accumulation that keeps the recipe's batch size in less memory."""

from __future__ import annotations

import collections

import pytest
import torch

from foundation.training import placement
from tests.conftest import finetune_glue
from tests.pretrain_helpers import micro_config


def test_auto_takes_fp16_with_a_scaler_only_on_a_gpu_without_bf16(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                        lambda including_emulation=True: including_emulation)  # a V100: bf16 only emulated
    assert placement.resolve_precision("auto", torch.device("cuda")) == "fp16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # an A100
    assert placement.resolve_precision("auto", torch.device("cuda")) == "bf16"
    cpu = torch.device("cpu")
    assert [placement.grad_scaler(cpu, p).is_enabled() for p in ("fp16", "bf16", "fp32")] == [True, False, False]
    with placement.autocast(cpu, "fp16"):
        assert torch.nn.Linear(4, 4)(torch.ones(1, 4)).dtype == torch.float16


def _counting(scaler, name: str):
    """The scaler's method `name`, counting its calls in `scaler.calls`."""
    method = getattr(scaler, name)

    def counted(*args, **kwargs):
        scaler.calls[name] += 1
        return method(*args, **kwargs)
    return counted


@pytest.fixture
def scalers(monkeypatch) -> list:
    """Every gradient scaler a loop makes, each counting its calls (`scaler.calls`): a loop that made a
    scaler and then stepped around it would leave its scale where it started, inside any bound."""
    made, real = [], placement.grad_scaler

    def recording(device, precision):
        scaler = real(device, precision)
        scaler.calls = collections.Counter()
        for name in ("scale", "step", "update"):
            setattr(scaler, name, _counting(scaler, name))
        made.append(scaler)
        return scaler

    monkeypatch.setattr(placement, "grad_scaler", recording)
    return made


def test_fp16_fine_tuning_learns(tiny_model, glue_data, scalers):
    result, _, _ = finetune_glue(tiny_model, glue_data, "stsb", precision="fp16", learning_rate=2e-3, num_epochs=4)
    losses = [row["train_loss"] for row in result.history]
    assert losses[-1] < 0.8 * losses[0]
    (scaler,) = scalers
    # every step's loss went through the scaler and every optimiser step through its step and update
    assert scaler.is_enabled() and scaler.calls == {"scale": result.num_train_steps, "step": result.num_train_steps,
                                                    "update": result.num_train_steps}
    assert 1 <= scaler.get_scale() <= 2.0 ** 16  # backed off, never grew past its start, if it overflowed


def test_fp16_pretraining_steps_with_a_scaler(tmp_path, micro, corpus, scalers):
    from pretrain.train import pretrain

    logged = []
    meta = pretrain(micro_config(tmp_path, corpus, precision="fp16", max_steps=6,
                                 log_every_steps=3), on_log=lambda step, metrics: logged.append(metrics))
    assert meta["precision"] == "fp16" and meta["steps"] == 6
    assert all(torch.isfinite(torch.tensor(m["loss"])) for m in logged) and len(logged) == 2
    assert [(s.is_enabled(), s.calls) for s in scalers] == [(True, {"scale": 6, "step": 6, "update": 6})]


def _gradients(tiny_model, glue_data, **settings) -> dict[str, torch.Tensor]:
    """The gradient one batch of 8 RTE pairs leaves on a dropout-free tiny model, through the loop's
    forward-and-backward."""
    import contextlib

    import transformers

    from tasks import batching, glue
    from tasks.config import FinetuneConfig
    from tasks.finetune import _forward_backward
    from tasks.glue_data import load_glue
    from tasks.registry import GLUE_TASKS

    task = GLUE_TASKS["rte"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    built = glue.build_task(task, load_glue(task, glue_data), tokenizer, max_length=32)
    batch = batching.collator(tokenizer)([built.train[i] for i in range(8)])
    transformers.set_seed(0)
    model = glue.load_model(str(tiny_model), task, "eager")
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    config = FinetuneConfig(batch_size=8, **settings)
    scaler = placement.grad_scaler(torch.device("cpu"), "fp32")
    loss = _forward_backward(model, False, batch, config, contextlib.nullcontext(), scaler)
    return {name: p.grad for name, p in model.named_parameters()} | {"loss": loss}


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_gradient_accumulation_gives_the_whole_batchs_gradient(tiny_model, glue_data, reduction):
    """A batch of 8 in 3 slices (3, 2, 3 pairs) leaves the gradient the whole batch does, and logs its loss."""
    whole = _gradients(tiny_model, glue_data, loss_reduction=reduction)
    sliced = _gradients(tiny_model, glue_data, loss_reduction=reduction, gradient_accumulation_steps=3)
    for name, gradient in whole.items():
        torch.testing.assert_close(sliced[name], gradient, rtol=1e-4, atol=1e-6, msg=name)


def test_gradient_accumulation_must_fit_the_batch():
    from tasks.config import FinetuneConfig

    with pytest.raises(ValueError, match="gradient_accumulation_steps=9 would slice a batch of 8"):
        FinetuneConfig(batch_size=8, gradient_accumulation_steps=9)


def _pretraining_step(objective: str, slices: int):
    """One pre-training step of the micro networks on 4 sequences, each with one maskable token: with every
    masked slot shown as [MASK], a near-zero sampling temperature (the generator's argmax) and no dropout,
    the step has no random draw left, so the batch whole and in slices must train alike."""
    from pretrain.train import train_step
    from tests.pretrain_helpers import micro_setup

    setup = micro_setup(objective=objective, gradient_accumulation_steps=slices, mask_token_fraction=1.0,
                        temperature=1e-6)
    setup.model.eval()  # dropout off
    ids = torch.tensor([[2, token, 3, 0, 0, 0] for token in (11, 23, 37, 41)])  # [CLS] token [SEP] padding
    batch = {"input_ids": ids, "attention_mask": (ids != 0).long(), "token_type_ids": torch.zeros_like(ids)}
    loss, stats, grad_norm = train_step(setup, setup.model, batch)
    return loss, stats, grad_norm, {name: p.detach().clone() for name, p in setup.model.named_parameters()}


@pytest.mark.parametrize("objective", ["electra", "mlm"])
@pytest.mark.parametrize("slices", [2, 3])  # 3: slices of 1, 2 and 1 sequences, weighted by their share
def test_pretraining_accumulation_takes_the_whole_batchs_step(micro, objective, slices):
    loss, stats, grad_norm, weights = _pretraining_step(objective, 1)
    sliced_loss, sliced_stats, sliced_norm, sliced_weights = _pretraining_step(objective, slices)
    torch.testing.assert_close(sliced_loss, loss)
    torch.testing.assert_close(sliced_norm, grad_norm)
    assert sliced_stats.keys() == stats.keys()
    for name, value in stats.items():  # counts summed (4 masked slots in all), losses and AUC weighted
        torch.testing.assert_close(sliced_stats[name].double(), value.double(), msg=name)
    assert float(stats["masked_total"]) == 4
    for name, weight in weights.items():
        torch.testing.assert_close(sliced_weights[name], weight, rtol=1e-4, atol=1e-6, msg=name)


def test_pretraining_accumulation_keeps_the_run_and_may_change_on_resume(tmp_path, micro, corpus):
    from pretrain.train import pretrain

    whole = pretrain(micro_config(tmp_path, corpus, "whole", max_steps=4))
    sliced = pretrain(micro_config(tmp_path, corpus, "sliced", max_steps=2, gradient_accumulation_steps=4))
    assert sliced["config"]["gradient_accumulation_steps"] == 4
    # a runtime setting: a resumed run may slice otherwise (another GPU's memory), the batch stays the recipe's
    sliced = pretrain(micro_config(tmp_path, corpus, "sliced", max_steps=4, gradient_accumulation_steps=2))
    for key in ("steps", "tokens_seen", "train_flops", "batch_size"):
        assert sliced[key] == whole[key], key
    assert all(torch.isfinite(torch.tensor(value)) for value in sliced["metrics"].values())


@pytest.mark.parametrize("slices,message", [
    (9, "gradient_accumulation_steps=9 would slice a batch of 8 into empty slices; use at most 8"),
    (0, "gradient_accumulation_steps=0 must be positive"),
])
def test_pretraining_accumulation_must_fit_the_batch(micro, slices, message):
    from pretrain.config import PretrainConfig, resolve

    with pytest.raises(ValueError, match=message):
        resolve(PretrainConfig(preset=micro, gradient_accumulation_steps=slices))


def test_an_fp16_run_resumes_with_its_loss_scale(tmp_path, micro, corpus):
    """The scaler's scale and its count of steps since the last overflow are checkpointed: a killed fp16
    run resumes with them, as the unbroken run went on."""
    from pretrain.train import pretrain
    from tests.pretrain_helpers import Killed, final_weights, killed_at

    settings = {"max_steps": 8, "checkpoint_every_steps": 3, "precision": "fp16"}
    pretrain(micro_config(tmp_path, corpus, "whole", **settings))
    broken = micro_config(tmp_path, corpus, "broken", log_every_steps=1, **settings)
    with pytest.raises(Killed):  # after the step-3 checkpoint
        pretrain(broken, on_log=killed_at(4))
    pretrain(broken)

    def last_state(name: str) -> dict:
        folder = max((tmp_path / name / "checkpoints").iterdir(), key=lambda p: int(p.name.split("-")[1]))
        return torch.load(folder / "training_state.pt", weights_only=True)

    whole, resumed = last_state("whole")["scaler"], last_state("broken")["scaler"]
    # the scale backed off from its start (overflows skipped steps): a scaler started afresh would differ
    assert resumed == whole and whole["scale"] < 2.0 ** 16
    expected, got = final_weights(tmp_path / "whole"), final_weights(tmp_path / "broken")
    assert [k for k in expected if not torch.equal(expected[k], got[k])] == []

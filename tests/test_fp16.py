"""fp16 autocast with a gradient scaler, for GPUs without bf16 (V100, T4): `auto` picks it there, and
both loops train with it (run here on the CPU, whose autocast and GradScaler take fp16 too)."""

from __future__ import annotations

import pytest
import torch

from pretrain.common import placement
from tests.test_finetune import _train
from tests.test_pretrain_train import MICRO, micro_config, write_corpus


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


@pytest.fixture
def scalers(monkeypatch) -> list:
    """Every gradient scaler a loop makes, to read its scale after training."""
    made, real = [], placement.grad_scaler

    def recording(device, precision):
        made.append(real(device, precision))
        return made[-1]

    monkeypatch.setattr(placement, "grad_scaler", recording)
    return made


def test_fp16_fine_tuning_learns(tiny_model, glue_data, scalers):
    result, _, _ = _train(tiny_model, glue_data, "stsb", precision="fp16", learning_rate=2e-3, num_epochs=4)
    losses = [row["train_loss"] for row in result.history]
    assert losses[-1] < 0.8 * losses[0]
    (scaler,) = scalers
    assert scaler.is_enabled() and 1 <= scaler.get_scale() <= 2.0 ** 16  # it scaled, and backed off if it overflowed


def test_fp16_pretraining_steps_with_a_scaler(tmp_path, monkeypatch, scalers):
    from pretrain.common.models import PRESETS
    from pretrain.train import pretrain

    monkeypatch.setitem(PRESETS, MICRO.name, MICRO)
    logged = []
    meta = pretrain(micro_config(tmp_path, write_corpus(tmp_path / "corpus.txt"), precision="fp16", max_steps=6,
                                 log_every_steps=3), on_log=lambda step, metrics: logged.append(metrics))
    assert meta["precision"] == "fp16" and meta["steps"] == 6
    assert all(torch.isfinite(torch.tensor(m["loss"])) for m in logged) and len(logged) == 2
    assert [s.is_enabled() for s in scalers] == [True]

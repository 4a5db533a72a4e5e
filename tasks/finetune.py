"""The one fine-tuning loop, shared by GLUE and SQuAD, with ELECTRA's recipe as defaults."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from datasets import Dataset
from tqdm.auto import tqdm

from pretrain.common import console, placement, stop
from pretrain.common.errors import UserError
from tasks import batching, finetune_state
from tasks.config import FinetuneConfig
from tasks.layers import encoder_layers, pretrained_part
from tasks.optim import build_optimizer, build_schedule


class FinetuneTask(Protocol):
    """What a benchmark gives the loop: tokenised features, and how to read and score outputs."""

    train: Dataset  # model inputs plus the loss's targets (labels, or start/end positions)
    evals: dict[str, Dataset]  # model inputs only; "validation*" splits are scored each epoch

    def example_outputs(self, output: Any, batch: dict[str, torch.Tensor]) -> list[np.ndarray]:
        """Per-example arrays to keep from one forward pass."""

    def score(self, split: str, outputs: list[np.ndarray]) -> dict[str, float]:
        """Metrics of a dev split from its outputs, in dataset order."""


@dataclass
class FinetuneResult:
    history: list[dict[str, float]]  # one row per epoch: train loss and dev metrics
    metrics: dict[str, dict[str, float]]  # final dev metrics per split
    outputs: dict[str, list[np.ndarray]]  # final outputs per eval split (dev and test)
    num_train_steps: int
    train_time_s: float
    train_examples_per_s: float
    train_tokens_per_s: float
    train_examples_seen: int  # examples stepped over, all epochs: what fine-tuning FLOPs are charged for


LOG_EVERY_STEPS = 20  # the progress loss, and the divergence check, read the device this often


class _Progress:
    """The loop's progress (console.progress_mode): a tqdm bar, plain lines, or nothing."""

    def __init__(self, label: str, num_steps: int, num_epochs: int, progress: bool | None):
        mode = console.progress_mode(progress)
        self.label, self.num_steps, self.num_epochs = label, num_steps, num_epochs
        self.lines = mode == "lines"
        self.bar = tqdm(total=num_steps, desc=label, unit="step", disable=mode != "bar")
        self.clock = console.LineClock()

    def log(self, step: int, epoch: int, loss: float, examples: int, train_time_s: float,
            dev: dict[str, dict[str, float]] | None = None) -> None:
        """The bar's loss; a line when one is due, and at every epoch's end with its dev scores."""
        self.bar.set_postfix(epoch=epoch, loss=f"{loss:.4f}")
        if not self.lines or (dev is None and not self.clock.due()):
            return
        rate = examples / max(train_time_s, 1e-9)
        text = (f"{self.label}: step {step}/{self.num_steps} epoch {epoch}/{self.num_epochs} loss {loss:.4f} "
                f"{rate:.1f} ex/s eta {console.eta(step, self.num_steps, train_time_s)}")
        if dev is not None:
            text += " | dev " + " ".join(f"{split} {name} {value:.4f}"
                                         for split, values in dev.items() for name, value in values.items())
        console.line(text)


def finetune(model: torch.nn.Module, task: FinetuneTask, config: FinetuneConfig, collate: Callable,
             on_epoch: Callable[[int, dict[str, float]], None] | None = None,
             progress: bool | None = None, label: str = "fine-tune",
             state: finetune_state.SeedState | None = None) -> FinetuneResult:
    """Train `model` on task.train for config.num_epochs, scoring dev splits after each epoch.

    `config` must be resolved (no None learning rate, decay or epochs). Seed before building the
    model: its new head is initialised from the global RNG. `label` names the run in its bar or lines.
    `state` keeps the seed's state after each epoch and on a stop signal, and resumes a saved one.
    """
    device = next(model.parameters()).device
    if config.reinit_layers:
        reinit_top_layers(model, config.reinit_layers)
    # One precision for training and evaluation: bf16 won both on the 2-core CPU (README, "Performance").
    precision = placement.resolve_precision(config.precision, device)
    autocast = placement.autocast(device, precision)
    scaler = placement.grad_scaler(device, precision)  # fp16's; a pass-through otherwise
    step_model = placement.compiled(model, device) if placement.resolve_compile(config.compile, device) \
        else model
    accelerator = device.type == "cuda"
    collate = batching.for_device(collate, config.max_length, accelerator)
    loader = batching.train_loader(task.train, config.batch_size, config.seed, config.group_by_length,
                                   collate, accelerator=accelerator)
    num_steps = math.ceil(len(loader) * config.num_epochs)
    optimizer = build_optimizer(model, config.learning_rate, config.layerwise_lr_decay,
                                config.weight_decay, config.adam_epsilon, config.lr_decay_depth,
                                config.optimizer)
    schedule = build_schedule(optimizer, num_steps, config.warmup_fraction, config.optimizer)
    state = state or finetune_state.SeedState(None)
    at = state.start(model, optimizer, schedule)  # a resumed seed goes on from its saved point
    history, metrics = at.history, at.metrics
    step, examples, tokens, train_time_s = at.step, at.examples, at.tokens, at.train_time_s
    shown = _Progress(label, num_steps, math.ceil(config.num_epochs), progress)
    shown.bar.update(step)

    def here(epoch: int, epoch_steps: int, loss_sum: torch.Tensor, time_s: float) -> finetune_state.LoopPoint:
        return finetune_state.LoopPoint(epoch, epoch_steps, step, examples, tokens, time_s, loss_sum, history,
                                        metrics)

    for epoch in range(at.epoch, math.ceil(config.num_epochs)):
        model.train()
        started = time.perf_counter()
        # Losses stay on the device: reading one per step would make the host wait for the GPU.
        loss_sum, epoch_steps = at.running(epoch, device)
        for batch in state.batches(loader, epoch):
            if step == num_steps:
                break
            examples += len(batch["input_ids"])
            tokens += int(batch["attention_mask"].sum())  # on the host, before the copy
            batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()}
            # forward and backward, the batch in config.gradient_accumulation_steps slices
            loss = _forward_backward(step_model, step_model is not model, batch, config, autocast, scaler)
            # clip, step
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            # log
            step += 1
            epoch_steps += 1
            loss_sum += loss.detach().float()
            shown.bar.update()
            if step % LOG_EVERY_STEPS == 0:
                shown.log(step, epoch + 1, _finite_mean(loss_sum, epoch_steps, step), examples,
                          train_time_s + time.perf_counter() - started)
            if stop.requested():  # SIGTERM or Ctrl-C: this step's state saved, then stop.Stopped
                time_s = train_time_s + time.perf_counter() - started
                state.stop(model, optimizer, schedule, here(epoch, epoch_steps, loss_sum, time_s))
        train_loss = _finite_mean(loss_sum, epoch_steps, step) if epoch_steps else math.nan
        train_time_s += time.perf_counter() - started
        dev = {split: data for split, data in task.evals.items() if split.startswith("validation")}
        outputs = predict(step_model, task, dev, config, collate, autocast)
        metrics = {split: task.score(split, outputs[split]) for split in dev}
        row = {"epoch": epoch + 1, "train_loss": train_loss}
        row |= {f"{split}_{name}": value
                for split, values in metrics.items() for name, value in values.items()}
        history.append(row)
        shown.log(step, epoch + 1, train_loss, examples, train_time_s, dev=metrics)
        if on_epoch is not None:
            on_epoch(epoch + 1, row)
        if epoch + 1 < math.ceil(config.num_epochs):  # after the last, the seed's record is what counts
            state.save(model, optimizer, schedule, here(epoch + 1, 0, 0.0, train_time_s))
    shown.bar.close()
    rest = {split: data for split, data in task.evals.items() if not split.startswith("validation")}
    outputs |= predict(step_model, task, rest, config, collate, autocast)
    return FinetuneResult(history, metrics, outputs, num_steps, train_time_s,
                          examples / max(train_time_s, 1e-9), tokens / max(train_time_s, 1e-9), examples)


def _forward_backward(step_model: torch.nn.Module, compiled: bool, batch: dict[str, torch.Tensor],
                      config: FinetuneConfig, autocast, scaler) -> torch.Tensor:
    """The batch's loss (detached), its gradient accumulated over gradient_accumulation_steps slices of
    the batch: less memory for the same batch, so the same optimiser step. HF heads compute the task
    loss from labels / start and end positions; the official recipe backpropagates the batch's sum
    (config.py), and `mean` weighs each slice's mean by its share of the batch."""
    size = len(batch["input_ids"])
    slices = min(config.gradient_accumulation_steps, size)  # a short last batch: one example a slice
    bounds = [round(i * size / slices) for i in range(slices + 1)]
    losses = []
    for start, end in itertools.pairwise(bounds):
        part = {key: value[start:end] for key, value in batch.items()} if slices > 1 else batch
        if compiled:
            placement.mark_step()
        with autocast:
            loss = step_model(**part).loss
        weight = (end - start) if config.loss_reduction == "sum" else (end - start) / size
        scaler.scale(loss * weight if weight != 1 else loss).backward()
        losses.append((loss.detach(), (end - start) / size))
    return losses[0][0] if slices == 1 else sum(loss.float() * share for loss, share in losses)


def reinit_top_layers(model: torch.nn.Module, count: int) -> None:
    """The top `count` encoder layers drawn afresh by the model's own initialiser (global RNG)."""
    pretrained = pretrained_part(model)
    layers = encoder_layers(model)
    if layers is None:
        raise UserError(f"reinit_layers needs the model's list of layers, and {type(pretrained).__name__} "
                        "has no module list of them; leave reinit_layers at 0")
    if count > len(layers):
        raise UserError(f"reinit_layers={count} but the model has {len(layers)} layers; choose at most "
                        f"{len(layers)}")
    for layer in layers[len(layers) - count:]:
        for tensor in [*layer.parameters(), *layer.buffers()]:  # transformers 5 skips loaded weights
            if hasattr(tensor, "_is_hf_initialized"):
                tensor._is_hf_initialized = False
        layer.apply(pretrained._init_weights)


def _finite_mean(loss_sum: torch.Tensor, count: int, step: int) -> float:
    """The mean loss so far this epoch; a non-finite one (a diverging run) stops training."""
    mean = float(loss_sum) / count
    if not math.isfinite(mean):
        raise FloatingPointError(f"training loss became {mean} by step {step}; lower learning_rate")
    return mean


@torch.no_grad()
def predict(model: torch.nn.Module, task: FinetuneTask, datasets: dict[str, Dataset],
            config: FinetuneConfig, collate: Callable, autocast) -> dict[str, list[np.ndarray]]:
    """Per-example outputs for each split, in dataset order (batched longest first)."""
    model.eval()
    device = next(model.parameters()).device
    results = {}
    for split, dataset in datasets.items():
        order = batching.eval_order(dataset)
        kept: list[np.ndarray] = []
        for batch in batching.eval_loader(dataset, config.eval_batch_size, order, collate):
            batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()}
            with autocast:
                output = model(**batch)
            kept.extend(task.example_outputs(output, batch))
        restored = [None] * len(order)
        for position, index in enumerate(order):
            restored[index] = kept[position]
        results[split] = restored
    return results

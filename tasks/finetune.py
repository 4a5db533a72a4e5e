"""The one fine-tuning loop, shared by every kind of task, with ELECTRA's recipe as defaults."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import numpy as np
import torch
from datasets import Dataset
from tqdm.auto import tqdm

from foundation.infra.errors import UserError
from foundation.training import console, placement
from foundation.training.optimization import build_schedule
from tasks import batching, data_parallel, finetune_state
from tasks.best_epoch import BestEpoch
from tasks.config import FinetuneConfig
from tasks.layers import encoder_layers, pretrained_part
from tasks.optim import build_optimizer


class TaskAdapter(Protocol):
    """What a kind of task gives the loop: tokenised features, and how to read and score outputs."""

    train: Dataset  # model inputs plus the loss's targets (labels, or start/end positions)
    evals: dict[str, Dataset]  # model inputs only; "validation*" splits are scored each epoch
    # batches are padded to a multiple of this (None: to their longest; a GPU pads to length buckets
    # whatever it is, tasks/batching.for_device)
    pad_to_multiple_of: int | None

    def example_outputs(self, output: Any, batch: dict[str, torch.Tensor]) -> list[np.ndarray]:
        """Per-example arrays to keep from one forward pass."""

    def score(self, split: str, outputs: list[np.ndarray]) -> dict[str, float]:
        """Metrics of a dev split from its outputs, in dataset order."""

    # Optional: an adapter whose `class_weights` is set has `loss(logits, labels)`, which the loop trains on
    # in place of the head's own loss (tasks/text.py); one without trains on the head's.
    # Optional: an adapter with `documents(split, outputs)` reads long texts as windows (long_text=windows):
    # it turns the rows' outputs into each text's (the mean of its windows' logits) before anything scores.


def _class_weighted(task: TaskAdapter, config: FinetuneConfig) -> Callable | None:
    """The adapter's weighted loss where class_weights is set; a task without one refuses the setting."""
    if getattr(task, "class_weights", None) is not None:
        return task.loss
    if config.class_weights != "none":
        class_weights_refused(config)
    return None


def long_text_refused(config: FinetuneConfig) -> NoReturn:
    """The one line for long_text=windows on a task that cannot read a text as windows."""
    raise UserError(f"long_text={config.long_text} reads long texts of your own one-text classification, "
                    "regression and multi-label tasks (harness run text) as windows; leave "
                    "long_text=truncate for this task")


def class_weights_refused(config: FinetuneConfig) -> NoReturn:
    """The one line for class_weights on a task whose loss takes none."""
    raise UserError(f"class_weights={config.class_weights} weighs the loss of your own text's "
                    "classification and multi-label tasks (harness run text) only; leave "
                    "class_weights=none for this task")


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
    chosen_epoch: int | None = None  # select_epoch=best: the epoch (from 1) whose metrics and model these are


LOG_EVERY_STEPS = 20  # the progress loss, and the divergence check, read the device this often


class _ProgressDisplay:
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


@dataclass(frozen=True)
class LoopIO:
    """What a seed's loop reports to and keeps its state in, beside what it trains."""

    on_epoch: Callable[[int, dict[str, float]], None] | None = None  # each epoch's history row
    progress: bool | None = None  # console.progress_mode: a bar, lines, or nothing
    label: str = "fine-tune"  # names the seed in its bar or lines
    # kept after each epoch and on a stop signal, and a saved one resumed; None keeps nothing
    state: finetune_state.SeedState | None = None


def finetune(model: torch.nn.Module, task: TaskAdapter, config: FinetuneConfig, collate: Callable,
             io: LoopIO = LoopIO()) -> FinetuneResult:
    """Train `model` on task.train for config.num_epochs, scoring dev splits after each epoch.

    `config` must be resolved (no None learning rate, decay or epochs). Seed before building the
    model: its new head is initialised from the global RNG.
    """
    loop = _SeedLoop(model, task, config, collate, io)
    for epoch in range(loop.at.epoch, math.ceil(config.num_epochs)):
        train_loss, train_time_s = loop.train_epoch(epoch)
        loop.end_epoch(epoch, train_loss, train_time_s)
    return loop.result()


class _SeedLoop:
    """One seed's training, set up for `finetune`: its model, data, optimiser and where it stands."""

    def __init__(self, model: torch.nn.Module, task: TaskAdapter, config: FinetuneConfig, collate: Callable,
                 io: LoopIO):
        self.model, self.task, self.config, self.io = model, task, config, io
        self.device = device = next(model.parameters()).device
        if config.reinit_layers:
            reinit_top_layers(model, config.reinit_layers)
        # One precision for training and evaluation: bf16 won both on the 2-core CPU (README, "Performance").
        precision = placement.resolve_precision(config.precision, device)
        self.autocast = placement.autocast(device, precision)
        self.scaler = placement.grad_scaler(device, precision)  # fp16's; a pass-through otherwise
        self.step_model = placement.compiled(model, device) \
            if placement.resolve_compile(config.compile, device) else model
        # under torchrun, one seed across processes (tasks/data_parallel.py): DDP trains, rank 0 evaluates
        self.replicas = data_parallel.Replicas.current(device)
        self.train_model = self.replicas.step_model(model, self.step_model)
        accelerator = device.type == "cuda"
        self.collate = batching.for_device(collate, config.max_length, accelerator)
        self.loader = batching.train_loader(task.train, config.batch_size, config.seed,
                                            config.group_by_length, self.collate, accelerator=accelerator)
        self.num_steps = math.ceil(len(self.loader) * config.num_epochs)
        self.optimizer = build_optimizer(model, config.learning_rate, config.layerwise_lr_decay,
                                         config.weight_decay, config.adam_epsilon, config.lr_decay_depth,
                                         config.optimizer)
        self.schedule = build_schedule(self.optimizer, self.num_steps, config.warmup_fraction,
                                       config.optimizer)
        self.loss = _class_weighted(task, config)  # None: the head's own loss
        if config.long_text != "truncate" and not hasattr(task, "documents"):
            long_text_refused(config)
        self.state = io.state or finetune_state.SeedState(None)
        # what a seed's state keeps besides the RNGs and the point: fp16's loss scale too, where it is on
        self.parts = {"model": model, "optimizer": self.optimizer, "schedule": self.schedule} | \
            ({"scaler": self.scaler} if self.scaler.is_enabled() else {})
        self.best = BestEpoch() if config.select_epoch == "best" else None  # saved and resumed as a part
        if self.best is not None:
            self.parts["best"] = self.best
        self.replicas.seed_own_stream(config.seed)  # after the head is drawn: dropout's stream
        self.at = at = self.state.start(self.parts, self.replicas.context)  # a resumed seed goes on
        self.history, self.metrics = at.history, at.metrics
        self.step, self.examples, self.tokens = at.step, at.examples, at.tokens
        self.train_time_s = at.train_time_s
        self.outputs: dict[str, list[np.ndarray]] = {}
        self.shown = _ProgressDisplay(io.label, self.num_steps, math.ceil(config.num_epochs), io.progress)
        self.shown.bar.update(self.step)

    def here(self, epoch: int, epoch_steps: int, loss_sum: torch.Tensor | float,
             time_s: float) -> finetune_state.LoopPoint:
        return finetune_state.LoopPoint(epoch, epoch_steps, self.step, self.examples, self.tokens, time_s,
                                        loss_sum, self.history, self.metrics)

    def train_epoch(self, epoch: int) -> tuple[float, float]:
        """The epoch's steps (a resumed one's rest); its mean train loss and its own training time."""
        config, optimizer, scaler = self.config, self.optimizer, self.scaler
        self.model.train()
        started = time.perf_counter()
        # Losses stay on the device: reading one per step would make the host wait for the GPU.
        loss_sum, epoch_steps = self.at.running(epoch, self.device)
        for batch in self.state.batches(self.loader, epoch):
            if self.step == self.num_steps:
                break
            self.examples += len(batch["input_ids"])
            self.tokens += int(batch["attention_mask"].sum())  # on the host, before the copy
            shard = self.replicas.shard(batch)  # this process's rows of the global batch
            batch = {key: value.to(self.device, non_blocking=True) for key, value in shard.rows.items()}
            # forward and backward, the batch in config.gradient_accumulation_steps slices
            loss = _forward_backward(self.train_model, self.step_model is not self.model, batch, config,
                                     self.autocast, scaler, self.loss, shard)
            loss = self.replicas.global_loss(loss, shard)
            # clip, step
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()
            self.schedule.step()
            optimizer.zero_grad(set_to_none=True)
            # log
            self.step += 1
            epoch_steps += 1
            loss_sum += loss.detach().float()
            self.shown.bar.update()
            if self.step % LOG_EVERY_STEPS == 0:
                self.shown.log(self.step, epoch + 1, _finite_mean(loss_sum, epoch_steps, self.step),
                               self.examples, self.train_time_s + time.perf_counter() - started)
            if self.replicas.stop_requested():  # SIGTERM or Ctrl-C: this step's state saved, then Stopped
                time_s = self.train_time_s + time.perf_counter() - started
                self.state.stop(self.parts, self.here(epoch, epoch_steps, loss_sum, time_s))
        train_loss = _finite_mean(loss_sum, epoch_steps, self.step) if epoch_steps else math.nan
        return train_loss, time.perf_counter() - started

    def end_epoch(self, epoch: int, train_loss: float, train_time_s: float) -> None:
        """Score the dev splits, add the epoch's history row, and keep the state for a resume."""
        self.train_time_s += train_time_s
        dev = {split: data for split, data in self.task.evals.items() if split.startswith("validation")}
        if self.replicas.is_main:  # the others go on to the next step's all-reduce and wait there
            self.outputs = predict(self.step_model, self.task, dev, self.config, self.collate, self.autocast)
            self.metrics = {split: self.task.score(split, self.outputs[split]) for split in dev}
            if self.best is not None:
                self.best.offer(epoch + 1, self.metrics, self.model)
        row = {"epoch": epoch + 1, "train_loss": train_loss}
        row |= {f"{split}_{name}": value
                for split, values in self.metrics.items() for name, value in values.items()}
        self.history.append(row)
        self.shown.log(self.step, epoch + 1, train_loss, self.examples, self.train_time_s, dev=self.metrics)
        if self.io.on_epoch is not None:
            self.io.on_epoch(epoch + 1, row)
        if epoch + 1 < math.ceil(self.config.num_epochs):  # after the last, the seed's record is what counts
            self.state.save(self.parts, self.here(epoch + 1, 0, 0.0, self.train_time_s))

    def result(self) -> FinetuneResult:
        """The last (select_epoch=best: the best) epoch's dev metrics and outputs, the other splits' outputs
        from that epoch's model, and the counters."""
        self.shown.bar.close()
        if self.best is not None and self.replicas.is_main and \
                self.best.restore(self.model, math.ceil(self.config.num_epochs)):
            dev = {split: data for split, data in self.task.evals.items() if split.startswith("validation")}
            self.outputs = predict(self.step_model, self.task, dev, self.config, self.collate, self.autocast)
            self.metrics = {split: self.task.score(split, self.outputs[split]) for split in dev}
        rest = {split: data for split, data in self.task.evals.items()
                if not split.startswith("validation") and self.replicas.is_main}
        outputs = self.outputs | predict(self.step_model, self.task, rest, self.config, self.collate,
                                         self.autocast)
        time_s = max(self.train_time_s, 1e-9)
        return FinetuneResult(self.history, self.metrics, outputs, self.num_steps, self.train_time_s,
                              self.examples / time_s, self.tokens / time_s, self.examples,
                              self.best.epoch if self.best is not None else None)


def _forward_backward(step_model: torch.nn.Module, compiled: bool, batch: dict[str, torch.Tensor],
                      config: FinetuneConfig, autocast, scaler, task_loss: Callable | None = None,
                      shard: data_parallel.Shard | None = None) -> torch.Tensor:
    """The batch's loss (detached), its gradient accumulated over gradient_accumulation_steps slices of
    the batch: less memory for the same batch, so the same optimiser step. HF heads compute the task
    loss from labels / start and end positions, or `task_loss(logits, labels)` does (class weights); the
    official recipe backpropagates the batch's sum (config.py), and `mean` weighs each slice's mean by
    its share of the batch. Under DDP `batch` is this process's `shard` of the global batch, whose
    weights make DDP's average of the processes' gradients the global batch's (Shard.weight)."""
    shard = shard or data_parallel.Shard(batch, 1.0)
    slices = placement.batch_slices(batch, config.gradient_accumulation_steps)  # a short last batch: fewer
    losses = []
    for index, (share, part) in enumerate(slices):
        if compiled:
            placement.mark_step()
        with data_parallel.accumulating(step_model, last=index == len(slices) - 1):
            with autocast:
                if task_loss is None:
                    loss = step_model(**part).loss
                else:
                    inputs = {key: value for key, value in part.items() if key != "labels"}
                    loss = task_loss(step_model(**inputs).logits, part["labels"])
            weight = shard.weight(len(part["input_ids"]), share, config.loss_reduction)
            scaler.scale(loss * weight if weight != 1 else loss).backward()
        losses.append((loss.detach(), share))
    return losses[0][0] if len(slices) == 1 else sum(loss.float() * share for loss, share in losses)


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
def predict(model: torch.nn.Module, task: TaskAdapter, datasets: dict[str, Dataset],
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
        results[split] = task.documents(split, restored) if hasattr(task, "documents") else restored
    return results

"""The pre-training loop: `train(plan, on_log)` for one process or many; `pretrain(config)` plans first.

Labelled steps as in nanoGPT's train.py: budget and lr, batch, forward (bf16 autocast where
supported), backward, clip, step, count, log, checkpoint. Under `torchrun` every process runs
this; rank 0 prepares the data first, writes checkpoints and calls `on_log`. The plan (resolved
config, corpus, resume point: pretrain/planning.py) is made before and checked nowhere here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from foundation.models import pretrain_meta
from foundation.models.layout import PRETRAIN_META
from foundation.models.pretrain_meta import PretrainMeta
from foundation.training import distributed as dist
from foundation.training import placement, stop
from pretrain import checkpoint as ckpt
from pretrain import planning, probe
from pretrain.budget import (
    BudgetCounters,
    budget_fraction,
    learning_rate,
    schedule_fraction,
    stage_fraction,
    step_flops,
)
from pretrain.config import PretrainConfig
from pretrain.corpus_source import CorpusSource
from pretrain.data import BatchStream, Prefetching
from pretrain.metric_window import MetricWindow, final_metrics, merge_slices
from pretrain.planning import Plan
from pretrain.prepare import TrainingSetup, build_setup, prepare_examples

LogCallback = Callable[[int, dict[str, float]], None]


def pretrain(config: PretrainConfig, on_log: LogCallback | None = None,
             corpus: CorpusSource | None = None) -> PretrainMeta:
    """Plan (pretrain/planning.py), then train: a run for a caller that holds no output lock."""
    return train(planning.make(config, corpus), on_log)


def train(plan: Plan, on_log: LogCallback | None = None) -> PretrainMeta:
    """Train until the plan's first budget is spent; write OUT and return its pretrain_meta.json dict."""
    context = dist.start(plan.config.device)
    try:
        return _train(plan, context, on_log or (lambda step, metrics: None))
    finally:
        dist.teardown(context)


@dataclass
class _Loop:
    """What the loop works on, set up once from the plan (`_set_up`); its counts change every step."""

    plan: Plan
    context: dist.Context
    setup: TrainingSetup
    model: torch.nn.Module  # setup.model, or its DDP wrapper, or compiled
    stream: Prefetching
    counters: BudgetCounters
    window: MetricWindow
    probe_batch: dict[str, torch.Tensor] | None  # rank 0's fixed batch of the probes
    probed_at: float = -1.0  # the budget fraction at the last probe


def _train(plan: Plan, context: dist.Context, on_log: LogCallback) -> PretrainMeta:
    loop = _set_up(plan, context)
    config, counters = plan.config, loop.counters
    # elapsed_s goes on from the checkpoint, so wall time adds up over resumes. A killed invocation's
    # steps after its last checkpoint are redone and counted once; their lost first attempt and each
    # invocation's set-up are not counted: elapsed_s is also the clock of max_time_s and the schedule
    # under it, which must not differ between a resumed run and an unbroken one.
    loop_start, last_save = time.perf_counter() - counters.elapsed_s, counters.elapsed_s
    fraction = budget_fraction(config, counters)
    stop.arm()  # from here a SIGTERM or Ctrl-C stops at the next step, with a checkpoint
    while fraction < 1.0:
        lr = _step(loop)
        counters.elapsed_s = dist.from_main(context, time.perf_counter() - loop_start)
        fraction = budget_fraction(config, counters)
        # Checkpoint, log.
        due = (config.checkpoint_every_steps and counters.step % config.checkpoint_every_steps == 0) or \
            counters.elapsed_s - last_save >= config.checkpoint_every_s
        if due and fraction < 1.0:
            _save(loop)
            last_save = counters.elapsed_s
        if counters.step % config.log_every_steps == 0 or fraction >= 1.0:
            _log(loop, lr, fraction, on_log)
        if fraction < 1.0 and dist.any_process(context, stop.requested() is not None):  # SIGTERM, Ctrl-C
            if not due:  # this step's checkpoint (unless just written), then a line on how to resume
                _save(loop)
            ckpt.stop_here(plan.output, counters.step)
    return _save(loop, final=True)


def _set_up(plan: Plan, context: dist.Context) -> _Loop:
    """Tokenised data, networks and optimiser, restored from the plan's checkpoint if it has one."""
    config, resume = plan.config, plan.resume
    tokenizer, examples = prepare_examples(config, context, list(plan.corpus.files))
    setup = build_setup(config, context, tokenizer)
    setup.corpus = plan.corpus.provenance
    if resume is not None:  # continued to other budgets: the schedule follows the new ones
        setup.extended = ckpt.extensions(resume)
    # Every batch padded to seq_len: packed examples nearly fill it anyway, and fixed shapes let a
    # compiled step (and CUDA graphs) serve every step.
    stream = Prefetching(BatchStream(examples, config.batch_size, config.seed, tokenizer.pad_token_id,
                                     context.rank, context.world_size, width=config.seq_len))
    counters = BudgetCounters() if resume is None else _restore(resume.folder, setup, stream, context)
    probe_batch = probe.fixed_batch(examples, config, tokenizer.pad_token_id, context.device) \
        if context.is_main else None
    model = setup.model
    if context.distributed:
        model = torch.nn.parallel.DistributedDataParallel(
            setup.model, find_unused_parameters=config.objective == "two-stage")
    if setup.compiled:
        model = placement.compiled(model, setup.device, cuda_graphs=not context.distributed)
    window = MetricWindow()
    if resume is not None:  # a resumed run that is already done still reports its metrics
        window.last = pretrain_meta.read(resume.folder / PRETRAIN_META).get("metrics", {})
    return _Loop(plan, context, setup, model, stream, counters, window, probe_batch)


def _step(loop: _Loop) -> float:
    """One optimiser step at the rate the budget spent so far gives, counted; returns that rate."""
    config, setup, counters = loop.plan.config, loop.setup, loop.counters
    # Stage switch (two-stage only): discriminator starts as a copy of the trained generator.
    scheduled = schedule_fraction(config, counters)  # wall time only if it is the sole budget
    if config.objective == "two-stage" and counters.stage == 1 and scheduled >= config.two_stage_switch:
        setup.model.start_second_stage()
        counters.stage = 2
    # Learning rate from the fraction of the budget used.
    lr = learning_rate(config, stage_fraction(config, scheduled, counters.stage))
    for group in setup.optimizer.param_groups:  # checkpoints from before lr_scale have none: 1
        group["lr"] = lr * group.get("lr_scale", 1.0)
    # Batch, then forward, backward, clip, step.
    batch, batch_tokens = loop.stream.next_batch()
    device = loop.context.device
    if device.type == "cuda":  # a copy from pinned memory does not block the host
        batch = {k: v.pin_memory() for k, v in batch.items()}
    batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    loss, stats, grad_norm = train_step(setup, loop.model, batch, counters.stage)
    # Count.
    counters.step += 1
    counters.tokens += batch_tokens
    counters.flops += step_flops(config.objective, counters.stage, setup.discriminator_shape,
                                 setup.generator_shape, config.batch_size, batch["input_ids"].shape[1])
    loop.window.add(loss, stats, batch_tokens, grad_norm)
    return lr


def _log(loop: _Loop, lr: float, fraction: float, on_log: LogCallback) -> None:
    """The window's metrics (every process must call this), with the probes', to rank 0's `on_log`."""
    context = loop.context
    metrics = loop.window.flush(context, loop.counters, lr, fraction)
    # The probes run two forward passes and read the device: at most every PROBE_SPACING of the
    # budget (every log of a short run, every ~40th step of a 4,000-step GPU run), and at the end.
    if context.is_main and (fraction >= 1.0 or fraction - loop.probed_at >= probe.PROBE_SPACING):
        loop.probed_at = fraction
        auc = probe.unigram_auc(loop.setup, loop.probe_batch)
        if auc is not None:  # the detector on a fixed corruption source, beside disc_auc
            metrics[probe.UNIGRAM_AUC] = auc  # metrics is window.last: kept for the meta
        # has the encoder collapsed? (all positions alike)
        metrics[probe.POSITION_COSINE] = probe.collapse(loop.setup, loop.probe_batch)
    if context.is_main:
        on_log(loop.counters.step, metrics)


def train_step(setup: TrainingSetup, model: torch.nn.Module, batch: dict[str, torch.Tensor], stage: int = 1):
    """Forward, backward, clip, optimiser step; `model` is `setup.model`, its DDP wrapper or compiled.

    Nothing here waits for the device: losses, statistics and the gradient norm stay tensors until
    a logging step reads them.
    """
    loss, stats = _forward_backward(setup, model, batch, stage)
    for p in setup.model.idle_parameters(stage):
        p.grad = None
    setup.scaler.unscale_(setup.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(setup.model.parameters(), setup.config.max_grad_norm)
    setup.scaler.step(setup.optimizer)
    setup.scaler.update()
    setup.optimizer.zero_grad(set_to_none=True)
    return loss.detach(), stats, grad_norm


def _forward_backward(setup: TrainingSetup, model: torch.nn.Module, batch: dict[str, torch.Tensor],
                      stage: int):
    """The batch's (loss, stats), its gradient accumulated over `gradient_accumulation_steps` slices: the
    same optimiser step in less memory. Each slice's loss (a mean over its tokens) is weighted by its share
    of the examples, which is its share of the tokens as packed sequences nearly all fill seq_len."""
    slices = placement.batch_slices(batch, setup.config.gradient_accumulation_steps)  # a DDP share: fewer
    parts = []
    for index, (share, part) in enumerate(slices):
        # DDP averages gradients across processes in the last slice's backward only
        last = index == len(slices) - 1
        sync = contextlib.nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()
        if setup.compiled:
            placement.mark_step()
        with sync:
            with setup.autocast():
                loss, stats = model(**part, stage=stage)
            setup.scaler.scale(loss * share if len(slices) > 1 else loss).backward()
        if len(slices) > 1:  # copies: a CUDA-graphed slice's outputs are overwritten by the next slice's
            parts.append((share, loss.detach().clone(), {key: value.clone() for key, value in stats.items()}))
    return (loss, stats) if len(slices) == 1 else merge_slices(parts)


def _save(loop: _Loop, final: bool = False) -> PretrainMeta:
    """Checkpoint (and, when final, publish) from rank 0; every process must call it."""
    config, context, setup, counters = loop.plan.config, loop.context, loop.setup, loop.counters
    rng_states = dist.gather(context, ckpt.rng_state())
    _check_replicas_agree(setup, context)
    meta = setup.meta(counters, final_metrics(loop.window.last), context.world_size)
    if context.is_main:  # "progress" holds the BudgetCounters: the key older checkpoints have
        state = {"config": asdict(config), "model": setup.model.state_dict(),
                 "optimizer": setup.optimizer.state_dict(), "progress": counters.state_dict(),
                 "data": loop.stream.state_dict(), "rng": rng_states, "world_size": context.world_size}
        if setup.scaler.is_enabled():  # fp16's loss scale, so a resumed run steps as an unbroken one
            state["scaler"] = setup.scaler.state_dict()
        folder = ckpt.write_checkpoint(loop.plan.output, counters.step, state, setup.export, meta,
                                       config.keep_checkpoints)
        if final:
            ckpt.publish(loop.plan.output, folder)
    dist.barrier(context)
    return meta


def _restore(folder: Path, setup: TrainingSetup, stream: BatchStream,
             context: dist.Context) -> BudgetCounters:
    state = ckpt.load_state(folder)
    setup.model.load_state_dict(state["model"])
    setup.optimizer.load_state_dict(state["optimizer"])
    stream.load_state_dict(state["data"])
    if "scaler" in state:  # an fp16 run's; a scaler that is off (bf16, fp32) ignores it
        setup.scaler.load_state_dict(state["scaler"])
    if len(state["rng"]) == context.world_size:
        ckpt.restore_rng(state["rng"][context.rank])
    else:  # another process count: the data order still resumes exactly, the random draws cannot
        torch.manual_seed(state["progress"]["step"] * 7919 + context.rank)
    return BudgetCounters(**state["progress"])


def _check_replicas_agree(setup: TrainingSetup, context: dist.Context) -> None:
    if not context.distributed:
        return
    with torch.no_grad():
        checksum = sum(float(p.double().sum()) for p in setup.model.parameters())
    sums = dist.gather(context, checksum)
    if max(sums) - min(sums) > 1e-6 * max(1.0, abs(sums[0])):
        raise RuntimeError(f"DDP replicas diverged (parameter sums {sums})")

"""One fine-tuning seed across the processes `torchrun` starts: DDP at the recipe's global batch.

Every process draws the same global batches (the sampler is seeded by the seed alone), padded as one
process pads them, and trains on its own contiguous rows of each; DistributedDataParallel all-reduces
the gradients, so every process takes the same optimiser steps as one process would, as many and on the
same schedule. The loop's counters (examples, tokens) count the global batch, so throughput and FLOPs
are the run's. One process is world_size 1, where each method leaves things as they are.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.distributed as dist

from foundation.training import distributed, placement, stop

# Rank r > 0 draws its dropout masks from seed + RANK_STRIDE * r (pre-training's stride): a stream of
# its own, which another seed's rank 0 (seed + RANK_STRIDE * r would be that seed) never reaches in practice.
RANK_STRIDE = 7919


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank `rank`'s own random stream (rank 0: the seed itself, as one process)."""
    return seed + RANK_STRIDE * rank


@dataclass(frozen=True)
class Shard:
    """This process's rows of one global batch."""

    rows: dict[str, torch.Tensor]
    fraction: float  # its examples over the global batch's; 0: a stand-in row (Replicas.shard)
    world_size: int = 1

    def weight(self, examples: int, share: float, reduction: str) -> float:
        """What a slice's loss (a mean over its `examples`, `share` of this process's rows) is multiplied
        by before backward.

        In one process "sum" backpropagates the batch's summed loss (a slice's mean times its examples)
        and "mean" the batch's mean (a slice's mean times its share). DDP then averages the processes'
        gradients: it divides their sum by world_size. Multiplying by world_size here undoes that, so
        "sum" gives the global batch's sum, and "mean", a slice's share of the global batch being share
        times fraction, the global batch's mean, even where a short last batch splits unevenly. A
        stand-in counts for nothing."""
        if not self.fraction:
            return 0.0
        if reduction == "sum":
            return examples * self.world_size
        return share * self.fraction * self.world_size


class Replicas:
    """This process's place among the processes that train one seed, and what the loop asks of them."""

    def __init__(self, context: distributed.Context):
        self.context = context

    @classmethod
    def current(cls, device: torch.device) -> Replicas:
        """The process group `torchrun` started (harness/finetuning/orchestration.py joined it); one
        process without."""
        return cls(distributed.current(device))

    @property
    def is_main(self) -> bool:
        """Rank 0: it alone evaluates, saves the seed's state and reports."""
        return self.context.is_main

    def step_model(self, model: torch.nn.Module, evaluated: torch.nn.Module) -> torch.nn.Module:
        """What the loop trains through: one process, the model it evaluates (compiled or not); several,
        DDP's wrapper, compiled where `evaluated` is, without CUDA graphs (DDP's hooks run between them)."""
        if not self.context.distributed:
            return evaluated
        wrapped = self.wrap(model)
        return wrapped if evaluated is model else placement.compiled(wrapped, self.context.device,
                                                                     cuda_graphs=False)

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """DDP around `model` (rank 0's weights broadcast to all); the model itself for one process.

        Only training runs through it: rank 0 evaluates alone on the bare model, where DDP's forward
        would wait for the other processes' forever."""
        if not self.context.distributed:
            return model
        device = self.context.device
        return torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)

    def shard(self, batch: dict[str, torch.Tensor]) -> Shard:
        """Rank r's contiguous rows of the global batch, r/N to (r+1)/N of it.

        A short last batch may leave a process no row: it then steps on the batch's first row weighted
        0, so that it still joins the gradients' all-reduce (a process that skips it hangs the others)."""
        if not self.context.distributed:
            return Shard(batch, 1.0)
        size, count, rank = len(batch["input_ids"]), self.context.world_size, self.context.rank
        start, end = round(rank * size / count), round((rank + 1) * size / count)
        if start == end:
            return Shard({key: value[:1] for key, value in batch.items()}, 0.0, count)
        return Shard({key: value[start:end] for key, value in batch.items()}, (end - start) / size, count)

    def global_loss(self, loss: torch.Tensor, shard: Shard) -> torch.Tensor:
        """The global batch's mean loss from this process's shard's mean: every process the same value.

        One small all-reduce a step, queued on the device's stream (no wait on the host under nccl)."""
        if not self.context.distributed:
            return loss
        total = loss.detach().float() * shard.fraction
        dist.all_reduce(total)
        return total

    def stop_requested(self) -> bool:
        """Whether a signal asked any process to stop: every process stops at the same step."""
        return distributed.any_process(self.context, stop.requested() is not None)

    def seed_own_stream(self, seed: int) -> None:
        """Rank r > 0's dropout stream (RANK_STRIDE); rank 0 keeps the seed's, as one process."""
        if self.context.rank:
            torch.manual_seed(rank_seed(seed, self.context.rank))


def accumulating(model: torch.nn.Module, last: bool):
    """Gradient accumulation's context for a slice: DDP all-reduces in the step's last slice only."""
    return contextlib.nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()

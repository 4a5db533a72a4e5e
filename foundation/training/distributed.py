"""Process group for `torchrun`: gloo on CPU, nccl on GPU; a no-op for a single process.

Both training loops use it (pre-training's, and fine-tuning's one seed across processes).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from foundation.training import placement


@dataclass(frozen=True)
class Context:
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def world_size() -> int:
    """How many processes `torchrun` started for this run (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def local_rank() -> int:
    """This process's index on its machine under `torchrun` (0 without): its GPU's index."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def launch_command() -> str | None:
    """How a user starts this command again: `harness`, or torchrun's form for one machine; None in a
    torchrun process but rank 0, which speaks for them all."""
    if world_size() == 1:
        return "harness"
    if int(os.environ.get("RANK", "0")):
        return None
    return f"torchrun --nproc_per_node {os.environ.get('LOCAL_WORLD_SIZE', world_size())} -m harness.cli"


def start(device_setting: str) -> Context:
    """Join the process group that `torchrun` describes in the environment, if any."""
    processes = world_size()
    device = placement.pick_device(device_setting, local_rank())
    if processes > 1 and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        # Rank 0 tokenises the corpus while the others wait at a barrier: allow hours, not 30 min.
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo",
                                timeout=timedelta(hours=6))
    rank = dist.get_rank() if dist.is_initialized() else 0
    return Context(rank, processes, device)


@contextlib.contextmanager
def process_group(device_setting: str) -> Iterator[Context]:
    """`start`'s Context while the block runs; the group is left at its end where the block joined it
    (a process that left torchrun's group cannot join it again, so one joined before stays)."""
    joins = world_size() > 1 and not dist.is_initialized()
    context = start(device_setting)
    try:
        yield context
    finally:
        if joins:
            teardown(context)


def current(device: torch.device) -> Context:
    """The process group `start` joined, as a Context on `device`; one process where none was joined."""
    if not dist.is_initialized():
        return Context(0, 1, device)
    return Context(dist.get_rank(), dist.get_world_size(), device)


def teardown(context: Context) -> None:
    if context.distributed and dist.is_initialized():
        dist.destroy_process_group()


def barrier(context: Context) -> None:
    if context.distributed:
        dist.barrier()


def sum_across(context: Context, values: torch.Tensor) -> torch.Tensor:
    """Element-wise sum over processes (float64 on the process's device)."""
    values = values.to(context.device, torch.float64)
    if context.distributed:
        dist.all_reduce(values)
    return values.cpu()


def from_main(context: Context, value: float) -> float:
    """Rank 0's value everywhere, so that time-based decisions agree across processes."""
    if not context.distributed:
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=context.device)
    dist.broadcast(tensor, src=0)
    return float(tensor.item())


def any_process(context: Context, flag: bool) -> bool:
    """Whether any process's flag is set, the same answer everywhere (a stop asked of one stops all)."""
    if not context.distributed:
        return flag
    return bool(sum_across(context, torch.tensor([float(flag)]))[0] > 0)


def gather(context: Context, obj) -> list:
    """Every process's `obj`, in rank order."""
    if not context.distributed:
        return [obj]
    result = [None] * context.world_size
    dist.all_gather_object(result, obj)
    return result

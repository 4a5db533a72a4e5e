"""Process group for `torchrun`: gloo on CPU, nccl on GPU; a no-op for a single process."""

from __future__ import annotations

import os
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


def start(device_setting: str) -> Context:
    """Join the process group that `torchrun` describes in the environment, if any."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = placement.pick_device(device_setting, local_rank)
    if world_size > 1 and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        # Rank 0 tokenises the corpus while the others wait at a barrier: allow hours, not 30 min.
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo",
                                timeout=timedelta(hours=6))
    rank = dist.get_rank() if dist.is_initialized() else 0
    return Context(rank, world_size, device)


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

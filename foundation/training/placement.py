"""Where a run computes and in what precision: the one rule for fine-tuning and pre-training.

Part of the training kit (CONTRIBUTING.md): imports nothing from the project.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path

import torch


def pick_device(setting: str, local_rank: int = 0) -> torch.device:
    """'auto': this process's GPU if there is one, else the CPU."""
    if setting == "auto":
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(setting)
    if device.type == "cuda" and device.index is None:
        device = torch.device(f"cuda:{local_rank}")
    return device


def resolve_precision(setting: str, device: torch.device) -> str:
    """'auto': bf16 autocast where the hardware has bf16 (CPU: AVX512-BF16/AMX); a GPU without it
    (V100, T4: torch would emulate bf16, slowly) gets fp16 with a gradient scaler; else fp32."""
    if setting != "auto":
        return setting
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"
    return "bf16" if device.type == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported() else "fp32"


def cpu_kind() -> str:
    """This machine's CPU in words, for every speed figure: its cores, model name, and whether it has
    AVX512-BF16 and AMX (what bf16 speed on a CPU depends on), from /proc/cpuinfo where there is one."""
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = fields.get("flags", "").split()
    features = ", ".join(("" if flag in flags else "no ") + label
                         for flag, label in (("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX")))
    return f"{os.cpu_count()}-core {fields.get('model name', 'CPU')} ({features})"


def resolve_attention(setting: str, device: torch.device, precision: str) -> str:
    """'auto': SDPA, except eager on a CPU in bf16, where SDPA is slower (1.16 vs 0.99 s a step, measured in
    reports/results/library-choices.md)."""
    if setting != "auto":
        return setting
    return "eager" if device.type == "cpu" and precision == "bf16" else "sdpa"


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str):
    """The context a forward pass runs in: bf16 or fp16 autocast, or nothing for fp32."""
    if precision in AUTOCAST_DTYPES:
        return torch.autocast(device.type, dtype=AUTOCAST_DTYPES[precision])
    return contextlib.nullcontext()


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler:
    """fp16's loss scaling (small gradients underflow in fp16 without it; a step whose scaled gradients
    overflow is skipped and the scale halved); a pass-through for bf16 and fp32, whose range needs none.

    Used as scale(loss).backward(), unscale_(optimizer) before clipping, step(optimizer), update().
    """
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def resolve_compile(setting: str, device: torch.device) -> bool:
    """'auto': compile on CUDA, where a step is bound by kernel launches; eager on a CPU (README,
    "Performance": compiling did not pay for itself on the 2-core CPU)."""
    if setting != "auto":
        return setting == "on"
    return device.type == "cuda"


def compiled(module: torch.nn.Module, device: torch.device, cuda_graphs: bool = True) -> torch.nn.Module:
    """`torch.compile` of a module's whole forward (and so its backward); CUDA graphs on CUDA unless
    told otherwise (DDP's gradient hooks run between graphs, so a DDP model compiles without them).

    Inductor's own random numbers would differ from eager ones; with `fallback_random` masks,
    samples and dropout come from the same generator as in eager mode, so a seed gives the same
    run compiled or not, and a run resumes identically whichever way it was started. It is this
    compilation's option, not the process's: a user's own torch.compile elsewhere keeps Inductor's
    faster generator. (`options` replaces `mode`, which torch.compile does not take beside it:
    "reduce-overhead" is the one option triton.cudagraphs.)
    """
    options = {"fallback_random": True}
    if device.type == "cuda" and cuda_graphs:
        options["triton.cudagraphs"] = True
    return torch.compile(module, options=options)


def batch_slices(batch: dict[str, torch.Tensor], count: int) -> list[tuple[float, dict[str, torch.Tensor]]]:
    """Gradient accumulation's slices of a batch, both loops': `count` runs of whole examples (one an
    example where the batch is shorter), each with its share of the batch; the batch itself for one."""
    size = len(batch["input_ids"])
    count = min(count, size)
    if count == 1:
        return [(1.0, batch)]
    bounds = [round(i * size / count) for i in range(count + 1)]
    return [((end - start) / size, {key: value[start:end] for key, value in batch.items()})
            for start, end in itertools.pairwise(bounds)]


def mark_step() -> None:
    """Tell CUDA graph trees a new training step begins, so the last step's outputs may be reused."""
    torch.compiler.cudagraph_mark_step_begin()

"""Where a run computes and in what precision: the one rule for fine-tuning and pre-training.

Part of the lowest layer (README, "Architecture"): imports nothing from the project.
"""

from __future__ import annotations

import contextlib

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
    """'auto': bf16 autocast where the hardware has bf16 (CPU: AVX512-BF16/AMX), else fp32."""
    if setting != "auto":
        return setting
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if device.type == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported() else "fp32"


def resolve_attention(setting: str, device: torch.device, precision: str) -> str:
    """'auto': SDPA, except eager on a CPU in bf16, where SDPA is slower (STACK.md: 1.16 vs 0.99 s/step)."""
    if setting != "auto":
        return setting
    return "eager" if device.type == "cpu" and precision == "bf16" else "sdpa"


def autocast(device: torch.device, precision: str):
    """The context a forward pass runs in: bf16 autocast, or nothing for fp32."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()

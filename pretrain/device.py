"""Where a run computes and in what precision: the one rule for fine-tuning and pre-training.

Part of the lowest layer (README, "Architecture"): imports nothing from the project.
"""

from __future__ import annotations

import contextlib

import torch

PRECISIONS = ("auto", "fp32", "bf16")
ATTENTIONS = ("auto", "eager", "sdpa")


def default_device() -> torch.device:
    """The first GPU where there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


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

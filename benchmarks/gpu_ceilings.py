"""The machine and its ceilings: package versions, the host and device, matmul peak, copy bandwidth and
the host's cost of one small op.

The first part of benchmarks/gpu_check.sh, so that a missing package or a slow device is named before
the window is spent on anything else. On CUDA every time is taken with CUDA events around a run of
back-to-back kernels (the host clock would add launch and synchronisation latency to each); on a CPU
with the host clock. The small op is timed on the host clock on both: a step of a small model launches
thousands of them, so the host's rate bounds it where the device would not (the second 2026-11-27 H200
window pre-trained at 26-31 steps/s where the first ran 40, with no host figure to tell the machines
apart). Prints `host:` and `ceiling:` lines, which the check's summary collects.

    python benchmarks/gpu_ceilings.py [--device cuda] [--size 8192] [--seconds 1]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import time
from pathlib import Path

import torch

# What the harness imports on some path, in the order a failure would hurt the GPU check.
PACKAGES = ("torch", "transformers", "tokenizers", "safetensors", "numpy", "scipy", "scikit-learn", "pyarrow",
            "datasets", "evaluate", "dill", "multiprocess", "accelerate", "onnx", "onnxruntime", "filelock",
            "matplotlib", "mlflow", "optuna")
IMPORTS = {"scikit-learn": "sklearn"}


def versions() -> list[str]:
    """One line per package: its version and whether it imports here, or why not."""
    lines = []
    for name in PACKAGES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            lines.append(f"package {name}: not installed")
            continue
        try:
            __import__(IMPORTS.get(name, name))
            lines.append(f"package {name}: {version}")
        except Exception as error:  # a carried wheel that does not fit the image says so here
            lines.append(f"package {name}: {version}, import FAILS: {type(error).__name__}: {error}")
    return lines


def timed(device: torch.device, work, repeats: int, warmup: int = 2) -> float:
    """Seconds per call of `work`, `repeats` calls back to back after `warmup` calls, by CUDA events on a
    GPU (the device's time), else the host clock."""
    for _ in range(warmup):
        work()
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(repeats):
            work()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / repeats
    started = time.perf_counter()
    for _ in range(repeats):
        work()
    return (time.perf_counter() - started) / repeats


def best_rate(device: torch.device, work, units: float, seconds: float) -> float:
    """The best of several timed runs of `work` within about `seconds`, as units per second."""
    once = timed(device, work, 1)
    repeats = max(1, min(50, int(seconds / 5 / max(once, 1e-9))))
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline or best == 0.0:
        best = max(best, units / timed(device, work, repeats))
    return best


def matmul_peak(device: torch.device, dtype: torch.dtype, size: int, seconds: float) -> float:
    """FLOP/s of a square matmul on random data."""
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    return best_rate(device, lambda: a @ b, 2 * size ** 3, seconds)


def copy_bandwidth(device: torch.device, megabytes: int, seconds: float) -> float:
    """Bytes/s of a device-to-device copy, counting bytes read and written."""
    source = torch.empty(megabytes * 2 ** 20, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    return best_rate(device, lambda: target.copy_(source), 2 * source.numel(), seconds)


def host_to_device(device: torch.device, megabytes: int, seconds: float) -> float:
    """Bytes/s of a copy from pinned host memory (the loaders' path)."""
    source = torch.empty(megabytes * 2 ** 20, dtype=torch.uint8).pin_memory()
    target = torch.empty(source.shape, dtype=torch.uint8, device=device)
    return best_rate(device, lambda: target.copy_(source, non_blocking=True), source.numel(), seconds)


def host_name() -> str:
    """The CPU's model name as Linux reports it, and the cores this process may use."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{model}, {len(os.sched_getaffinity(0))} cores"


def small_op_seconds(device: torch.device, calls: int = 5000) -> float:
    """Host seconds per in-place add on a 256-element tensor, `calls` back to back: dispatch and launch
    (on CUDA the kernel itself is faster than its launch, so the host's time is the bound), the best of
    three runs."""
    x = torch.zeros(256, device=device)
    best = float("inf")
    for _ in range(3):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        for _ in range(calls):
            x.add_(1.0)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto")
    parser.add_argument("--size", type=int, default=0,
                        help="matmul side (default: 8192 on CUDA, 1024 on a CPU)")
    parser.add_argument("--megabytes", type=int, default=0,
                        help="copy size (default: 1024 on CUDA, 64 on a CPU)")
    parser.add_argument("--seconds", type=float, default=1.0, help="time spent on each ceiling")
    args = parser.parse_args()
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    cuda = device.type == "cuda"
    size, megabytes = args.size or (8192 if cuda else 1024), args.megabytes or (1024 if cuda else 64)
    print(f"python {platform.python_version()}, {platform.machine()}, {torch.get_num_threads()} threads")
    print("\n".join(versions()))
    print(f"host: {host_name()}")
    name = torch.cuda.get_device_name(device) if cuda else platform.processor() or "cpu"
    if cuda:
        props = torch.cuda.get_device_properties(device)
        print(f"device: {name}, {props.total_memory / 2 ** 30:.0f} GiB, {props.multi_processor_count} SMs, "
              f"CUDA {torch.version.cuda}, bf16 {torch.cuda.is_bf16_supported()}")
    clock = "CUDA events" if cuda else "host clock"
    dtypes = {"bf16": torch.bfloat16, "fp32": torch.float32}
    if cuda:
        dtypes["fp16"] = torch.float16
    for label, dtype in dtypes.items():
        rate = matmul_peak(device, dtype, size, args.seconds)
        print(f"ceiling: {name} matmul {label} {size}^3 {rate / 1e12:,.4g} TFLOP/s ({clock})")
    rate = copy_bandwidth(device, megabytes, args.seconds)
    print(f"ceiling: {name} copy {megabytes} MiB {rate / 1e9:,.0f} GB/s read+write ({clock})")
    if cuda:
        rate = host_to_device(device, megabytes, args.seconds)
        print(f"ceiling: {name} pinned host-to-device {rate / 1e9:,.1f} GB/s ({clock})")
    print(f"ceiling: {name} small op (add_ on 256 elements) {small_op_seconds(device) * 1e6:.2f} us a call, "
          "dispatch and launch (host clock)")


if __name__ == "__main__":
    main()

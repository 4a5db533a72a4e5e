"""Pre-training step time: ELECTRA against MLM for the same discriminator, eager and compiled, in one run.

Prints each objective's seconds per step, tokens/s, FLOP/s and model FLOPs utilisation (MFU)
against a matmul peak measured in the same run, the electra/mlm step-time ratio and the
compiled/eager speed-up. Every setup is timed in alternating rounds, so load from other processes
hits all alike. Compilation time is reported separately and not counted in the step times.

FLOPs: the paper convention (foundation/models/flops.py) charges a training step at 2x the forward pass and
counts embedding lookups as one-hot matmuls, so it is not what the hardware executes. MFU instead
uses the matmul FLOPs torch's FlopCounterMode counts in one real step (forward and backward,
attention included, lookups excluded); both rates are printed.

    python benchmarks/pretrain_step.py --device cpu --preset electra-small --batch-size 32
    python benchmarks/pretrain_step.py --device cuda --preset electra-small --batch-size 128
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from types import SimpleNamespace

import torch
from gpu_ceilings import matmul_peak  # this folder: on sys.path when run as a script

from foundation.models.presets import PRESETS
from foundation.training import placement
from foundation.training.distributed import Context
from foundation.training.placement import pick_device, resolve_precision
from pretrain.budget import step_flops
from pretrain.config import PretrainConfig, resolve
from pretrain.prepare import build_setup
from pretrain.train import train_step

PAD, UNK, CLS, SEP, MASK = 0, 100, 101, 102, 103  # BERT uncased vocabulary ids


class StandInTokenizer(SimpleNamespace):
    """The ids and size a run needs from a tokenizer, without loading one."""

    def __len__(self):
        return self.vocab_size


def random_batch(batch_size: int, seq_len: int, vocab_size: int, device) -> dict[str, torch.Tensor]:
    """Full-length two-segment examples of random word ids."""
    input_ids = torch.randint(1000, vocab_size, (batch_size, seq_len))
    half = seq_len // 2
    input_ids[:, 0], input_ids[:, half], input_ids[:, -1] = CLS, SEP, SEP
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, half + 1:] = 1
    batch = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
             "token_type_ids": token_type_ids}
    return {k: v.to(device) for k, v in batch.items()}


def counted_step_flops(setup, batch) -> float:
    """Matmul FLOPs of one training step (forward and backward) as FlopCounterMode counts them."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        train_step(setup, setup.model, batch)
    return float(counter.get_total_flops())


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def pretrain_config(args, objective: str, precision: str, compile_setting: str) -> PretrainConfig:
    return resolve(PretrainConfig(preset=args.preset, objective=objective, batch_size=args.batch_size,
                                  seq_len=args.seq_len, precision=precision, device=args.device,
                                  compile=compile_setting))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="electra-small", choices=list(PRESETS))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds per setup")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per round")
    parser.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32", "fp16"])
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto")
    parser.add_argument("--compile", default="both", choices=["both", "off", "on"],
                        help="time eager steps, compiled steps, or both")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="after timing, profile this many steps of each setup (torch.profiler): the "
                             "device's busy share of the wall time and the costliest operators")
    args = parser.parse_args()

    device = pick_device(args.device)
    precision = resolve_precision(args.precision, device)
    vocab_size = PRESETS[args.preset].shape.vocab_size
    tokenizer = StandInTokenizer(pad_token_id=PAD, cls_token_id=CLS, sep_token_id=SEP, mask_token_id=MASK,
                                 vocab_size=vocab_size)
    batch = random_batch(args.batch_size, args.seq_len, vocab_size, device)
    modes = ("off", "on") if args.compile == "both" else (args.compile,)
    setups, paper_flops, executed_flops, compile_s = {}, {}, {}, {}
    for objective in ("electra", "mlm"):
        for mode in modes:
            config = pretrain_config(args, objective, precision, mode)
            setup = build_setup(config, Context(0, 1, device), tokenizer)
            model = placement.compiled(setup.model, device) if setup.compiled else setup.model
            name = f"{objective} {'compiled' if setup.compiled else 'eager'}"
            setups[name] = (setup, model)
            paper_flops[name] = step_flops(objective, 1, setup.discriminator_shape, setup.generator_shape,
                                           args.batch_size, args.seq_len)
            if not setup.compiled:
                executed_flops[objective] = counted_step_flops(setup, batch)
            _sync(device)
            start = time.perf_counter()
            for _ in range(3):  # compiles (and records CUDA graphs) on the first steps
                train_step(setup, model, batch)
            _sync(device)
            compile_s[name] = time.perf_counter() - start
    if not executed_flops:  # compiled only: count on an eager twin
        for objective in ("electra", "mlm"):
            config = pretrain_config(args, objective, precision, "off")
            setup = build_setup(config, Context(0, 1, device), tokenizer)
            executed_flops[objective] = counted_step_flops(setup, batch)
    # The MFU's denominator, timed with CUDA events on a GPU (gpu_ceilings.py), at the size that
    # reaches the device's peak there
    peak = matmul_peak(device, torch.bfloat16 if precision == "bf16" else torch.float32,
                       8192 if device.type == "cuda" else 1024, seconds=2.0)

    times: dict[str, list[float]] = {name: [] for name in setups}
    for round_index in range(args.rounds + 1):  # round 0 warms up (allocator, oneDNN kernels)
        for name, (setup, model) in setups.items():
            _sync(device)
            start = time.perf_counter()
            for _ in range(args.steps):
                train_step(setup, model, batch)
            _sync(device)
            if round_index:
                times[name].append((time.perf_counter() - start) / args.steps)

    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else placement.cpu_kind()
    print(f"{args.preset}, batch {args.batch_size} x {args.seq_len}, {precision}, {device_name}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}; matmul peak "
          f"{peak / 1e9:,.0f} GFLOP/s; load average {os.getloadavg()[0]:.2f}")
    step_s = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in step_s.items():
        tokens_per_s = args.batch_size * args.seq_len / seconds
        executed = executed_flops[name.split()[0]] / seconds
        print(f"  {name:17s} {seconds:7.4f} s/step {tokens_per_s:10,.0f} tokens/s  "
              f"{executed / 1e9:8,.1f} GFLOP/s executed (MFU {executed / peak:6.1%})  "
              f"{paper_flops[name] / seconds / 1e9:8,.1f} GFLOP/s paper convention  "
              f"(first 3 steps {compile_s[name]:.1f} s)")
    for mode in ("eager", "compiled"):
        if f"electra {mode}" in step_s:
            ratio = step_s[f"electra {mode}"] / step_s[f"mlm {mode}"]
            print(f"electra/mlm step-time ratio, {mode}: {ratio:.3f}")
    for objective in ("electra", "mlm"):
        if f"{objective} compiled" in step_s:
            speedup = step_s[f"{objective} eager"] / step_s[f"{objective} compiled"] \
                if f"{objective} eager" in step_s else float("nan")
            print(f"{objective} compiled/eager speed-up: {speedup:.2f}x")

    if args.profile:
        for name, (setup, model) in setups.items():
            profile(name, setup, model, batch, args.profile, device)


def profile(name: str, setup, model, batch, steps: int, device) -> None:
    """Where a step's time goes: the device's kernel time against the wall time, and the top operators.

    A step whose kernels fill much less than its wall time waits on the host (launches, Python,
    synchronisations): CUDA graphs and fewer, larger kernels are the cure; a busy device needs
    cheaper kernels instead.
    """
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    _sync(device)
    with profiler(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            train_step(setup, model, batch)
        _sync(device)
        wall = time.perf_counter() - start
    events = prof.key_averages()
    if device.type == "cuda":
        busy = sum(e.self_device_time_total for e in events if e.device_type.name == "CUDA") / 1e6
        kernels = sum(e.count for e in events if e.device_type.name == "CUDA")
        print(f"profile {name}: {wall / steps * 1e3:.1f} ms/step wall, {busy / steps * 1e3:.1f} ms/step of "
              f"kernels ({busy / wall:.0%} busy), {kernels / steps:.0f} kernels/step")
        key = "self_cuda_time_total"
    else:
        print(f"profile {name}: {wall / steps * 1e3:.1f} ms/step wall")
        key = "self_cpu_time_total"
    print(events.table(sort_by=key, row_limit=12, max_name_column_width=60))


if __name__ == "__main__":
    main()

"""ELECTRA's Adam, one update of a pre-training run's parameters: eager foreach kernels against the update
compiled by Inductor (its rates held on the device), in one run.

The eager update makes ~10 passes over every parameter and moment (a foreach kernel each); the compiled
one fuses them. Both are timed in alternating rounds on the same gradients, so load from other processes
hits both alike; the first compiled step (compilation) is reported apart. On CUDA the compiled update is
also captured in a CUDA graph, and times come from CUDA events. On a CPU the eager update goes piece by
piece (foundation/training/optimization.py, CPU_PIECE); mode `whole` times it as one pass per foreach op
over the whole model instead, as before pieces.

    python benchmarks/optimizer_step.py --device cpu --preset electra-small
    python benchmarks/optimizer_step.py --device cpu --preset electra-small --modes eager,whole
    python benchmarks/optimizer_step.py --device cuda --preset electra-base
"""

from __future__ import annotations

import argparse
import statistics

import torch
from gpu_ceilings import timed  # this folder: on sys.path when run as a script
from pretrain_step import StandInTokenizer

from foundation.training import optimization
from foundation.training.distributed import Context
from foundation.training.placement import pick_device
from pretrain.config import PretrainConfig, resolve
from pretrain.prepare import build_setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--preset", default="electra-small", help="the pre-training preset that steps")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds of one step per setup")
    parser.add_argument("--modes", default="eager,compiled",
                        help="comma-separated: eager, whole (eager, one pass per op over the model), "
                             "compiled")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if not set(modes) <= {"eager", "whole", "compiled"} or "eager" not in modes:
        parser.error(f"--modes {args.modes!r}: name eager and any of whole, compiled")
    pieces = {"eager": optimization.CPU_PIECE, "whole": 2 ** 62, "compiled": optimization.CPU_PIECE}
    device = pick_device(args.device)
    tokenizer = StandInTokenizer(vocab_size=30522, pad_token_id=0, cls_token_id=101, sep_token_id=102,
                                 mask_token_id=103)
    optimizers, compile_s = {}, 0.0
    for mode in modes:
        config = resolve(PretrainConfig(preset=args.preset, device=str(device), precision="fp32",
                                        compile_optimizer=mode == "compiled"))
        setup = build_setup(config, Context(0, 1, device), tokenizer)
        torch.manual_seed(0)
        for p in setup.model.parameters():
            p.grad = torch.randn_like(p) * 1e-3
        for group in setup.optimizer.param_groups:
            group["lr"] = 1e-4
        optimization.CPU_PIECE = pieces[mode]
        seconds = timed(device, setup.optimizer.step, 1, warmup=0)  # moments made, and compilation
        if mode == "compiled":
            compile_s = seconds
        optimizers[mode] = setup.optimizer
    params = sum(p.numel() for group in optimizers["eager"].param_groups for p in group["params"])
    times: dict[str, list[float]] = {mode: [] for mode in optimizers}
    for round_ in range(args.rounds):
        for mode, optimizer in optimizers.items():
            for group in optimizer.param_groups:  # the schedule moves the rate every step
                group["lr"] = 1e-4 * (1 - round_ / args.rounds)
            optimization.CPU_PIECE = pieces[mode]
            times[mode].append(timed(device, optimizer.step, 1, warmup=0))
    print(f"device {device}, preset {args.preset}: {params / 1e6:.1f}M parameters, "
          f"{len(optimizers['eager'].param_groups)} groups, {args.rounds} rounds")
    for mode, seconds in times.items():
        print(f"{mode:9s} {statistics.median(seconds) * 1000:8.2f} ms per update (median; "
              f"min {min(seconds) * 1000:.2f})")
    median = {mode: statistics.median(seconds) for mode, seconds in times.items()}
    if "whole" in times:
        print(f"eager (in pieces) against whole: {median['whole'] / median['eager']:.2f}x faster")
    if "compiled" in times:
        print(f"first compiled update (compilation included): {compile_s:.1f} s")
        print(f"compiled/eager speed-up: {median['eager'] / median['compiled']:.2f}x")


if __name__ == "__main__":
    main()

"""Pre-training step time: ELECTRA against MLM for the same discriminator, in one run.

Prints each objective's seconds per step, tokens/s, FLOP/s and model FLOPs utilisation (MFU)
against a matmul peak measured in the same run, and the electra/mlm step-time ratio. The two
objectives are timed in alternating rounds, so load from other processes hits both alike.

FLOPs: the paper convention (pretrain/flops.py) charges a training step at 2x the forward pass and
counts embedding lookups as one-hot matmuls, so it is not what the hardware executes. MFU instead
uses the matmul FLOPs torch's FlopCounterMode counts in one real step (forward and backward,
attention included, lookups excluded); both rates are printed.

    python benchmarks/pretrain_step.py --preset electra-small --batch-size 32 --seq-len 128
"""

from __future__ import annotations

import argparse
import statistics
import time
from types import SimpleNamespace

import torch

from pretrain.budget import step_flops
from pretrain.config import PretrainConfig, resolve
from pretrain.device import resolve_precision
from pretrain.distributed import Context, pick_device
from pretrain.models import PRESETS
from pretrain.prepare import build_run
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


def counted_step_flops(run, batch) -> float:
    """Matmul FLOPs of one training step (forward and backward) as FlopCounterMode counts them."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        train_step(run, run.model, batch)
    return float(counter.get_total_flops())


def matmul_peak(dtype: torch.dtype, device, size: int = 2048, seconds: float = 2.0) -> float:
    """Best FLOP/s of a square matmul over repeated trials."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    best, end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        _sync(device)
        start = time.perf_counter()
        a @ b
        _sync(device)
        best = max(best, 2 * size ** 3 / (time.perf_counter() - start))
    return best


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="electra-small", choices=list(PRESETS))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds per objective")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per round")
    parser.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    device = pick_device(args.device)
    precision = resolve_precision(args.precision, device)
    vocab_size = PRESETS[args.preset].shape.vocab_size
    tokenizer = StandInTokenizer(pad_token_id=PAD, cls_token_id=CLS, sep_token_id=SEP, mask_token_id=MASK,
                          vocab_size=vocab_size)
    runs, paper_flops, executed_flops = {}, {}, {}
    for objective in ("electra", "mlm"):
        config = resolve(PretrainConfig(preset=args.preset, objective=objective, batch_size=args.batch_size,
                                        seq_len=args.seq_len, precision=precision, device=args.device))
        runs[objective] = build_run(config, Context(0, 1, device), tokenizer)
        paper_flops[objective] = step_flops(objective, 1, runs[objective].discriminator_shape,
                                            runs[objective].generator_shape, args.batch_size, args.seq_len)
    batch = random_batch(args.batch_size, args.seq_len, vocab_size, device)
    for objective, run in runs.items():
        executed_flops[objective] = counted_step_flops(run, batch)
    peak = matmul_peak(torch.bfloat16 if precision == "bf16" else torch.float32, device)

    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_index in range(args.rounds + 1):  # round 0 warms up (allocator, oneDNN kernels)
        for name, run in runs.items():
            _sync(device)
            start = time.perf_counter()
            for _ in range(args.steps):
                train_step(run, run.model, batch)
            _sync(device)
            if round_index:
                times[name].append((time.perf_counter() - start) / args.steps)

    print(f"{args.preset}, batch {args.batch_size} x {args.seq_len}, {precision}, {device.type}, "
          f"{torch.get_num_threads()} threads; matmul peak {peak / 1e9:,.0f} GFLOP/s")
    step_s = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in step_s.items():
        tokens_per_s = args.batch_size * args.seq_len / seconds
        executed = executed_flops[name] / seconds
        print(f"  {name:8s} {seconds:7.3f} s/step {tokens_per_s:9,.0f} tokens/s  "
              f"{executed / 1e9:7,.1f} GFLOP/s executed (MFU {executed / peak:6.1%})  "
              f"{paper_flops[name] / seconds / 1e9:7,.1f} GFLOP/s paper convention")
    print(f"electra/mlm step-time ratio: {step_s['electra'] / step_s['mlm']:.3f}")


if __name__ == "__main__":
    main()

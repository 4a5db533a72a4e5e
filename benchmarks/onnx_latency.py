"""Inference latency and throughput: PyTorch eager fp32 against onnxruntime fp32 and int8.

One process, one model, length-128 inputs at batch 1, 8 and 32. The engines take turns call by call
(round robin), so load from other jobs on a shared machine slows all three alike and the ratios
stay fair even when absolute times do not. Both runtimes get the same thread count. The ONNX
models are exported and quantised exactly as `harness export onnx` does (harness/deploy/onnx_export.py).
Target: onnxruntime int8 >= 2.5x faster than PyTorch at batch 1 (p50).

    python benchmarks/onnx_latency.py [--model CHECKPOINT_DIR] [--threads 2] [--seconds 10]

Without --model: a random-init ELECTRA-Small (as `harness init --preset electra-small` makes) with
a 2-class head; a `harness init` or pre-training checkpoint also gets a fresh 2-class head.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime
import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from foundation.models.presets import PRESETS, discriminator_config  # noqa: E402
from harness.deploy import onnx_export  # noqa: E402
from harness.deploy.bundle import INPUT_NAMES  # noqa: E402

SEQ_LEN = 128
BATCH_SIZES = (1, 8, 32)
TARGET_SPEEDUP = 2.5  # int8 over PyTorch at batch 1


def classifier_checkpoint(model_dir: Path | None, directory: Path) -> Path:
    """A sequence-classification checkpoint: --model as is, or with a fresh head, or random ELECTRA-Small."""
    transformers.logging.set_verbosity_error()
    if model_dir is not None:
        architecture = (transformers.AutoConfig.from_pretrained(model_dir).architectures or [""])[0]
        if architecture.endswith("ForSequenceClassification"):
            return model_dir
        model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    else:
        transformers.set_seed(0)
        config = discriminator_config(PRESETS["electra-small"], num_labels=2)
        model = transformers.AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(directory)
    return directory


def engines(checkpoint: Path, directory: Path, threads: int) -> dict:
    """name -> function(inputs) running one batch."""
    torch.set_num_threads(threads)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(checkpoint).eval()
    found = onnx_export.inspect_checkpoint(checkpoint)
    onnx_export.export_onnx(onnx_export.load_model(found, onnx_export.TOKEN_INPUTS), directory / "model.onnx")
    onnx_export.quantize_int8(directory / "model.onnx", directory / "model.int8.onnx")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads

    def pytorch(inputs):
        with torch.inference_mode():
            model(**{name: torch.from_numpy(array) for name, array in inputs.items()})

    def session(file_name):
        ort = onnxruntime.InferenceSession(str(directory / file_name), options,
                                           providers=["CPUExecutionProvider"])
        return lambda inputs: ort.run(None, inputs)

    return {"pytorch eager fp32": pytorch, "onnxruntime fp32": session("model.onnx"),
            "onnxruntime int8": session("model.int8.onnx")}


def inputs_for(batch_size: int, vocab_size: int) -> dict[str, np.ndarray]:
    """A full-length pair batch: random tokens, no padding, second half token type 1."""
    rng = np.random.default_rng(batch_size)
    token_type_ids = np.zeros((batch_size, SEQ_LEN), dtype=np.int64)
    token_type_ids[:, SEQ_LEN // 2:] = 1
    arrays = [rng.integers(1000, vocab_size, (batch_size, SEQ_LEN)), np.ones((batch_size, SEQ_LEN)),
              token_type_ids]
    return {name: array.astype(np.int64) for name, array in zip(INPUT_NAMES, arrays, strict=True)}


def measure(calls: dict, inputs: dict, seconds: float, min_rounds: int) -> dict[str, list[float]]:
    """Per engine, the latency of each call in seconds; engines alternate call by call."""
    for infer in calls.values():  # warm-up: first calls allocate and pick kernels
        infer(inputs)
    times = {name: [] for name in calls}
    started = time.perf_counter()
    while len(times[next(iter(times))]) < min_rounds or time.perf_counter() - started < seconds:
        for name, infer in calls.items():
            begin = time.perf_counter()
            infer(inputs)
            times[name].append(time.perf_counter() - begin)
    return times


def summarize(times: list[float], batch_size: int) -> dict[str, float]:
    milliseconds = sorted(1000 * t for t in times)
    return {"p50_ms": statistics.median(milliseconds),
            "p95_ms": milliseconds[min(len(milliseconds) - 1, round(0.95 * (len(milliseconds) - 1)))],
            "examples_per_s": batch_size / statistics.fmean(times), "calls": len(times)}


def table(rows: list[dict]) -> str:
    lines = [f"{'engine':20} {'batch':>5} {'p50 ms':>8} {'p95 ms':>8} {'examples/s':>11} {'x PyTorch':>9}"]
    for row in rows:
        lines.append(f"{row['engine']:20} {row['batch_size']:5d} {row['p50_ms']:8.2f} {row['p95_ms']:8.2f} "
                     f"{row['examples_per_s']:11.1f} {row['speedup_p50']:9.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path,
                        help="checkpoint directory (default: random-init ELECTRA-Small)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="threads for both runtimes (default: torch's, %(default)s)")
    parser.add_argument("--seconds", type=float, default=10.0, help="time per batch size (default 10)")
    parser.add_argument("--min-rounds", type=int, default=10, help="calls per engine at least (default 10)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = classifier_checkpoint(args.model, Path(scratch) / "checkpoint")
        calls = engines(checkpoint, Path(scratch), args.threads)
        vocab_size = transformers.AutoConfig.from_pretrained(checkpoint).vocab_size
        rows = []
        for batch_size in BATCH_SIZES:
            times = measure(calls, inputs_for(batch_size, vocab_size), args.seconds, args.min_rounds)
            stats = {name: summarize(values, batch_size) for name, values in times.items()}
            baseline = stats["pytorch eager fp32"]["p50_ms"]
            rows += [{"engine": name, "batch_size": batch_size, **values,
                      "speedup_p50": baseline / values["p50_ms"]} for name, values in stats.items()]
    print(f"{args.model or 'random-init electra-small'}, length {SEQ_LEN}, {args.threads} threads, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(table(rows))
    if os.getloadavg()[0] > (os.cpu_count() or 1) and args.threads > 1:
        # Measured here: under oversubscription PyTorch's spinning thread pool slows 10-80x, ORT's far
        # less, so multi-threaded ratios on a busy machine overstate the ONNX gain.
        print("warning: more runnable jobs than CPUs; PyTorch's thread pool suffers most from that, so "
              "these ratios flatter onnxruntime; compare with --threads 1 or on an idle machine")
    for batch_size in BATCH_SIZES:
        mine = {row["engine"]: row for row in rows if row["batch_size"] == batch_size}
        print(f"batch {batch_size:2d}: onnxruntime fp32 {mine['onnxruntime fp32']['speedup_p50']:.2f}x, "
              f"int8 {mine['onnxruntime int8']['speedup_p50']:.2f}x PyTorch; int8 "
              f"{mine['onnxruntime fp32']['p50_ms'] / mine['onnxruntime int8']['p50_ms']:.2f}x fp32")
    speedup = next(r["speedup_p50"] for r in rows
                   if r["batch_size"] == 1 and r["engine"] == "onnxruntime int8")
    print(f"target int8 >= {TARGET_SPEEDUP}x PyTorch at batch 1: {speedup:.2f}x, "
          f"{'met' if speedup >= TARGET_SPEEDUP else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""The grid's local pool against one process running the same units in turn: units per hour, side by side.

The same grid (random ELECTRA-shaped models x GLUE-format tasks x seeds, GLUE's tiny test files made
bigger) three ways, each from a fresh Python process, with tracking off:
  serial    one process runs every unit in turn (harness/grid/unit.py's run_unit), torch on every core;
  pool N    `harness run glue --model ... --workers N`: N child processes at a time, one per unit, the
            cores split among them as threads.
With --device cuda the pool is one worker per GPU (`--workers` is left out: the pool's default), each unit
a fresh `python -m harness.grid.unit` pinned to its GPU; units of several GPUs (--gpus-per-unit) need a
machine with several. With --device cpu every GPU is hidden (CUDA_VISIBLE_DEVICES="").
A child pays its own start (imports ~8 s here with bytecode cached; far more where PYTHONDONTWRITEBYTECODE
is set, as every child recompiles torch and transformers), so small units favour one process and large
ones the pool.

    python benchmarks/grid_pool.py [--hidden 32] [--layers 2] [--train-examples 16] [--workers 1,2]
                                   [--device cpu|cuda] [--gpus-per-unit N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SETTINGS = ["num_epochs=1", "save_models=false", "predict_test=false"]


def write_model(directory: Path, seed: int, hidden: int, layers: int) -> Path:
    """A random ELECTRA of the given width and depth with the tests' vocabulary."""
    import transformers

    from tests.conftest import write_tiny_model

    write_tiny_model(directory, seed=seed, positions=128)
    config = transformers.ElectraConfig.from_pretrained(directory)
    config.update({"hidden_size": hidden, "embedding_size": hidden, "num_hidden_layers": layers,
                   "num_attention_heads": max(1, hidden // 64), "intermediate_size": 4 * hidden})
    transformers.set_seed(seed)
    transformers.ElectraForPreTraining(config).save_pretrained(directory)
    return directory


def serial_child(models: list[str], data: str, tasks: str, seeds: int, out: Path) -> None:
    """Every unit in this one process, in the grid's order."""
    from harness import kinds
    from harness.config import load_settings
    from harness.grid import plan
    from harness.grid.unit import run_unit
    from tasks.glue_task import GlueDescription

    settings = load_settings(kinds.settings_classes(kinds.kind("glue")), None, SETTINGS)
    names = plan.run_names(models)
    for unit in plan.plan_units("glue", models, [out / name for name in names],
                                GlueDescription(tasks=tasks, data_dir=data), settings, seeds):
        run_unit(unit)


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command[:6])}... failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--tasks", default="rte,stsb")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--train-examples", type=int, default=16)
    parser.add_argument("--workers", default="1,2", help="comma list of pool sizes to measure")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu: GPUs hidden, --workers pools; cuda: the pool's one worker per GPU")
    parser.add_argument("--gpus-per-unit", type=int, default=0, help="cuda: GPUs a unit takes (torchrun)")
    parser.add_argument("--serial-child", nargs=3, metavar=("MODELS", "DATA", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serial_child:
        models, data, out = args.serial_child
        serial_child(models.split(","), data, args.tasks, args.seeds, Path(out))
        return
    from tests.conftest import write_glue_dir

    root = Path(tempfile.mkdtemp(prefix="grid_pool_"))
    try:
        models = [str(write_model(root / "models" / f"m{i}", i, args.hidden, args.layers))
                  for i in range(args.models)]
        data = write_glue_dir(root / "glue", n_train=args.train_examples)
        units = args.models * len(args.tasks.split(",")) * args.seeds
        env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(REPO)}
        env.pop("OMP_NUM_THREADS", None)  # serial: torch's default, every core
        pools = [["--workers", w] for w in args.workers.split(",")]
        if args.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        else:  # the pool sized to the GPUs, as `harness run` sizes it
            import torch

            if not torch.cuda.is_available():
                raise SystemExit("--device cuda: no GPU is visible here")
            pools = [["--gpus-per-unit", str(args.gpus_per_unit)] if args.gpus_per_unit else []]
            print(f"{torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
        print(f"{units} units ({args.models} models {args.hidden} wide x {args.layers} layers, {args.tasks}, "
              f"{args.seeds} seeds, {args.train_examples} train examples, 1 epoch) on {os.cpu_count()} "
              f"cores, device {args.device}")
        rows = [("serial (one process)", timed(
            [sys.executable, __file__, "--tasks", args.tasks, "--seeds", str(args.seeds), "--serial-child",
             ",".join(models), str(data), str(root / "serial")], env))]
        named = [word for model in models for word in ("--model", model)]
        for number, flags in enumerate(pools):
            name = f"pool, {' '.join(flags).removeprefix('--')}" if flags else "pool, a worker a GPU"
            rows.append((name, timed(
                [sys.executable, "-m", "harness.cli", "run", "glue", *named, "--data-dir", str(data),
                 "--tasks", args.tasks, "--seeds", str(args.seeds), *flags, "--output-dir",
                 str(root / f"pool{number}"), "--tracking-uri", "none", *SETTINGS], env)))
        print(f"| {'setup':24} | wall s | units/hour | vs serial |")
        print(f"|{'-' * 26}|--------|------------|-----------|")
        for name, wall in rows:
            print(f"| {name:24} | {wall:6.1f} | {units * 3600 / wall:10.0f} | {rows[0][1] / wall:8.2f}x |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Window B of the GPU issue: ELECTRA-Small pre-trained for one window's command, brought back small.

    python benchmarks/gpu_small.py gpu|micro OUT WORK   # pre-train, then pack into OUT (<= 8 files, < 16 MiB)
    python benchmarks/gpu_small.py unpack OUT TARGET    # TARGET/final and TARGET/half: fp32 checkpoints

`gpu`: the official recipe (preset electra-small: generator 1/4, shared embeddings, lambda 50, ELECTRA's
Adam, lr 5e-4, batch 128 x 128 tokens) on the schedule's shape scaled to STEPS (1% warm-up, linear decay),
compiled, with max_time_s as the guard of the window. `micro` is the CPU rehearsal (tests/test_gpu_check.py):
the same command, files and packing at micro sizes. The detector's replaced-token AUC on a fixed
corruption (pretrain/probe.py, every 1% of the budget) is written to OUT/small-curve.tsv as it comes.

What comes back: the final discriminator and the halfway checkpoint's, each as fp16 safetensors in shards
of at most 15 MB, and one small-meta.tar.gz with their configs, tokenizer files, shard indexes and
pretrain_meta.json. `unpack` rebuilds the two checkpoints in fp32, as the CPU fine-tunes them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

STARTED = time.monotonic()  # the part's clock (gpu_check.sh's limit counts from about here)

# 0.9% of ELECTRA-Small's 1M steps. The H200 windows (reports/results/performance.md) compiled ~90 s and
# ran 26-40 steps/s: 320-440 s of loop, max_time_s its guard.
GPU_STEPS = 9_000
# The guard is what the part's limit leaves once the corpus is prepared (its time on the window's host is
# unmeasured), less RESERVE_S for the final export and the packing, and at most LOOP_S.
PART_LIMIT_S = {"gpu": 585, "micro": 600}  # gpu_check.sh's limits on the part
LOOP_S = {"gpu": 420, "micro": 120}
RESERVE_S = 60
MAX_SHARD = "15MB"
RUN = "electra-small"  # the pre-training output, inside WORK
CURVE = "small-curve.tsv"
META = "small-meta.tar.gz"
CURVE_KEYS = ("disc_auc_unigram", "discriminator_loss", "generator_loss", "disc_accuracy_replaced",
              "position_cosine", "learning_rate", "tokens_per_s", "elapsed_s")


def settings(plan: str, steps: int, work: Path, vocabulary: Path) -> list[str]:
    """The `harness pretrain` key=value settings of the plan, but for its guard (max_time_s)."""
    common = [f"max_steps={steps}", f"checkpoint_every_steps={steps // 2}", "keep_checkpoints=2",
              f"tokenizer={vocabulary}", f"cache_dir={work / 'cache'}", "optimizer=electra"]
    if plan == "gpu":
        return [*common, "compile=on", "device=cuda", "log_every_steps=50"]
    return [*common, "compile=off", "device=cpu", "precision=fp32", "log_every_steps=2"]


def prepare_corpus(preset: str, corpus: Path, output: Path, overrides: list[str]) -> float:
    """The run's tokenised, packed corpus built into its cache (where `harness pretrain` finds it);
    seconds since the part started. The tokenizer encodes on every core here: the check sets
    TOKENIZERS_PARALLELISM=false for its other parts, and this process forks nothing before it."""
    import torch

    from foundation.training import distributed as dist
    from harness.config import load_config
    from pretrain import planning
    from pretrain.config import PretrainConfig
    from pretrain.prepare import prepare_examples

    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    config = load_config(PretrainConfig, None, overrides, preset=preset, corpus=(str(corpus),),
                         output_dir=str(output))
    inputs = planning.check(config)
    started = time.monotonic()
    _, examples = prepare_examples(inputs.config, dist.Context(0, 1, torch.device("cpu")),
                                   list(inputs.corpus.files))
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # as for the rest of the check (compile workers fork)
    print(f"corpus prepared: {len(examples):,} sequences in {time.monotonic() - started:.0f} s")
    return time.monotonic() - STARTED


def guard(plan: str, spent_s: float) -> int:
    """max_time_s: the loop's share of what the part's limit leaves after `spent_s`."""
    return max(1, min(LOOP_S[plan], int(PART_LIMIT_S[plan] - RESERVE_S - spent_s)))


def pretrain(plan: str, out: Path, work: Path) -> int:
    """`harness pretrain` on the plan, the probe's curve written to OUT as each probe lands."""
    import os

    from harness.cli import main
    from harness.tracking import mlflow_runs

    shared = Path(os.environ.get("SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
    corpus = shared / "data" / "corpus" / "gutenberg"
    vocabulary = shared / "models" / "electra-small-discriminator"
    preset, steps = "electra-small", GPU_STEPS
    if plan == "micro":
        from benchmarks.gpu_demo import MICRO
        from foundation.models.presets import PRESETS

        PRESETS[MICRO.name] = MICRO
        preset, steps = MICRO.name, 40
    curve = out / CURVE
    curve.write_text("step\t" + "\t".join(CURVE_KEYS) + "\n")
    logged = mlflow_runs.log_metrics

    def log_metrics(metrics, step=None):  # the tracking is off on the image: keep the probes' rows here
        if "disc_auc_unigram" in metrics:
            with curve.open("a") as file:
                file.write("\t".join([str(step), *(f"{metrics[k]:.6g}" if k in metrics else ""
                                                   for k in CURVE_KEYS)]) + "\n")
        logged(metrics, step=step)

    mlflow_runs.log_metrics = log_metrics
    overrides = settings(plan, steps, work, vocabulary)
    limit = guard(plan, prepare_corpus(preset, corpus, work / RUN, overrides))
    print(f"the loop's guard: max_time_s={limit} ({time.monotonic() - STARTED:.0f} s of the part's "
          f"{PART_LIMIT_S[plan]} spent)")
    return main(["pretrain", "--preset", preset, "--corpus", str(corpus), "--output", str(work / RUN),
                 "--tracking-uri", "none", *overrides, f"max_time_s={limit}"])


def pack(out: Path, work: Path) -> None:
    """The final and the halfway discriminator as fp16 shards in OUT, the rest in one tarball."""
    import torch
    import transformers

    run = work / RUN
    checkpoints = sorted((run / "checkpoints").glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    places = {"final": run / "discriminator"}
    if len(checkpoints) > 1:  # the last checkpoint is the final model; the one before it, the halfway point
        places["half"] = checkpoints[-2] / "discriminator"
    staging = work / "pack"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(out / META, "w:gz") as tar:
        for name, source in places.items():
            model = transformers.AutoModelForPreTraining.from_pretrained(source)
            model.to(torch.float16).save_pretrained(staging / name, max_shard_size=MAX_SHARD)
            for path in sorted((staging / name).iterdir()):
                if path.suffix == ".safetensors":
                    shutil.move(path, out / f"small-{name}-{path.name}")
                else:
                    tar.add(path, f"{name}/{path.name}")
            for path in sorted(source.iterdir()):  # the tokenizer, beside the model as the run saved it
                if path.suffix != ".safetensors" and not (staging / name / path.name).exists():
                    tar.add(path, f"{name}/{path.name}")
            meta = source.parent / "pretrain_meta.json"
            if meta.is_file():
                tar.add(meta, f"{name}/pretrain_meta.json")


def unpack(out: Path, target: Path) -> None:
    """TARGET/final and TARGET/half as fp32 Hugging Face checkpoints, from what `pack` wrote to OUT."""
    import torch
    import transformers

    staging = target / ".packed"
    with tarfile.open(out / META) as tar:
        tar.extractall(staging, filter="data")
    for folder in sorted(p for p in staging.iterdir() if p.is_dir()):
        for shard in out.glob(f"small-{folder.name}-*.safetensors"):
            shutil.copy(shard, folder / shard.name.removeprefix(f"small-{folder.name}-"))
        model = transformers.AutoModelForPreTraining.from_pretrained(folder)
        model.to(torch.float32).save_pretrained(target / folder.name)
        for path in folder.iterdir():
            if "safetensors" not in path.name and path.name != "config.json":
                shutil.copy(path, target / folder.name / path.name)
        steps = json.loads((folder / "pretrain_meta.json").read_text()).get("steps") \
            if (folder / "pretrain_meta.json").is_file() else "?"
        print(f"{target / folder.name}: step {steps}")
    shutil.rmtree(staging)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("gpu", "micro", "unpack"):
        sys.exit(f"usage: {sys.argv[0]} gpu|micro OUT WORK  or  {sys.argv[0]} unpack OUT TARGET")
    mode, first, second = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if mode == "unpack":
        unpack(first, second)
        sys.exit(0)
    first.mkdir(parents=True, exist_ok=True)
    code = pretrain(mode, first, second)
    if code == 0:
        pack(first, second)
    sys.exit(code)

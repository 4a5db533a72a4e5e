"""Fine-tuning and evaluation speed of our loop against transformers' Trainer, side by side in one run.

Same random-init ELECTRA shape, same MRPC training examples, batch 32, same number of steps; then
a prediction pass over the MRPC dev set (408 pairs). Setups take turns and each keeps its best
time, so load from other processes hurts every setup alike. A compiling setup first runs one
untimed turn, so compilation is outside every timed turn (not only outside the best one).

Trainer setups, as run_glue.py runs it: padding every example to max_seq_length=128, random
order, eval batch 8; fp32 (its defaults), bf16, and torch_compile=True; and dynamically padded (the
Trainer's own collator given the tokenizer) in fp32 and bf16, each in random order and with
`train_sampling_strategy="group_by_length"` (transformers 5's `group_by_length`). A random-init
model trained 20 steps has no dev score to check: whether each Trainer setup trains correctly is
checked on a published encoder by benchmarks/real_encoder_throughput.py, which scores the dev set.
Each setup's precision is in its name; the header names the CPU kind. Ours: dynamic padding,
length-grouped batches, eval batch 128, in fp32, in bf16 autocast, compiled, and our defaults for
the device (precision and compile "auto"). Training "examples/s" counts the same examples for
every setup, so its ratio is a time ratio. Target (issue 69): ours (defaults) >= 3x the best
Trainer setup that trains correctly.

    python benchmarks/finetune_throughput.py --device cpu [--shapes small] [--steps 20] [--repeats 2]
    python benchmarks/finetune_throughput.py --device cuda --shapes small,base --steps 100

More steps than MRPC's 3,668 pairs fill (114 batches of 32) repeat its shuffled pairs: a timing needs
only their lengths. `--shapes tiny` (electra-tiny, the small recipe) is the CPU rehearsal's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from foundation.models.presets import PRESETS, discriminator_config  # noqa: E402
from foundation.training import placement  # noqa: E402
from tasks import batching, glue  # noqa: E402
from tasks.config import FinetuneConfig  # noqa: E402
from tasks.finetune import LoopIO, finetune, predict  # noqa: E402
from tasks.glue_data import load_glue  # noqa: E402
from tasks.registry import GLUE_TASKS  # noqa: E402

MRPC = GLUE_TASKS["mrpc"]


def fresh_model(shape: str, tokenizer, attention: str, device) -> torch.nn.Module:
    transformers.set_seed(0)
    config = discriminator_config(PRESETS[f"electra-{shape}"], len(tokenizer), num_labels=2)
    model = transformers.AutoModelForSequenceClassification.from_config(config, attn_implementation=attention)
    return model.to(device)


def ours(data, tokenizer, shape: str, steps: int, device, precision: str, compile_setting: str):
    """(train seconds, eval seconds) of our loop, with the attention `harness run glue` picks."""
    built = glue.build_task(MRPC, data, tokenizer, max_length=128)
    size = PRESETS[f"electra-{shape}"].size  # the recipe row (tiny: small)
    config = FinetuneConfig(precision=precision, compile=compile_setting).resolved(size, 1, 128)
    attention = placement.resolve_attention("auto", device, placement.resolve_precision(precision, device))
    model = fresh_model(shape, tokenizer, attention, device)
    result = finetune(model, dict_task(built), config, batching.collator(tokenizer), LoopIO(progress=False))
    if result.num_train_steps != steps:
        raise RuntimeError(f"expected {steps} steps, ran {result.num_train_steps}")
    autocast = placement.autocast(device, placement.resolve_precision(precision, device))
    if placement.resolve_compile(compile_setting, device):
        model = placement.compiled(model, device)  # the loop's compiled eval graph, already built
    started = time.perf_counter()
    dev = {"validation": built.evals["validation"]}
    collate = batching.for_device(batching.collator(tokenizer), 128, device.type == "cuda")
    predict(model, built, dev, config, collate, autocast)
    _sync(device)
    return result.train_time_s, time.perf_counter() - started


def dict_task(built):
    """The task with its dev split only as an eval split: the loop scores it once per epoch."""
    built.evals = {"validation": built.evals["validation"]}
    return built


def trainer(data, tokenizer, shape: str, steps: int, device, bf16: bool, compiled: bool,
            grouped: bool | None = None):
    """(train seconds, eval seconds) of transformers' Trainer: with run_glue.py's preprocessing (every
    pair padded to 128) where `grouped` is None, else dynamically padded (its collator with a tokenizer),
    in random order or, `grouped`, with train_sampling_strategy="group_by_length"."""
    def encode(batch):
        padding = {"padding": "max_length"} if grouped is None else {}
        return tokenizer(batch["text_a"], batch["text_b"], max_length=128, truncation=True, **padding)

    columns = ["text_a", "text_b", "idx"]
    train = data["train"].map(encode, batched=True, remove_columns=columns)
    dev = data["validation"].map(encode, batched=True, remove_columns=columns)
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = transformers.TrainingArguments(
            output_dir=output_dir, per_device_train_batch_size=32, per_device_eval_batch_size=8,
            max_steps=steps, report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
            seed=0, use_cpu=device.type == "cpu", bf16=bf16, torch_compile=compiled,
            train_sampling_strategy="group_by_length" if grouped else "random")
        collator = {"data_collator": transformers.default_data_collator} if grouped is None else \
            {"processing_class": tokenizer}  # its DataCollatorWithPadding
        hf_trainer = transformers.Trainer(model=fresh_model(shape, tokenizer, "sdpa", device),
                                          args=arguments, train_dataset=train, **collator)
        started = time.perf_counter()
        hf_trainer.train()
        train_s = time.perf_counter() - started
        started = time.perf_counter()
        hf_trainer.predict(dev)
        return train_s, time.perf_counter() - started


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def training_examples(train, count: int):
    """`count` shuffled training examples, the whole set repeated as often as `count` needs."""
    shuffled = train.shuffle(seed=0)
    return shuffled.select([i % len(shuffled) for i in range(count)])


def setups(device):
    """Name -> (function(data, tokenizer, shape, steps) giving (train s, eval s), whether it compiles)."""
    def ours_with(precision, compile_setting):
        return (lambda *a: ours(*a, device, precision, compile_setting),
                placement.resolve_compile(compile_setting, device))

    def trainer_with(bf16, compiled, grouped=None):
        return lambda *a: trainer(*a, device, bf16, compiled, grouped), compiled

    return {"Trainer (run_glue defaults: fp32, padded to 128)": trainer_with(False, False),
            "Trainer bf16": trainer_with(True, False),
            "Trainer torch_compile": trainer_with(False, True),
            "Trainer dynamic padding, fp32": trainer_with(False, False, False),
            "Trainer dynamic padding, bf16": trainer_with(True, False, False),
            "Trainer group_by_length, fp32": trainer_with(False, False, True),
            "Trainer group_by_length, bf16": trainer_with(True, False, True),
            "ours fp32": ours_with("fp32", "off"),
            "ours bf16": ours_with("bf16", "off"),
            "ours compiled (precision auto)": ours_with("auto", "on"),
            f"ours defaults ({placement.resolve_precision('auto', device)}, compile auto)":
                ours_with("auto", "auto")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto")
    parser.add_argument("--shapes", default="small", help="comma-separated ELECTRA sizes: small,base")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2, help="turns per setup; the best time counts")
    parser.add_argument("--only", default="", help="comma-separated setup name prefixes to run")
    parser.add_argument("--shared", type=Path,
                        default=Path(os.environ.get("SHARED_DIR", REPO.parent / "shared")),
                        help="folder with data/glue/MRPC and models/electra-small-discriminator (the "
                             "vocabulary)")
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    device = placement.pick_device(args.device)
    vocabulary = args.shared / "models" / "electra-small-discriminator"
    tokenizer = transformers.AutoTokenizer.from_pretrained(vocabulary)
    data = load_glue(MRPC, args.shared / "data" / "glue")
    data = {"train": training_examples(data["train"], 32 * args.steps), "validation": data["validation"]}
    chosen = {name: setup for name, setup in setups(device).items()
              if not args.only or any(name.startswith(p) for p in args.only.split(","))}
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else placement.cpu_kind()
    for shape in args.shapes.split(","):
        print(f"\nELECTRA-{shape.capitalize()} shape, MRPC, batch 32, {args.steps} steps, eval "
              f"{len(data['validation'])} pairs; {device_name}, {torch.get_num_threads()} threads, "
              f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}")
        best: dict[str, tuple[float, float]] = {}
        # Each turn is printed as it ends, so a run stopped at a time limit (the GPU check's) still
        # tells what it measured; the table comes at the end.
        for name, (measure, compiles) in chosen.items():
            if compiles:  # compilation here, outside the timed turns
                started = time.perf_counter()
                train_s, eval_s = measure(data, tokenizer, shape, args.steps)
                print(f"  warm-up {name}: train {train_s:.2f} s, eval {eval_s:.2f} s "
                      f"({time.perf_counter() - started:.1f} s in all, compilation included)", flush=True)
        for turn in range(args.repeats):
            for name, (measure, _compiles) in chosen.items():
                train_s, eval_s = measure(data, tokenizer, shape, args.steps)
                print(f"  turn {turn + 1} {name}: train {train_s:.2f} s, eval {eval_s:.2f} s", flush=True)
                old = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(old[0], train_s), min(old[1], eval_s))
        report(best, 32 * args.steps, len(data["validation"]))


def report(best: dict[str, tuple[float, float]], train_examples: int, eval_examples: int) -> None:
    trainers = {name: times for name, times in best.items() if name.startswith("Trainer")}
    best_train = min((t for t, _ in trainers.values()), default=float("nan"))
    best_eval = min((e for _, e in trainers.values()), default=float("nan"))
    print(f"{'setup':42} {'train ex/s':>10} {'vs Trainer':>11} {'eval ex/s':>10} {'vs Trainer':>11}"
          "  (vs the best Trainer setup)")
    for name, (train_s, eval_s) in best.items():
        print(f"{name:42} {train_examples / train_s:10.1f} {best_train / train_s:10.2f}x "
              f"{eval_examples / eval_s:10.1f} {best_eval / eval_s:10.2f}x")


if __name__ == "__main__":
    main()

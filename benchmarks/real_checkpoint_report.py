"""benchmarks/real_checkpoint.py's table: each side's score with its interval, the paired difference and
training examples/s, with the harness's own statistics (harness compare's functions on both sides' dev
outputs, laid out as run folders under OUTPUT/SIDE)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from harness.experiments.comparison import ResultsFolder, compare
from reports import dev_outputs, intervals
from tasks import tagging_metrics
from tasks.registry import GLUE_TASKS
from tasks.tagging_data import read_file

CHUNK = "chunk"
NAMES = {"sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "rte": "RTE", "cola": "CoLA",
         CHUNK: "CoNLL-2000 chunk"}


def units(out: Path, side: str, task: str) -> dict[int, dict]:
    """The saved results of a side's seeds on a task."""
    found = {}
    for path in sorted((out / "units").glob(f"{side}-{task}-seed*.json")):
        record = json.loads(path.read_text())
        found[record["seed"]] = record
    return found


def count_tags(out: Path, side: str, seed: int) -> None:
    """A Trainer's chunk tags as the harness's tagging dev outputs: conlleval's counts per sentence, with the
    harness's own ids and chunk types (a seed of its run), so harness compare pairs them."""
    target = dev_outputs.path_of(out / side, CHUNK, seed)
    harness_files = sorted((out / "harness" / "predictions").glob(f"{CHUNK}-seed*/{dev_outputs.FILE}"))
    if target.is_file() or not harness_files:
        return
    ((split, block),) = json.loads(harness_files[0].read_text())["splits"].items()
    dev = read_file("validation", out / "data" / "conll2000" / "test.txt")
    gold = [list(s.tags) for s in dev.sentences]
    guessed = json.loads((out / side / "tags" / f"{CHUNK}-seed{seed}.json").read_text())
    counts = tagging_metrics.sentence_counts(gold, guessed, block["types"])
    rows = tagging_metrics.flat_rows(counts)
    found = dev_outputs.tagging_split(block["ids"], rows, block["types"], gold, f"{side} tokenizer",
                                      block["metrics"], block["headline"])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(dev_outputs.record(CHUNK, seed, {split: found})))


def folder(out: Path, side: str, task: str, seeds: list[int]) -> ResultsFolder:
    kind = "tagging" if task == CHUNK else "glue"
    return ResultsFolder(out / side, kind, {task: dev_outputs.load_task(out / side, task, seeds)})


def side_estimate(results: ResultsFolder, task: str):
    splits = results.outputs[task]
    split, metric = _metric(task, splits)
    return intervals.estimate([intervals.part(splits[split], [metric])])


def _metric(task: str, splits) -> tuple[str, str]:
    if task in GLUE_TASKS:
        return GLUE_TASKS[task].dev_splits[0], GLUE_TASKS[task].paper_metric
    split = next(iter(splits))
    return split, splits[split].headline


def task_row(out: Path, task: str, first: str, other: str) -> dict | None:
    """Side `first` against `other` on the seeds both finished; None before any."""
    mine, theirs = units(out, first, task), units(out, other, task)
    if task == CHUNK:
        for side, found in ((first, mine), (other, theirs)):
            for seed in found if side != "harness" else ():
                count_tags(out, side, seed)
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return None
    a, b = folder(out, first, task, seeds), folder(out, other, task, seeds)
    (row,) = [r for r in compare(a, b)["rows"] if r["task"] == task]
    return {"task": task, "seeds": seeds, "metric": row["metric"], "harness": side_estimate(a, task),
            "other": side_estimate(b, task), "row": row,
            "harness_rate": statistics.median(mine[s]["examples_per_s"] for s in seeds),
            "other_rate": statistics.median(theirs[s]["examples_per_s"] for s in seeds),
            "harness_units": [mine[s] for s in seeds], "other_units": [theirs[s] for s in seeds]}


def _estimate(found) -> str:
    return f"{100 * found.value:.1f} [{100 * found.low:.1f}, {100 * found.high:.1f}]"


def _p(value: float) -> str:
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def table(out: Path, tasks: list[str], counts: dict, sides: tuple[str, str] = ("harness", "trainer"),
          names: tuple[str, str] = ("harness", "Trainer")) -> str:
    a, b = names
    header = (f"| task (metric) | train / dev examples | seeds | {a} | {b} | {a} - {b} [95% CI] | p "
              f"| verdict | {a} ex/s | {b} ex/s | speed ratio |")
    lines = [header, "|" + "---|" * 11]
    for task in tasks:
        found = task_row(out, task, *sides)
        size = counts.get(task, {})
        sizes = f"{size.get('train', '?')} of {size.get('train_of', '?')} / {size.get('dev', '?')} of " \
                f"{size.get('dev_of', '?')}"
        if found is None:
            lines.append(f"| {NAMES[task]} | {sizes} | 0 | | | not run yet | | | | | |")
            continue
        row, rates = found["row"], (found["harness_rate"], found["other_rate"])
        difference = f"{row['difference']:+.2f} [{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]"
        lines.append(
            f"| {NAMES[task]} ({found['metric']}) | {sizes} | {len(found['seeds'])} "
            f"| {_estimate(found['harness'])} | {_estimate(found['other'])} | {difference} "
            f"| {_p(row['p_value'])} | {row['verdict']} | {rates[0]:.1f} | {rates[1]:.1f} "
            f"| {rates[0] / rates[1]:.2f}x |")
    return "\n".join(lines)


def markdown(out: Path, tasks: list[str], seeds: int, counts: dict, command: str, machine: str) -> str:
    """The table, and what each side ran, from what OUTPUT holds."""
    parts = [table(out, tasks, counts)]
    checked = [t for t in tasks if units(out, "trainer-fp32", t)]
    if checked:
        parts += ["", "The Trainer in bf16 against the Trainer in fp32 (does bf16 train correctly here?):",
                  "",
                  table(out, checked, counts, ("trainer", "trainer-fp32"), ("Trainer bf16", "Trainer fp32"))]
    parts += ["", f"command: `{command}` ({machine}); output: {out}"]
    return "\n".join(parts) + "\n"

"""GLUE data as `datasets.Dataset`s with columns text_a, [text_b], label, idx.

From the Hub (nyu-mll/glue) or a classic glue_data directory. The TSVs are read with Python's csv
module rather than `load_dataset("csv")` because their quirks need line-exact control: fields that
start with a quote (QUOTE_NONE), MRPC's BOM, CoLA without a header, and errors that name the line.
The tasks' training inputs alone are also read as a pre-training corpus (`--corpus glue:sst2,rte`).
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path
from typing import NamedTuple

from datasets import Dataset

from foundation.infra.errors import UserError
from tasks.registry import GLUE_TASKS, GlueTask

csv.field_size_limit(sys.maxsize)  # some QNLI/MNLI sentences exceed csv's 128 KiB default


def glue_dir(data_dir: str | None, fallback: Path | None = None) -> Path | None:
    """The local glue_data directory from the flag, else GLUE_DIR, else `fallback` where it is a folder (the
    shared data's glue/, which pre-training's corpus and the demo read too); None means the Hugging Face
    Hub."""
    chosen = data_dir or os.environ.get("GLUE_DIR")
    if not chosen:
        return fallback if fallback is not None and fallback.is_dir() else None
    path = Path(chosen).expanduser()
    if not path.is_dir():
        source = "--data-dir" if data_dir else "GLUE_DIR"
        raise UserError(f"GLUE data directory {chosen!r} ({source}) does not exist; point it at the "
                        "folder holding CoLA/, SST-2/, ... (download_glue_data.py layout)")
    return path


def load_glue(task: GlueTask, data_dir: Path | None) -> dict[str, Dataset]:
    """All splits of `task`; test splits may be absent locally (then no server file is written)."""
    if data_dir is None:
        return _load_hub(task)
    folder = data_dir / task.dir_name
    if not folder.is_dir():
        raise UserError(f"no {task.dir_name}/ folder in {str(data_dir)!r} for task {task.name!r}; "
                        "download it or drop the task from --tasks")
    splits = {}
    for split, file_name in task.files.items():
        path = folder / file_name
        if not path.is_file():
            if split.startswith("test") and task.predicted_by is None:
                continue
            raise UserError(f"missing {split} file {str(path)!r} for task {task.name!r}; "
                            "restore it from the GLUE download or drop the task from --tasks")
        splits[split] = read_tsv(task, path, labelled=not split.startswith("test"))
    return splits


class TaskInputs(NamedTuple):
    """One task's training inputs, as a pre-training corpus reads them."""

    task: str
    file: str  # the file read, or HUB
    inputs: list[tuple[str, ...]]  # each training example's one or two texts


class CorpusInputs(NamedTuple):
    """The training inputs of the tasks a corpus spec names, and where they were read."""

    data_dir: str  # the glue_data folder, or HUB
    tasks: list[TaskInputs]


HUB = "hub:nyu-mll/glue"
CORPUS_SPLIT = "train"  # never dev or test: pre-training on them would leak what a run is scored on


def corpus_inputs(spec: str, data_dir: str | None, fallback: Path) -> CorpusInputs:
    """The training inputs of the tasks `glue:NAME,...` names, in the order given, from --data-dir, else
    GLUE_DIR, else `fallback` where it is a folder, else the Hub; a task without them is one UserError."""
    names = list(dict.fromkeys(name.strip().lower() for name in spec.partition(":")[2].split(",")
                               if name.strip()))
    unknown = [name for name in names if name not in GLUE_TASKS]
    if not names or unknown:
        what = f"unknown GLUE task {unknown[0]!r}" if unknown else "no task"
        raise UserError(f"corpus {spec!r} names {what}; write glue:TASK,... with tasks from "
                        f"{', '.join(GLUE_TASKS)}")
    root = glue_dir(data_dir, fallback)
    return CorpusInputs(str(root) if root else HUB, [_training_inputs(GLUE_TASKS[name], root, spec)
                                                     for name in names])


def _training_inputs(task: GlueTask, root: Path | None, spec: str) -> TaskInputs:
    """The task's training inputs (and the file read) from `root`, or from the Hub when it is None."""
    if CORPUS_SPLIT not in task.files:
        raise UserError(f"GLUE task {task.name!r} in corpus {spec!r} has no training split (only "
                        f"{', '.join(task.files)}); the corpus takes training text only: drop {task.name}")
    if root is None:
        examples, file = load_glue(task, None)[CORPUS_SPLIT], HUB
    else:
        path = root / task.dir_name / task.files[CORPUS_SPLIT]
        if not path.is_file():
            raise UserError(f"GLUE task {task.name!r} in corpus {spec!r} has no training file {str(path)!r} "
                            f"(the corpus takes training text only, never dev or test); add it or drop "
                            f"{task.name}")
        examples, file = read_tsv(task, path, labelled=True), str(path.resolve())
    sides = [examples[column] for column in ("text_a", "text_b") if column in examples.column_names]
    return TaskInputs(task.name, file, list(zip(*sides, strict=True)))


def read_tsv(task: GlueTask, path: Path, labelled: bool) -> Dataset:
    """One GLUE TSV file, validated row by row."""
    columns: dict[str, list] = {"text_a": [], "label": [], "idx": []}
    if len(task.tsv_columns) == 2:
        columns["text_b"] = []
    # utf-8-sig drops MRPC's BOM; newline="" lets csv handle a missing final newline.
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = list(task.headerless) if task.headerless and labelled else next(reader, None)
        if header is None:
            raise UserError(f"{path}: empty file; restore it from the GLUE download")
        positions = _positions(task, path, header, labelled)
        for row in reader:
            if not row or row == [""]:
                continue
            where = f"{path}:{reader.line_num}"
            if len(row) != len(header):
                raise UserError(f"{where}: expected {len(header)} tab-separated fields, found {len(row)}; "
                                "fix or remove that line")
            columns["text_a"].append(row[positions["text_a"]])
            if "text_b" in columns:
                columns["text_b"].append(row[positions["text_b"]])
            columns["label"].append(_label(task, row[positions["label"]], where) if labelled else -1)
            columns["idx"].append(int(row[positions["idx"]]) if "idx" in positions
                                  else len(columns["idx"]))
    if not columns["text_a"]:
        raise UserError(f"{path}: no examples in this split; restore the file from the GLUE download")
    return Dataset.from_dict(columns)


def _positions(task: GlueTask, path: Path, header: list[str], labelled: bool) -> dict[str, int]:
    wanted = {"text_a": task.tsv_columns[0]}
    if len(task.tsv_columns) == 2:
        wanted["text_b"] = task.tsv_columns[1]
    if labelled:
        wanted["label"] = task.tsv_label
    else:
        wanted["idx"] = task.tsv_index
    missing = [name for name in wanted.values() if name not in header]
    if missing:
        raise UserError(f"{path}: header lacks column(s) {', '.join(map(repr, missing))} "
                        f"(found {', '.join(header)}); is this the {task.dir_name} file?")
    return {key: header.index(name) for key, name in wanted.items()}


def _label(task: GlueTask, raw: str, where: str) -> int | float:
    if task.label_names is None:
        try:
            return float(raw)
        except ValueError:
            raise UserError(f"{where}: STS-B score {raw!r} is not a number; fix the score column") from None
    if raw not in task.label_names:
        raise UserError(f"{where}: unknown label {raw!r} for {task.name}; expected one of "
                        f"{', '.join(task.label_names)}")
    return task.label_names.index(raw)


def _load_hub(task: GlueTask) -> dict[str, Dataset]:
    from datasets import load_dataset

    try:
        loaded = load_dataset("nyu-mll/glue", task.name)
    except Exception as error:  # offline or not cached
        raise UserError(f"could not load GLUE {task.name!r} from the Hugging Face Hub "
                        f"({type(error).__name__}) and no shared data folder has it; pass --data-dir or "
                        "set GLUE_DIR to a glue_data folder, or SHARED_DIR to one holding data/glue"
                        ) from error
    renames = {"text_a": task.hub_columns[0]} | (
        {"text_b": task.hub_columns[1]} if len(task.hub_columns) == 2 else {})
    return {split: loaded[split].rename_columns({v: k for k, v in renames.items()})
            for split in task.files if split in loaded}

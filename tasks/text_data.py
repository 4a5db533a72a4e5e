"""Your own labelled text read into `datasets.Dataset`s (columns text_a, [text_b], label, idx), validated.

`datasets` reads the files (CSV, TSV, JSON Lines, Parquet) and Hub data sets; this module checks what a
reader does not: UTF-8, duplicate columns, JSON lines that do not parse, missing columns, empty cells,
label types, labels the training split never shows. Every problem is one UserError naming file:line
(Parquet: file, row) and the fix, raised before anything is written.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset

from foundation.infra.errors import UserError
from tasks.task_files import decode_utf8, require_file
from tasks.text_task import (
    FORMATS,
    MAX_LENGTH,
    NUM_EPOCHS,
    PROBLEM_METRICS,
    THRESHOLD,
    TextDescription,
    TextTask,
)

csv.field_size_limit(sys.maxsize)
# results.json's description keeps each setting's first key: the problem is "kind" there
RECORDED = {"problem": "kind"}
FIELDS = {key: name for name, key in RECORDED.items()}


@dataclass
class Source:
    """One split's rows as read, with where each row came from (for file:line errors)."""

    split: str
    where: str  # the file, or dataset[split]
    rows: Dataset
    lines: list[int] | None = None  # the file line each row starts on; None: rows are counted (Parquet, Hub)
    digest: str = ""

    def at(self, row: int) -> str:
        if self.lines is not None:
            return f"{self.where}:{self.lines[row]}"
        return f"{self.where} row {row + 1}"


@dataclass
class TextData:
    """The task resolved from the data, its splits in harness columns, and results.json's data block."""

    task: TextTask
    splits: dict[str, Dataset]  # train, validation, [test]
    record: dict = field(default_factory=dict)
    labelled: frozenset[str] = frozenset({"train", "validation"})  # the splits with gold labels


@dataclass(frozen=True)
class CheckpointLabels:
    """What a fine-tuned checkpoint says of its labels (harness eval): they stand in for a training file's."""

    problem: str | None  # classification, regression, multilabel; None: its config does not say
    names: tuple[str, ...]  # config.id2label in id order; empty where it holds only LABEL_0, LABEL_1, ...


def read(config: TextDescription, base: Path | None = None,
         checkpoint: CheckpointLabels | None = None) -> TextData:
    """Read and validate the described data; `base`: the folder a task file's relative paths start from;
    `checkpoint` (harness eval): the fine-tuned model's labels, which name the classes where no --train is
    given."""
    sources = _sources(config, base, checkpoint is not None)
    first = next(iter(sources.values()))
    text_columns = config.text
    if not text_columns:
        raise UserError(f"name the text column with --text (columns of {first.where}: "
                        f"{', '.join(first.rows.column_names)})")
    for source in sources.values():
        _check_columns(source, text_columns, config.label, labelled=source.split != "test")
    problem, raw = _labels(sources, config, checkpoint)
    if "train" in raw:
        names = _label_names(problem, raw["train"], sources["train"])
    else:
        names = _checkpoint_names(problem, checkpoint)
    for split in ("validation", "test"):
        if split in raw and problem != "regression":
            _check_seen(sources[split], raw[split], names, problem)
    metrics = PROBLEM_METRICS[problem]
    headline = config.metric or metrics[0]
    if headline not in metrics:
        raise UserError(f"metric {headline!r} does not score a {problem} task; choose one of "
                        f"{', '.join(metrics)}")
    name = config.task_name
    from tasks.registry import GLUE_TASKS, SQUAD_TASKS

    if name in GLUE_TASKS or name in {t.name for t in SQUAD_TASKS.values()}:
        raise UserError(f"task name {name!r} is a named task's; pass --name with another name")
    if config.choose_threshold and problem != "multilabel":
        raise UserError(f"--choose-threshold chooses a multi-label task's threshold, and {name!r} is "
                        f"{problem}; leave it out")
    task = TextTask(name, tuple(text_columns), config.label, problem, names, metrics, headline,
                    NUM_EPOCHS, MAX_LENGTH, threshold=config.threshold,
                    choose_threshold=config.choose_threshold)
    splits = {split: _harness_rows(source, text_columns, raw.get(split), problem, names)
              for split, source in sources.items()}
    if "train" not in splits:  # harness eval without --train: it trains nothing
        splits["train"] = splits["validation"].select([])
    record: dict[str, Any] = {"task": task.record(), "description": _description(config, base), "files": {
        split: {"source": source.where, "sha256": source.digest, "rows": len(source.rows)}
        for split, source in sources.items()}}
    if "validation" not in splits:
        splits, record["dev"] = _draw_dev(splits, config, sources["train"], raw["train"], problem, names)
    _check_scored(splits["validation"], sources, config)
    return TextData(task, splits, record, frozenset(raw) | {"validation"})


def _check_scored(dev: Dataset, sources: dict[str, Source], config: TextDescription) -> None:
    """Two dev rows at least: intervals and `harness compare` resample them (one crashed the run's summary
    after training, in scipy's bootstrap)."""
    if len(dev) >= 2:
        return
    if "validation" in sources:
        raise UserError(f"{sources['validation'].where}: the dev split has {len(dev)} row; scores' intervals "
                        "and harness compare resample its rows, so it needs at least 2: add rows")
    rows = len(sources["train"].rows)
    raise UserError(f"{sources['train'].where}: dev_fraction {config.dev_fraction} of {rows} rows draws "
                    f"{len(dev)} dev row; intervals and harness compare need at least 2: pass a larger "
                    "dev_fraction, more rows or --dev")


# ---- sources -------------------------------------------------------------------------------------


def _sources(config: TextDescription, base: Path | None, evaluating: bool = False) -> dict[str, Source]:
    if config.dataset and (config.train or config.dev):
        raise UserError("pass either --dataset or --train/--dev files, not both")
    if config.dataset:
        return _hub_sources(config)
    if evaluating and not (config.train or config.dev):
        raise UserError("pass --dev FILE (with --text and --label) to score on, or --dataset ORG/NAME")
    if not (config.train or evaluating):
        raise UserError("pass --train FILE (with --text and --label), or --dataset ORG/NAME")
    files = {"train": config.train, "validation": config.dev, "test": config.test}
    return {split: _read_file(split, _path(value, base)) for split, value in files.items() if value}


def _path(value: str, base: Path | None) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() or base is None else base / path


def _read_file(split: str, path: Path) -> Source:
    require_file(split, path, " (or a folder datasets saved as --dataset)")
    file_format = FORMATS.get(path.suffix.lower())
    if file_format is None:
        raise UserError(f"{path}: unknown format {path.suffix!r}; use .csv, .tsv, .jsonl or .parquet")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    lines, options = None, {}
    if file_format == "json":
        lines = _json_lines(path, decode_utf8(path, data))
    elif file_format == "csv":
        header, lines = _csv_lines(path, decode_utf8(path, data))
        # every cell as text: labels are typed here, and "NA" is a word, not a missing value
        from datasets import Features, Value

        options = {"sep": "\t" if path.suffix.lower() == ".tsv" else ",", "keep_default_na": False,
                   "features": Features({name: Value("string") for name in header})}
    if lines == []:
        raise UserError(f"{path}: no rows in the {split} split; add examples or drop the file")
    rows = _load(file_format, path, options)
    if lines is not None and len(lines) != len(rows):
        raise UserError(f"{path}: read {len(rows)} rows but the file holds {len(lines)} records; check its "
                        "quoting")
    if not len(rows):
        raise UserError(f"{path}: no rows in the {split} split; add examples or drop the file")
    return Source(split, str(path), rows, lines, digest)


def _load(file_format: str, path: Path, options: dict) -> Dataset:
    from datasets import load_dataset
    from datasets.utils import logging as datasets_logging

    # A fresh cache each time: datasets keys local files on path and mtime, so an edit within the same
    # second would read stale rows; the rows are kept in memory, nothing is left behind.
    shown = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()  # "Generating train split" bars for a file read in a blink
    with tempfile.TemporaryDirectory(prefix="harness-text-") as cache:
        try:
            return load_dataset(file_format, data_files=str(path), split="train", cache_dir=cache,
                                keep_in_memory=True, **options)
        except Exception as error:  # pyarrow, pandas: a file their reader cannot parse
            reason = str(error).strip().splitlines()[-1][:200] if str(error).strip() else type(error).__name__
            raise UserError(f"{path}: cannot be read as {path.suffix.lstrip('.')} ({reason}); check the "
                            "file's format") from error
        finally:
            if shown:
                datasets_logging.enable_progress_bar()


def _hub_sources(config: TextDescription) -> dict[str, Source]:
    from datasets import load_dataset

    wanted = {"train": config.train_split, "validation": config.dev_split}
    sources = {}
    for split, name in wanted.items():
        if not name:
            continue
        where = f"{config.dataset}[{name}]"
        try:
            rows = load_dataset(config.dataset, config.dataset_config or None, split=name)
        except Exception as error:
            raise UserError(f"cannot load {where} ({type(error).__name__}: {str(error)[:160]}); offline, "
                            "a Hub data set must be in the datasets cache (load it once online), or pass "
                            "--train FILE") from error
        if not len(rows):
            raise UserError(f"{where}: no rows; choose another split")
        sources[split] = Source(split, where, rows, None, rows._fingerprint)
    return sources


def _csv_lines(path: Path, text: str) -> tuple[list[str], list[int]]:
    """The header, and the line each data row starts on; refuses duplicate column names and ragged rows."""
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = next(reader, None)
    if not header:
        raise UserError(f"{path}:1: no header; the first line must name the columns")
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise UserError(f"{path}:1: duplicate column name(s) {', '.join(map(repr, duplicates))}; rename them")
    starts, start = [], reader.line_num + 1
    for row in reader:
        if row and row != [""]:
            if len(row) != len(header):
                raise UserError(f"{path}:{start}: {len(row)} fields where the header has {len(header)}; "
                                "fix the row's quoting or separators")
            starts.append(start)
        start = reader.line_num + 1
    return header, starts


def _json_lines(path: Path, text: str) -> list[int]:
    """The line of each JSON object; refuses a line that does not parse or is not an object."""
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}:{number}: not valid JSON ({error.msg}); one JSON object per "
                            "line") from None
        if not isinstance(value, dict):
            raise UserError(f"{path}:{number}: a JSON {type(value).__name__}, not an object; one object "
                            "per line")
        lines.append(number)
    return lines


# ---- columns and labels --------------------------------------------------------------------------


def _check_columns(source: Source, text: tuple[str, ...], label: str, labelled: bool) -> None:
    columns = source.rows.column_names
    wanted = [*text, label] if labelled or label in columns else list(text)
    missing = [name for name in wanted if name not in columns]
    if missing:
        raise UserError(f"{source.where}: no column {', '.join(map(repr, missing))}; its columns are "
                        f"{', '.join(columns)} (pass --text / --label naming them)")
    for name in text:
        for row, value in enumerate(_column(source, name)):
            if not isinstance(value, str) or not value.strip():
                empty = value is None or (isinstance(value, str) and not value.strip())
                shown = "an empty cell" if empty else f"a {type(value).__name__} ({str(value)[:40]!r})"
                raise UserError(f"{source.at(row)}: column {name!r} holds {shown}, not text; fill it or "
                                "drop the row")


def _column(source: Source, name: str) -> list:
    """A column's values as a list, read in one slice: iterating `rows[name]` (a datasets Column) formats
    the table row by row, ~35 s a pass over SST-2's 67,349 rows on a busy CPU."""
    return source.rows[name][:]


def _labels(sources: dict[str, Source], config: TextDescription,
            checkpoint: CheckpointLabels | None = None) -> tuple[str, dict[str, list]]:
    """The task's problem and each labelled split's labels as Python values (names, floats, or name lists)."""
    raw = {split: _column(source, config.label) for split, source in sources.items()
           if config.label in source.rows.column_names}
    for split, values in raw.items():
        for row, value in enumerate(values):
            if value is None or (isinstance(value, str) and not value.strip()) or \
                    (isinstance(value, float) and math.isnan(value)):
                raise UserError(f"{sources[split].at(row)}: empty label in column {config.label!r}; label "
                                "the row or drop it")
    first = "train" if "train" in raw else "validation"
    problem = config.problem
    if problem == "auto" and first != "train" and checkpoint is not None and checkpoint.problem:
        problem = checkpoint.problem
    if problem == "auto":
        problem = _infer_problem(raw[first], config, sources[first])
    return problem, {split: _typed(values, problem, config, sources[split]) for split, values in raw.items()}


def _type_of(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "text"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        try:
            float(value)
            return "number"
        except ValueError:
            return "text"
    return type(value).__name__


def _infer_problem(values: list, config: TextDescription, source: Source) -> str:
    types = [_type_of(v) for v in values]
    first = types[0]
    for row, found in enumerate(types):
        if found != first:
            raise UserError(f"{source.at(row)}: label {values[row]!r} is {found} but the column's first "
                            f"label {values[0]!r} is {first}; make the column one type, or set --problem")
    if first == "list" or config.label_separator:
        return "multilabel"
    if first == "number":
        for row, value in enumerate(values):  # "nan" and "inf" parse as floats but are no label
            if not math.isfinite(float(value)):
                raise UserError(f"{source.at(row)}: label {value!r} is not a finite number; label the row "
                                "or drop it, or set --problem")
        if any(float(v) != int(float(v)) for v in values):
            return "regression"
    return "classification"


def _typed(values: list, problem: str, config: TextDescription, source: Source) -> list:
    typed = []
    for row, value in enumerate(values):
        if problem == "regression":
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = math.nan
            if not math.isfinite(number) or isinstance(value, bool | list):
                raise UserError(f"{source.at(row)}: label {value!r} is not a finite number, which a "
                                "regression task needs; fix it or set --problem classification")
            typed.append(number)
        elif problem == "multilabel":
            if isinstance(value, list):
                items = value
            elif isinstance(value, str) and config.label_separator:
                items = [item.strip() for item in value.split(config.label_separator) if item.strip()]
            else:
                raise UserError(f"{source.at(row)}: label {value!r} is not a list; a multilabel row needs a "
                                "JSON list, or --label-separator for a CSV cell")
            typed.append(sorted({_name(item) for item in items}))
        else:
            if isinstance(value, list):
                raise UserError(f"{source.at(row)}: label {value!r} is a list; set --problem multilabel")
            typed.append(_name(value))
    return typed


def _name(value: Any) -> str:
    """A label's name: integral numbers without a fraction ("1", not "1.0"), text as it is."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        try:
            number = float(value)
            if number.is_integer() and value.strip().lstrip("+-").replace(".", "", 1).isdigit():
                return str(int(number))
        except ValueError:
            pass
        return value.strip()
    return str(value)


def _label_names(problem: str, train: list, source: Source) -> tuple[str, ...] | None:
    """Sorted label names as HF's run_classification sorts them (numerically where all are integers)."""
    if problem == "regression":
        return None
    names = {name for value in train for name in (value if problem == "multilabel" else [value])}
    if problem == "classification" and len(names) < 2:
        raise UserError(f"{source.where}: every training row has the label {next(iter(names))!r}; a "
                        "classifier needs at least two labels")
    if not names:
        raise UserError(f"{source.where}: no row has a label; a multilabel task needs some")
    integral = all(name.lstrip("-").isdigit() for name in names)
    return tuple(sorted(names, key=int) if integral else sorted(names))


def _checkpoint_names(problem: str, checkpoint: CheckpointLabels) -> tuple[str, ...] | None:
    """The classes of a checkpoint scored without its training file: its own label names, in its order."""
    if problem == "regression":
        return None
    if not checkpoint.names:
        raise UserError("the checkpoint's config.json names no labels (only LABEL_0, LABEL_1, ...), so its "
                        "classes' order is unknown; pass the --train file it was fine-tuned on")
    return checkpoint.names


def _check_seen(source: Source, values: list, names: tuple[str, ...], problem: str) -> None:
    known = set(names)
    for row, value in enumerate(values):
        for name in (value if problem == "multilabel" else [value]):
            if name not in known:
                raise UserError(f"{source.at(row)}: label {name!r} never occurs in training; the model "
                                f"can only predict {', '.join(names[:20])}; add training rows with it or "
                                "drop the row")


def _harness_rows(source: Source, text: tuple[str, ...], labels: list | None, problem: str,
                  names: tuple[str, ...] | None) -> Dataset:
    columns: dict[str, list] = {"text_a": _column(source, text[0])}
    if len(text) == 2:
        columns["text_b"] = _column(source, text[1])
    columns["label"] = _encoded(labels, problem, names) if labels is not None else [-1] * len(source.rows)
    columns["idx"] = list(range(len(source.rows)))
    return Dataset.from_dict(columns)


def _encoded(labels: list, problem: str, names: tuple[str, ...] | None) -> list:
    if problem == "regression":
        return labels
    index = {name: i for i, name in enumerate(names)}
    if problem == "multilabel":  # multi-hot floats: BCEWithLogitsLoss's targets
        return [[1.0 if name in set(row) else 0.0 for name in names] for row in labels]
    return [index[name] for name in labels]


def _draw_dev(splits: dict[str, Dataset], config: TextDescription, source: Source, train_labels: list,
              problem: str, names) -> tuple[dict[str, Dataset], dict]:
    """A dev split of dev_fraction of train, drawn with dev_seed (row ids stay the file's)."""
    train = splits["train"]
    if len(train) < 2:
        raise UserError(f"{source.where}: {len(train)} row(s) cannot be split into train and dev; add rows "
                        "or pass --dev")
    parts = train.train_test_split(test_size=config.dev_fraction, seed=config.dev_seed, shuffle=True)
    kept, dev = parts["train"], parts["test"]
    if problem == "classification":
        seen = set(kept["label"])
        for row, label in zip(dev["idx"], dev["label"], strict=True):
            if label not in seen:
                raise UserError(f"{source.at(row)}: label {names[label]!r} fell only into the drawn dev "
                                f"split (dev_seed={config.dev_seed}); pass --dev, another --dev-seed, or "
                                "more rows")
    return {**splits, "train": kept, "validation": dev}, {
        "drawn_from": "train", "fraction": config.dev_fraction, "seed": config.dev_seed,
        "train_rows": len(kept), "dev_rows": len(dev)}


def _description(config: TextDescription, base: Path | None) -> dict:
    """The description with its files' absolute paths: what an export re-reads the dev split from."""
    described = dataclasses.asdict(config)
    for key in ("train", "dev", "test"):
        if described[key]:
            described[key] = str(_path(described[key], base).resolve())
    described["text"] = list(described["text"])
    if described["threshold"] == THRESHOLD:  # recorded where it departs: older results hold none
        del described["threshold"]
    if not described["choose_threshold"]:  # as threshold: recorded where it departs
        del described["choose_threshold"]
    if not described["class_weights"]:  # the run's setting records the weights used; older results: none
        del described["class_weights"]
    return {RECORDED.get(key, key): value for key, value in described.items()}


def description_of(record: dict) -> TextDescription:
    """A results.json data block's description, as read() takes it."""
    if not isinstance(record, dict) or "description" not in record:
        raise UserError("results.json does not describe the task's files (a run of an older version); "
                        "fine-tune again to export it")
    described = {FIELDS.get(key, key): value for key, value in record["description"].items()}
    described["text"] = tuple(described["text"])
    return TextDescription(**described)


"""Your own labelled text as a task: its description (flags or a TOML task file, the same keys) and the
task it resolves to once the data is read (problem, label names, metrics).

Torch-free, so the CLI can build its help and check a description without loading torch. Reading and
validating the files is tasks/text_data.py; features, head and scoring are tasks/text.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from foundation.infra.settings import Flag, setting
from tasks import class_weights
from tasks.kind_text import CommandText
from tasks.read_task import ReadTask
from tasks.task_files import recorded_digests

Problem = Literal["auto", "classification", "regression", "multilabel"]

# The metrics each problem reports, its default headline first (HF's run_classification.py scores
# accuracy / mse / micro-F1; ELECTRA's paper reports Spearman for its regression task, STS-B).
PROBLEM_METRICS: dict[str, tuple[str, ...]] = {
    "classification": ("accuracy", "macro_f1", "mcc"),
    "regression": ("spearman", "pearson"),
    "multilabel": ("micro_f1", "macro_f1"),
}
NUM_EPOCHS = 3  # ELECTRA's GLUE recipe (configure_finetuning.py: num_train_epochs)
MAX_LENGTH = 128  # ELECTRA's GLUE max_seq_length
THRESHOLD = 0.5  # multi-label: HF's run_classification.py predicts a label where its logit is above 0
FORMATS = {".csv": "csv", ".tsv": "csv", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}

RUN_EPILOG = """examples:
  harness run text --model electra-small --train train.csv --dev dev.csv --text question \\
      --label coarse_label --seeds 3
  harness run text --model M --train reviews.jsonl --text title,body --label stars --problem regression
  harness run text --model M --task-file tickets.toml num_epochs=5

The task is described once, by flags or a TOML --task-file with the same keys (train, dev, test, text,
label, problem, metric, ...; a task file's paths are relative to it; flags win over it). results.json
records it with each file's sha256: a resume refuses a changed file, and `harness compare` refuses runs on
other data. Without a dev file, dev_fraction of train is drawn with dev_seed, and recorded.
"""
SEARCH_EPILOG = """examples:
  harness search text --model M --train train.csv --dev dev.csv --text question --label coarse_label \\
      --trials 20
  harness run text --model M --train train.csv --dev dev.csv --text question --label coarse_label \\
      --params-from runs/search/text-train-M/best_params.json --seeds 5
"""
EVAL_EPILOG = """Your own text: --dev alone is enough where the checkpoint names its labels (config.json's
id2label, as `harness run text` saves them); its classes are then the checkpoint's, and a dev label it
does not know is refused. Pass --train as well where id2label holds only LABEL_0, LABEL_1, ..., or where
`harness compare` should pair this evaluation with the run that trained on that file (compare pairs runs
on the same files).
"""
COMMANDS = {
    "run": CommandText(
        "",  # the kind's row in harness/kinds.py says it
        "Fine-tune on your own CSV, TSV, JSON Lines or Parquet files (or a datasets Hub id) with ELECTRA's "
        "recipe; writes results.json, named predictions per split, the models with their label names, logs "
        "to MLflow, prints the scores with intervals.", RUN_EPILOG,
        ("settings (key=value or a TOML --config file; unset ones follow ELECTRA's GLUE recipe for the model "
         "size):",)),
    "eval": CommandText(
        "your own labelled files",
        "Score a fine-tuned checkpoint on your own labelled dev file, described as for harness run text.",
        EVAL_EPILOG,
        flags={"train": {"help": "optional: the file the checkpoint was fine-tuned on; its labels name the "
                                 "classes (without it: the checkpoint's config.json id2label)"},
               "dev": {"help": "the labelled file to score (with no --train and no --dev: pass --dataset)"},
               "test": {"help": "unlabelled (or labelled) file to predict with the checkpoint"},
               "train_split": {"help": "with --dataset: the split whose labels name the classes"},
               "dev_split": {"help": "with --dataset: the split to score (none: drawn as the run drew it)"},
               "name": {"help": "the task's name in results and bundles; default: the --train file's stem, "
                                "else the --dev file's, or the data set's name"},
               "dev_fraction": {"help": "with --train and no --dev: the share of it drawn as the dev split "
                                        "to score, as the run drew it"}}),
    "search": CommandText(
        "search your own data's hyperparameters (its headline metric)",
        "Run trials of an Optuna study on your own labelled files, described as for harness run text; each "
        "trial is scored by the mean headline metric over its trial seeds.", SEARCH_EPILOG),
}


@dataclass(frozen=True)
class TextDescription:
    """A task on your own files, described once: the same keys as flags or in a TOML --task-file."""

    train: str = setting("", role="recipe", flag=Flag("--train", "FILE"), help=(
        "training file: .csv, .tsv, .jsonl or .parquet (a task file's paths are relative to it)"))
    dev: str = setting("", role="recipe", flag=Flag("--dev", "FILE"), help=(
        "dev file scored each epoch; none: dev_fraction of train is drawn with dev_seed and recorded"))
    test: str = setting("", role="output", flag=Flag("--test", "FILE"), help=(
        "unlabelled (or labelled) file to predict after training"))
    dataset: str = setting("", role="recipe", flag=Flag("--dataset", "ORG/NAME"), help=(
        "a `datasets` Hub id (offline: from its cache) or a local dataset folder, instead of files"))
    dataset_config: str = setting("", role="recipe", flag=Flag("--dataset-config", "NAME"), help=(
        "the Hub data set's config name"))
    train_split: str = setting("train", role="recipe", flag=Flag("--train-split", "SPLIT"), help=(
        "with --dataset: the split to train on"))
    dev_split: str = setting("", role="recipe", flag=Flag("--dev-split", "SPLIT"), help=(
        "with --dataset: the dev split (none: drawn from train)"))
    text: tuple[str, ...] = setting((), role="recipe", flag=Flag("--text", "COLUMN[,COLUMN]"), help=(
        "the text column, or two for a sentence pair"))
    label: str = setting("label", role="recipe", flag=Flag("--label", "COLUMN"), help="the label column")
    problem: Problem = setting("auto", role="recipe", formerly=("kind",),
                               flag=Flag("--problem", deprecated=("--kind",)), help=(
        "auto: a list per row is multilabel, numbers with a fraction regression, anything else "
        "classification (names kept)"))
    label_separator: str = setting("", role="recipe", flag=Flag("--label-separator", "SEP"), help=(
        "multilabel in CSV/TSV: the labels of a row in one cell joined by SEP (e.g. '|')"))
    metric: str = setting("", role="recipe", flag=Flag("--metric", "NAME"), help=(
        "headline metric; default: accuracy (classification), spearman (regression), micro_f1 "
        "(multilabel)"))
    name: str = setting("", role="recipe", flag=Flag("--name", "NAME"), help=(
        "the task's name in results, leaderboard and bundles; default: the train file's stem or the "
        "data set's name"))
    dev_fraction: float = setting(0.1, role="recipe", flag=Flag("--dev-fraction", "F"), help=(
        "without a dev file: the share of train drawn as dev"))
    dev_seed: int = setting(0, role="recipe", flag=Flag("--dev-seed", "N"), help=(
        "without a dev file: which rows are drawn"))
    # Here, not in FinetuneConfig: it reads this task's outputs (multi-label only, no effect on training),
    # so it is described with the data, like the metric; a bundle keeps it and answers with it.
    threshold: float = setting(THRESHOLD, role="recipe", flag=Flag("--threshold", "P"), help=(
        "multilabel: a label is predicted where its sigmoid is above P (0.5: its logit above 0); kept in "
        "results.json where it departs from 0.5, in the bundle, and shown by serve's /health"))

    choose_threshold: bool = setting(False, role="recipe", flag=Flag("--choose-threshold"), help=(
        "multilabel: each seed's threshold chosen on dev, the one of 0.05, 0.10, ..., 0.95 with the best "
        "headline metric (a tie: the one nearest 0.5), recorded per seed (metrics' `threshold`) and kept in "
        "the bundle; a departure: the dev score is then tuned on dev"))
    # The labels' weights belong to the data as much as to the training: a task file may state them. The
    # class_weights setting (tasks/config.py), where given, wins; results.json records the one used.
    class_weights: str = setting("", role="recipe", help=(
        "task file: the labels' loss weights, as the class_weights setting takes them (balanced, or "
        "LABEL=WEIGHT,... e.g. neg=1,pos=19); used where class_weights is left at none"))

    percent_scores: ClassVar[bool] = False
    pipeline_tag: ClassVar[str] = "text-classification"  # the Hub's task for all three, regression too
    commands: ClassVar[dict[str, CommandText]] = COMMANDS

    def __post_init__(self):
        problems = []
        if not 0 < self.dev_fraction < 1:
            problems.append(f"dev_fraction must be between 0 and 1, e.g. 0.1 (got {self.dev_fraction})")
        if not 0 < self.threshold < 1:
            problems.append(f"threshold must be between 0 and 1, e.g. 0.5 (got {self.threshold})")
        if len(self.text) > 2:
            problems.append(f"text names {len(self.text)} columns ({', '.join(self.text)}); name one, or "
                            "two for a sentence pair")
        if self.metric and self.metric not in {m for names in PROBLEM_METRICS.values() for m in names}:
            known = sorted({m for names in PROBLEM_METRICS.values() for m in names})
            problems.append(f"unknown metric {self.metric!r}; choose one of {', '.join(known)}")
        if self.class_weights:
            problems += class_weights.parse_errors(self.class_weights)
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def task_name(self) -> str:
        """The task's name in results.json: --name, else the data set's name or the train (or dev) file's
        stem."""
        if self.name:
            return self.name
        if self.dataset:
            return self.dataset.rstrip("/").split("/")[-1]
        return Path(self.train or self.dev).stem

    def grid_tasks(self) -> tuple[str, ...]:
        """The one task a grid trains per model and seed (results.json's name)."""
        return (self.task_name,)

    def for_task(self, name: str) -> TextDescription:
        """The description of grid_tasks()'s one task: itself."""
        return self

    @property
    def output_name(self) -> str:
        """The word after the model's name in a default output folder: the task's name or its data's."""
        return self.name or Path(self.train or self.dataset or "data").stem

    @staticmethod
    def listed() -> list[str]:
        """`harness tasks`' lines for your own files: the problems they can be."""
        lines = ["your own files (harness run text, headline metric first):"]
        return lines + [f"  {problem:14} {','.join(names):30} {NUM_EPOCHS} epochs"
                        for problem, names in PROBLEM_METRICS.items()]

    @staticmethod
    def fingerprint(data: dict | None) -> dict[str, tuple[str, str]]:
        """What results.json records of the data a run read, for `harness compare`: each file's sha256, and
        the dev split drawn from train where there was no dev file."""
        found = recorded_digests(data)
        drawn = (data or {}).get("dev")
        if drawn:
            found["drawn dev split"] = ("draw", json.dumps(drawn, sort_keys=True))
        return found


@dataclass(frozen=True)
class TextTask(ReadTask):
    """A task read from your data: what the loop, the scorer, results and bundles need to know of it.

    Its attributes beside GLUE's (tasks/registry.GlueTask) let the same tables, intervals and bundles
    serve both: dev_splits, paper_metric (the headline), is_regression, num_labels."""

    name: str
    text_columns: tuple[str, ...]
    label_column: str
    problem: str  # classification, regression or multilabel
    label_names: tuple[str, ...] | None  # None: regression
    metrics: tuple[str, ...]
    headline: str
    num_epochs: float = NUM_EPOCHS
    max_length: int = MAX_LENGTH
    target_scale: float = 1.0
    double_unordered: bool = False
    predicted_by: None = None
    threshold: float = THRESHOLD  # multi-label: the sigmoid above which a label is predicted
    choose_threshold: bool = False  # multi-label: each seed's threshold chosen on dev instead

    @property
    def is_regression(self) -> bool:
        return self.problem == "regression"

    @property
    def is_multilabel(self) -> bool:
        return self.problem == "multilabel"

    @property
    def num_labels(self) -> int:
        return 1 if self.label_names is None else len(self.label_names)

    @property
    def problem_type(self) -> str:
        """transformers' problem_type for the head's loss."""
        return {"classification": "single_label_classification", "regression": "regression",
                "multilabel": "multi_label_classification"}[self.problem]

    def record(self) -> dict:
        """results.json's and the bundle's description of the task (its problem under the key "kind")."""
        departs = {"threshold": self.threshold} if self.threshold != THRESHOLD else {}  # older runs: 0.5
        departs |= {"choose_threshold": True} if self.choose_threshold else {}
        return {"name": self.name, "kind": self.problem, "text_columns": list(self.text_columns),
                "label_column": self.label_column, "label_names": list(self.label_names or []) or None,
                "metrics": list(self.metrics), "headline": self.headline} | departs

    @classmethod
    def from_record(cls, record: dict) -> TextTask:
        names = record.get("label_names")
        return cls(record["name"], tuple(record["text_columns"]), record["label_column"], record["kind"],
                   tuple(names) if names else None, tuple(record["metrics"]), record["headline"],
                   threshold=record.get("threshold", THRESHOLD),
                   choose_threshold=record.get("choose_threshold", False))

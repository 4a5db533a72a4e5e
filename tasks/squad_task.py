"""SQuAD as a kind of task: its description (which version, where its files are), the same keys as flags
or in a TOML task file, and what `harness run|eval|search squad` show beside the flags.

Torch-free, so the CLI can build its help and check a description without loading torch. The versions
are rows of tasks/registry.py; reading, windows and scoring are tasks/squad*.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from foundation.infra.settings import Flag, setting
from tasks.kind_text import TEXT_ONLY_SETTINGS, CommandText, task_row
from tasks.registry import SQUAD_TASKS, SquadTask, squad_task

RUN_EPILOG = """examples:
  harness run squad --model electra-small --version 2.0 --data-dir ../shared/data/squad
  harness run squad --model runs/models/tiny --version 1.1 --dev-file dev-v1.1.json max_train_examples=2000

Without a train file (only the dev files exist here), training uses a by-article split of the dev
file: holdout_fraction of its articles are held out for evaluation; a note says so and results.json
records it.
"""
SEARCH_EPILOG = """examples:
  harness search squad --version 1.1 --model M --trials 20 --data-dir ../shared/data/squad \\
      max_train_examples=2000
  harness run squad --version 1.1 --model M --params-from runs/search/squad-squad-M/best_params.json \\
      --seeds 3 --data-dir ../shared/data/squad
"""


@dataclass(frozen=True)
class SquadDescription:
    """A SQuAD version and its files, described once: the same keys as flags or in a TOML --task-file."""

    version: str = setting("1.1", role="recipe", flag=Flag("--version", "VERSION"), help=(
        f"SQuAD version: {' or '.join(SQUAD_TASKS)}"))
    data_dir: str = setting("", role="recipe", flag=Flag("--data-dir", "DATA_DIR"), help=(
        "folder of train-vX.json/dev-vX.json (default: $SQUAD_DIR, else the Hub)"))
    train_file: str = setting("", role="recipe", flag=Flag("--train-file", "TRAIN_FILE"), help=(
        "official-format training JSON (with --dev-file)"))
    dev_file: str = setting("", role="recipe", flag=Flag("--dev-file", "DEV_FILE"), help=(
        "official-format dev JSON; alone, its articles are split"))

    percent_scores: ClassVar[bool] = True  # as the official script gives them (harness compare's scale)
    refused: ClassVar[tuple[str, ...]] = TEXT_ONLY_SETTINGS  # not in its --help; refused if set
    pipeline_tag: ClassVar[str] = "question-answering"  # the Hub's task (a model card's pipeline_tag)
    hub_datasets: ClassVar[dict[str, tuple[str, str | None, str]]] = {
        task.name: (f"rajpurkar/{task.name}", None, f"SQuAD {task.version}") for task in SQUAD_TASKS.values()}
    commands: ClassVar[dict[str, CommandText]] = {
        "run": CommandText(
            "",  # the kind's row in harness/kinds.py says it
            "Fine-tune on SQuAD with ELECTRA's recipe; writes results.json, predictions.json (and "
            "null_odds.json for 2.0), logs to MLflow, prints EM/F1.", RUN_EPILOG,
            ("settings (key=value or a TOML --config file; max_length defaults to "
             f"{SQUAD_TASKS['1.1'].max_length}):", "SQuAD settings:")),
        "eval": CommandText(
            "a SQuAD span model",
            "Score a fine-tuned SQuAD checkpoint on the dev questions (ELECTRA's answerability and joint "
            "heads where it saved them).",
            flags={"train_file": {
                       "help": "official-format training JSON: with it, the whole dev file is scored"},
                   "dev_file": {
                       "help": "official-format dev JSON; alone, the articles a run would hold out are "
                               "scored (holdout_fraction, holdout_seed), so the two pair"}}),
        "search": CommandText(
            "search SQuAD hyperparameters (dev F1)",
            "Run trials of an Optuna study on SQuAD; each trial fine-tunes its configuration once per "
            "trial seed, is scored by their mean dev F1 and pruned when that lags. SQuAD settings "
            "(doc_stride, ...) are fixed key=value settings, as for harness run squad.", SEARCH_EPILOG),
    }

    def __post_init__(self):
        if self.version not in SQUAD_TASKS:
            versions = ", ".join(SQUAD_TASKS)
            raise ValueError(f"unknown SQuAD version {self.version!r}; choose one of {versions}")

    @property
    def task(self) -> SquadTask:
        return squad_task(self.version)

    def grid_tasks(self) -> tuple[str, ...]:
        """The one task a grid trains per model and seed (results.json's name)."""
        return (self.task.name,)

    def for_task(self, name: str) -> SquadDescription:
        """The description of grid_tasks()'s one task: itself."""
        return self

    @property
    def output_name(self) -> str:
        """The word a run's default output folder takes after the model's name: the version's task."""
        return self.task.name

    @staticmethod
    def listed() -> list[str]:
        """`harness tasks`' lines for SQuAD."""
        return [task_row(task.name, ",".join(task.metrics),
                         "answer spans" + (", unanswerable" if task.has_unanswerable else ""),
                         task.num_epochs, f"harness run squad --version {task.version}")
                for task in SQUAD_TASKS.values()]

    @staticmethod
    def fingerprint(data: dict | None) -> dict[str, tuple[str, str]]:
        """What results.json records of the data a run read, for `harness compare`: the files' names (SQuAD
        records no sha256) and the held-out draw; a run on the Hub's rows records neither."""
        data = data or {}
        found = {}
        for label, key in (("train file", "train_file"), ("dev file", "dev_file")):
            if data.get(key):
                found[label] = ("name", Path(data[key]).name)
        holdout = data.get("holdout")
        if holdout:
            drawn = f"fraction {holdout['fraction']}, seed {holdout['seed']}"
            found["held-out dev articles"] = ("draw", drawn)
        return found

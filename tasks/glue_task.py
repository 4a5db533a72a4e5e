"""GLUE as a kind of task: its description (which tasks, where their data is), the same keys as flags or
in a TOML task file, and what `harness run|eval|search glue` show beside the flags.

Torch-free, so the CLI can build its help and check a description without loading torch. The tasks
themselves are rows of tasks/registry.py; reading them is tasks/glue_data.py, features and head
tasks/glue.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from foundation.infra.settings import Flag, setting
from tasks.kind_text import TEXT_ONLY_SETTINGS, CommandText, task_row
from tasks.registry import GLUE_TASKS, GlueTask, parse_tasks

TRAINED = tuple(name for name, task in GLUE_TASKS.items() if task.predicted_by is None)  # AX: MNLI's model

RUN_EPILOG = """examples:
  harness run glue --model minilm-l6 --tasks rte,mrpc --seeds 3   # data: ../shared/data/glue, else the Hub
  harness run glue --model runs/pretrain/tiny --data-dir ../shared/data/glue num_epochs=1 batch_size=16
"""
SEARCH_EPILOG = """examples:
  harness search glue --task rte --model runs/models/small --trials 30 --data-dir ../shared/data/glue
  # more workers, here or on other machines, on one PostgreSQL study:
  harness search glue --task rte --model M --trials 60 --storage postgresql://USER:PASS@HOST/optuna
  # small dev sets: score each trial by the mean of three seeds
  harness search glue --task rte --model M --trials 30 --trial-seeds 0,1,2
  # then re-measure the best configuration on seeds the search never used (here 3..7):
  harness run glue --model M --tasks rte --params-from runs/search/glue-rte-M/best_params.json --seeds 5
"""


@dataclass(frozen=True)
class GlueDescription:
    """GLUE tasks, described once: the same keys as flags or in a TOML --task-file."""

    tasks: str = setting("rte,mrpc,stsb,cola", role="recipe", flag=Flag("--tasks", "TASKS"), help=(
        f"comma list of {', '.join(GLUE_TASKS)} or all (every task, AX with MNLI: the full server zip)"))
    data_dir: str = setting("", role="recipe", flag=Flag("--data-dir", "DATA_DIR"), help=(
        "classic glue_data directory (default: $GLUE_DIR, else the shared data folder's data/glue "
        "($SHARED_DIR, else ../shared beside the checkout), else the Hub)"))

    percent_scores: ClassVar[bool] = False
    refused: ClassVar[tuple[str, ...]] = TEXT_ONLY_SETTINGS  # not in its --help; refused if set
    # The Hub's task (a model card's pipeline_tag, transformers.pipeline's task) and each task's Hub data set:
    # (id, config, name as a card shows it).
    pipeline_tag: ClassVar[str] = "text-classification"  # regression too: the Hub has no task of its own
    hub_datasets: ClassVar[dict[str, tuple[str, str | None, str]]] = {
        name: ("nyu-mll/glue", name, f"GLUE {task.dir_name}") for name, task in GLUE_TASKS.items()}
    commands: ClassVar[dict[str, CommandText]] = {
        "run": CommandText(
            "",  # the kind's row in harness/kinds.py says it
            "Fine-tune on GLUE tasks with ELECTRA's recipe; writes results.json, dev/test predictions and "
            "glue_submission.zip, logs to MLflow, prints a results table.", RUN_EPILOG,
            ("settings (key=value or a TOML --config file; unset ones follow ELECTRA's recipe for the model "
             "size and task):",)),
        "eval": CommandText(
            "a GLUE classifier or regressor", "Score a fine-tuned GLUE checkpoint on its tasks' dev splits.",
            flags={"tasks": {"required": True, "help": f"comma list of {', '.join(TRAINED)}"}}),
        "search": CommandText(
            "search one GLUE task's hyperparameters",
            "Run trials of an Optuna study on one GLUE task; each trial fine-tunes its configuration once "
            "per trial seed, is scored by their mean dev score and pruned when that lags.", SEARCH_EPILOG,
            flags={"tasks": {"flag": "--task", "metavar": "TASK", "required": True,
                             "help": f"one of {', '.join(TRAINED)}"}}),
    }

    @property
    def output_name(self) -> str:
        """The word after the model's name in a default output folder: none (a GLUE run has several tasks)."""
        return ""

    def glue_tasks(self) -> tuple[GlueTask, ...]:
        """The described tasks, in registry order, or a UserError naming the unknown ones."""
        return tuple(parse_tasks(self.tasks))

    def grid_tasks(self) -> tuple[str, ...]:
        """The tasks a grid trains a unit each (results.json's names): the trained; AX rides with MNLI."""
        return tuple(task.name for task in self.glue_tasks() if task.predicted_by is None)

    def for_task(self, name: str) -> GlueDescription:
        """This description restricted to one trained task and the tasks its model predicts (MNLI: AX)."""
        kept = [task.name for task in self.glue_tasks() if name in (task.name, task.predicted_by)]
        return replace(self, tasks=",".join(kept))

    @staticmethod
    def listed() -> list[str]:
        """`harness tasks`' lines for GLUE."""
        lines = []
        for task in GLUE_TASKS.values():
            labels = ",".join(task.label_names) if task.label_names else "regression 0..5"
            note = f"predicted with the {task.predicted_by.upper()} model" if task.predicted_by else ""
            lines.append(task_row(task.name, ",".join(task.metrics) or "-", labels, task.num_epochs, note))
        return lines

    @staticmethod
    def corpus_inputs(spec: str, data_dir: str | None, fallback: Path):
        """The training inputs of the tasks a pre-training corpus `glue:NAME,...` names, and where they were
        read (tasks/glue_data.py's corpus_inputs; harness/pretraining/task_corpus.py makes the text)."""
        from tasks.glue_data import corpus_inputs  # imports `datasets`: only for a corpus that names tasks

        return corpus_inputs(spec, data_dir, fallback)

    @staticmethod
    def fingerprint(data: dict | None) -> dict[str, tuple[str, str]]:
        """What results.json records of the data a run read, for `harness compare`: nothing (a glue_data
        folder or the Hub; compare pairs the dev examples by id and gold label)."""
        return {}

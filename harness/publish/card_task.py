"""What a model card says of the task a saved model was fine-tuned on, read through the kinds registry
(harness/kinds.py): the Hub's pipeline task, the data set (a Hub id only where it is one), a readable
name, the labels the model answers with, and how the run's own files are identified."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness import kinds
from harness.publish.saved import SavedModel
from reports import results_schema
from tasks.registry import GLUE_TASKS

# A `datasets` Hub id: NAME or ORG/NAME (a local dataset folder is a path, and exists).
HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*$")
PROBLEMS = {"regression": "Text regression", "multilabel": "Multi-label text classification",
            "tagging": "Token classification"}
TITLES = {"text-classification": "Text classification", "question-answering": "Extractive question answering",
          "token-classification": "Token classification"}


@dataclass(frozen=True)
class CardTask:
    """The task of one saved model as a card states it."""

    name: str  # the run's task name: a GLUE task, squad, or your own (--name or the file's stem)
    title: str  # in the card's title: "GLUE RTE", "SQuAD 2.0", your own task's name
    pipeline_tag: str  # the Hub's task: text-classification, token-classification, question-answering
    task_title: str  # model-index's task name: "Text regression", "Token classification", ...
    dataset: tuple[str, str | None] | None  # (Hub id, config) where the data is a Hub data set
    own_files: list[str]  # your own files: a line each (name, sha256, rows), for the text
    labels: list[str]  # config.json's id2label in id order; [] for a regressor or a span model
    problem: str  # single_label, regression, multilabel, tagging, question_answering
    pair: bool  # the classifier reads a pair of texts


def card_task(results: results_schema.ResultsBody, saved: SavedModel) -> CardTask:
    """The task of `saved`, from the kind's description (harness/kinds.py) and the run's data block."""
    described = kinds.load(kinds.of_results(results["format"]).description)
    data = results.get("data") if isinstance(results.get("data"), dict) else {}
    recorded = data.get("description") if isinstance(data.get("description"), dict) else None
    task = data.get("task") if isinstance(data.get("task"), dict) else {}
    # A named corpus or benchmark (GLUE, SQuAD, --task chunk) is a Hub data set; your own files are not.
    key = saved.task if recorded is None else recorded.get("task") or ""
    hub = getattr(described, "hub_datasets", {}).get(key) if isinstance(key, str) else None
    dataset = (hub[0], hub[1]) if hub else _own_hub_dataset(recorded)
    title = hub[2] if hub else task.get("name") or saved.task
    problem = _problem(described.pipeline_tag, task, saved)
    pair = len(task.get("text_columns") or ()) == 2 or (
        saved.task in GLUE_TASKS and len(GLUE_TASKS[saved.task].hub_columns) == 2)
    return CardTask(saved.task, title, described.pipeline_tag,
                    PROBLEMS.get(problem, TITLES[described.pipeline_tag]), dataset,
                    [] if hub else _own_files(data), _labels(saved.folder, problem), problem, pair)


def _own_hub_dataset(recorded: dict | None) -> tuple[str, str | None] | None:
    """Your own task read from a `datasets` Hub id (--dataset ORG/NAME), not from files or a folder."""
    name = (recorded or {}).get("dataset") or ""
    if not HUB_ID.match(name) or Path(name).expanduser().exists():
        return None
    return name, (recorded or {}).get("dataset_config") or None


def _problem(pipeline_tag: str, task: dict, saved: SavedModel) -> str:
    if pipeline_tag == "question-answering":
        return "question_answering"
    if pipeline_tag == "token-classification":
        return "tagging"
    if task.get("kind") in ("regression", "multilabel"):
        return task["kind"]
    glue = GLUE_TASKS.get(saved.task)
    return "regression" if glue is not None and glue.is_regression else "single_label"


def _labels(folder: Path, problem: str) -> list[str]:
    """The names the model answers with (config.json's id2label, what transformers' pipeline returns)."""
    if problem in ("regression", "question_answering"):
        return []
    config = json.loads((folder / "config.json").read_text())
    id2label = config.get("id2label") or {}
    return [str(id2label[key]) for key in sorted(id2label, key=int)]


def _own_files(data: dict) -> list[str]:
    """One line per file the run read (its split, name, sha256 and size), and a dev split drawn from train."""
    lines = []
    for split, file in (data.get("files") or {}).items():
        if not isinstance(file, dict):
            continue
        size = ", ".join(f"{file[key]} {key}" for key in ("rows", "sentences", "tokens") if key in file)
        name = Path(str(file.get("source", "?"))).name
        sized = f" ({size})" if size else ""
        lines.append(f"{split}: `{name}`, sha256 `{file.get('sha256', '?')}`{sized}")
    drawn = data.get("dev")
    if isinstance(drawn, dict) and drawn.get("drawn_from"):
        lines.append(f"validation: {drawn.get('dev_rows', '?')} rows drawn from {drawn['drawn_from']} "
                     f"(fraction {drawn.get('fraction')}, seed {drawn.get('seed')}); the model trained on "
                     f"the other {drawn.get('train_rows', '?')}")
    return lines

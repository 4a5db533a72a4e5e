"""One interface for what differs by kind of task in `harness export onnx`: which tasks, which head, the dev
data and scores, and what the bundle's manifest records of the task.

Each kind's `Exporter` (harness/kinds.py names it) subclasses this; harness/deploy/onnx_export.py,
onnx_source.py, onnx_check.py and bundle_export.py stay generic and ask it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from datasets import Dataset

from foundation.infra.errors import UserError
from harness.deploy.pipeline import Request
from harness.kinds import KINDS, load


class Exporter:
    """A kind of task's side of an export; the defaults are a classifier's."""

    pipeline: ClassVar[str]  # its bundles' Pipeline: the manifest's "kind" (harness/deploy/pipeline.py)
    architecture: ClassVar[str]  # how a fine-tuned checkpoint's architecture ends: ForTokenClassification
    wanted: ClassVar[str]  # what a checkpoint must hold for this kind, for the mismatch message
    has_labels: ClassVar[bool] = True  # whether the checkpoint's outputs must match the task's labels
    extra_inputs: ClassVar[tuple[str, ...]] = ()  # graph inputs beyond the tokenizer's
    runs_describe_task: ClassVar[bool] = False  # a run's results.json describes its task and data (run_task)

    def describes(self, task: Any) -> bool:
        """Whether `task` is one of this kind's."""
        raise NotImplementedError

    def named_tasks(self) -> dict[str, Any]:
        """The tasks `--task NAME` picks for this kind (a kind whose runs describe their own: none)."""
        return {}

    def run_task(self, results: dict, task_name: str, run_dir: Path) -> Any | None:
        """The task a run folder of this kind fine-tuned, as its results.json describes it; None where
        `--task` names it."""
        return None

    def refuse_model(self, checkpoint: Any, model_dir: str | Path) -> None:
        """Raise UserError where this kind cannot export from a bare checkpoint (`--model`)."""

    def model_class(self) -> Any:
        """The class the checkpoint loads with (from_pretrained)."""
        raise NotImplementedError

    def output_names(self, path: Path) -> tuple[str, ...]:
        """The graph's outputs for the checkpoint in `path`."""
        raise NotImplementedError

    def settings(self, task: Any, max_length: int, settings: dict | None, path: Path) -> dict:
        """What the runtime needs of how the task was fine-tuned (MLflow params too); `settings`: a run's."""
        return {}

    def own_fields(self, task: Any) -> dict:
        """The manifest's first fields, the kind's own."""
        return {}

    def for_seed(self, task: Any, record: dict) -> Any:
        """The task as the exported seed's results.json record settled it (a threshold chosen on dev)."""
        return task

    def runtime_fields(self, settings: dict) -> dict:
        """The manifest's fields after the outputs: `settings` as the runtime reads them."""
        return {}

    def labels(self, task: Any) -> list[str] | None:
        return None if task.is_regression else list(task.label_names)

    def dev_examples(self, task: Any, data_dir: str | None, data: dict | None) -> Dataset:
        """The task's (first) dev split, in file order; `data`: a run's data block (results.json)."""
        raise NotImplementedError

    def requests(self, task: Any, examples: Dataset) -> list[Request]:
        """One runtime request per dev example, named by its position for error messages."""
        where = f"{task.name} dev example"
        pairs = examples["text_b"] if "text_b" in examples.column_names else [None] * len(examples)
        return [Request(text, pair, str(i), f"{where} {i}")
                for i, (text, pair) in enumerate(zip(examples["text_a"], pairs, strict=True))]

    def dev_scores(self, task: Any, examples: Dataset, results: list[dict], settings: dict) -> dict:
        """The task's dev metrics plus `score`, in the task's own units."""
        raise NotImplementedError

    def agreement(self, first: list[dict], second: list[dict]) -> dict[str, float]:
        """How closely two precisions' results match: share of equal labels, largest probability gap."""
        pairs = list(zip(first, second, strict=True))
        if "score" in first[0]:  # regression
            return {"max_abs_diff": max(abs(a["score"] - b["score"]) for a, b in pairs)}
        if "labels" in first[0]:  # multi-label: the label sets, and each label's probability
            return {"same_prediction": sum(a["labels"] == b["labels"] for a, b in pairs) / len(pairs),
                    "max_abs_diff": max(abs(a["scores"][name] - b["scores"][name])
                                        for a, b in pairs for name in a["scores"])}
        return {"same_prediction": sum(a["label"] == b["label"] for a, b in pairs) / len(pairs),
                "max_abs_diff": max(abs(a["probabilities"][name] - b["probabilities"][name])
                                    for a, b in pairs for name in a["probabilities"])}

    def points(self, score: float) -> float:
        """A score in points (percent), the unit of the int8 accuracy target."""
        return 100.0 * score


def exporters() -> list[Exporter]:
    """Each registered kind's exporter, in the registry's order."""
    return [load(row.exporter)() for row in KINDS.values()]


def exporter_of(task: Any) -> Exporter:
    """The exporter of the kind `task` belongs to."""
    found = next((exporter for exporter in exporters() if exporter.describes(task)), None)
    if found is None:
        raise UserError(f"no kind of task exports {type(task).__name__} {task.name!r}")
    return found


def own_task(task_class: Any, results: dict, task_name: str, run_dir: Path) -> Any:
    """The task a run folder describes (its results.json's data block), refused where --task names another."""
    described = (results.get("data") or {}).get("task")
    if task_name and task_name != described["name"]:
        raise UserError(f"{str(run_dir)!r} fine-tuned the task {described['name']!r}, not {task_name!r}; "
                        f"pass --task {described['name']}")
    return task_class.from_record(described)

"""GLUE's side of `harness export onnx`: tasks by name, dev data from the GLUE folder, GLUE's scores."""

from __future__ import annotations

from datasets import Dataset

from harness.deploy.classification_export import ClassificationExporter
from tasks import evaluate_metrics
from tasks.registry import GLUE_TASKS, GlueTask


class Exporter(ClassificationExporter):
    """A GLUE task's classifier or regressor (STS-B)."""

    def describes(self, task) -> bool:
        return isinstance(task, GlueTask)

    def named_tasks(self) -> dict[str, GlueTask]:
        return {name: t for name, t in GLUE_TASKS.items() if t.predicted_by is None}

    def dev_examples(self, task: GlueTask, data_dir: str | None, data: dict | None) -> Dataset:
        from harness.finetuning.glue_finetuning import shared_glue
        from tasks.glue_data import glue_dir, load_glue

        return load_glue(task, glue_dir(data_dir, shared_glue()))[task.dev_splits[0]]

    def dev_scores(self, task: GlueTask, examples: Dataset, results: list[dict], settings: dict) -> dict:
        if task.is_regression:
            predictions = [r["score"] for r in results]
        else:
            predictions = [task.label_names.index(r["label"]) for r in results]
        return evaluate_metrics.glue_scores(task, predictions, examples["label"])

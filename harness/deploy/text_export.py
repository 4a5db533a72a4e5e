"""Your own text's side of `harness export onnx`: the task and dev split as its run's results.json
describes them (the files re-read, refused if changed), scored by the run's own metrics."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from datasets import Dataset

from foundation.infra.errors import UserError
from harness.deploy.classification_export import ClassificationExporter
from harness.deploy.exporting import own_task
from tasks import metrics
from tasks.text_task import TextTask


class Exporter(ClassificationExporter):
    """A `harness run text` classifier, regressor or multi-label classifier."""

    runs_describe_task = True

    def describes(self, task) -> bool:
        return isinstance(task, TextTask)

    def run_task(self, results: dict, task_name: str, run_dir: Path) -> TextTask:
        return own_task(TextTask, results, task_name, run_dir)

    def for_seed(self, task: TextTask, record: dict) -> TextTask:
        """choose_threshold: the threshold the seed chose on dev (its last dev scoring's), as the bundle's."""
        chosen = (record.get("metrics", {}).get("validation") or {}).get("threshold")
        return dataclasses.replace(task, threshold=chosen) if task.choose_threshold and chosen else task

    def own_fields(self, task: TextTask) -> dict:
        threshold = {"threshold": task.threshold} if task.is_multilabel else {}
        return {"pair": len(task.text_columns) == 2, "multilabel": task.is_multilabel,
                "label_column": task.label_column} | threshold

    def settings(self, task: TextTask, max_length: int, settings: dict | None, path: Path) -> dict:
        """long_text=windows as the run read texts (results.json's settings block); else nothing: truncate."""
        keys = ("long_text", "window_overlap", "aggregate")
        return {key: settings[key] for key in keys} if settings and "long_text" in settings else {}

    def runtime_fields(self, settings: dict) -> dict:
        return dict(settings)

    def dev_examples(self, task: TextTask, data_dir: str | None, data: dict | None) -> Dataset:
        from tasks import text_data

        # the run's classes, where an eval run read no training file
        recorded = text_data.CheckpointLabels(task.problem, task.label_names or ())
        read = text_data.read(text_data.description_of(data), checkpoint=recorded)
        changed = [split for split, info in data["files"].items()
                   if read.record["files"].get(split, {}).get("sha256") != info["sha256"]]
        if changed:
            raise UserError(f"the {', '.join(changed)} data changed since the run (sha256 differs from "
                            "results.json's); restore the files the run read, or fine-tune again")
        return read.splits["validation"]

    def dev_scores(self, task: TextTask, examples: Dataset, results: list[dict], settings: dict) -> dict:
        if task.is_regression:
            predictions = [r["score"] for r in results]
        elif task.is_multilabel:
            predictions = [[int(name in r["labels"]) for name in task.label_names] for r in results]
        else:
            predictions = [task.label_names.index(r["label"]) for r in results]
        values = {name: metrics.METRICS[name](predictions, examples["label"]) for name in task.metrics}
        return values | {"score": values[task.headline]}


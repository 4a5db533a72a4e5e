"""Your own task on the leaderboard (`harness run|eval text` or `tagging`): a row per model, task and data.

What the row needs is read from results.json's `data.task` block, which every such kind writes: the task's
name, its headline metric and its other metrics; its training file's sha256 (`data.files.train`) tells
runs on other data apart. Nothing here asks which kind wrote the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OWN_PREFIX = "own."  # a column of your own task: own.NAME.SHA8 (its headline), own.NAME.SHA8.METRIC


@dataclass(frozen=True)
class OwnTask:
    """Your own task as results.json describes it."""

    name: str
    digest: str  # the training file's sha256, first 8 hex digits ("unknown" where it is missing)
    headline: str  # the summary key of its headline metric (accuracy, spearman, micro_f1, f1)
    metrics: tuple[str, ...]  # every summary key it is scored by, the headline among them
    problem: str  # classification, regression, multilabel or tagging, as its task block says

    @property
    def column(self) -> str:
        return own_column(self.name, self.digest)

    @property
    def label(self) -> str:
        """How the leaderboard names it: 'intents (data e6ae98f7)'."""
        return f"{self.name} (data {self.digest})"


def own_column(name: str, digest: str) -> str:
    """Your own task's leaderboard column: its name and its training file's sha256, so runs on other data
    are other columns (MLflow allows letters, digits, _ - . / and spaces in a metric's name)."""
    return f"{OWN_PREFIX}{re.sub(r'[^A-Za-z0-9_-]', '_', name)}.{digest[:8]}"


def own_task(results: dict) -> OwnTask | None:
    """The task a results file of your own data describes; None for GLUE and SQuAD (no task block)."""
    data = results.get("data")
    task = data.get("task") if isinstance(data, dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("name"), str) or not task.get("headline"):
        return None
    digest = ((data.get("files") or {}).get("train") or {}).get("sha256") or "unknown"
    metrics = tuple(m for m in task.get("metrics") or () if isinstance(m, str))
    # `problem` is the same field under the name later writers may give it
    problem = str(task.get("kind") or task.get("problem") or "")
    return OwnTask(task["name"], digest[:8], task["headline"], metrics or (task["headline"],), problem)


def own_task_values(results: dict, task: OwnTask) -> dict[str, float]:
    """The task's headline median (x100) and interval in its column, each other metric's median (x100) in
    COLUMN.METRIC, and `seeds`, how many seeds the headline is over."""
    summary = (results.get("summary") or {}).get(task.name) or {}
    found = summary.get(task.headline)
    if not isinstance(found, dict) or not isinstance(found.get("median"), int | float):
        return {}
    column = task.column
    values = {column: 100 * found["median"]}
    if isinstance(found.get("ci_low"), int | float):
        values |= {f"{column}_ci_low": 100 * found["ci_low"], f"{column}_ci_high": 100 * found["ci_high"]}
    for metric in task.metrics:
        stats = summary.get(metric)
        if metric == task.headline or not isinstance(stats, dict):
            continue
        if isinstance(stats.get("median"), int | float):
            values[f"{column}.{metric}"] = 100 * stats["median"]
    if isinstance(found.get("n"), int):
        values["seeds"] = float(found["n"])
    return values


def other_metrics(column: str, values: dict[str, float]) -> dict[str, float]:
    """The medians beside the headline, by metric name ({'macro_f1': 16.7, 'mcc': 0.0})."""
    return {key.removeprefix(f"{column}."): value for key, value in values.items()
            if key.startswith(f"{column}.")}


def stored_column(values: dict[str, float]) -> str:
    """The own task's headline column among a stored row's values ("" for none, or for several: a row stored
    before a row was kept per task may have gathered more than one)."""
    found = [key for key in values if key.startswith(OWN_PREFIX) and key.count(".") == 2
             and not key.endswith(("_ci_low", "_ci_high"))]
    return found[0] if len(found) == 1 else ""

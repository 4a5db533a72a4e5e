"""Statistics over a run's seeds for results.json: each run's score, per task the median, mean, std and
best of each metric, and intervals from the runs' per-example dev outputs."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from reports import dev_outputs, intervals, results_schema, stats
from reports.results_schema import DivergedRecord, ResultsBody, SeedRecord, TaskSummary
from tasks import metrics


def task_score(split_metrics: dict[str, dict[str, float]]) -> float:
    """A task's score: mean over its dev splits (MNLI m/mm) of each split's `score`."""
    return statistics.fmean(values["score"] for values in split_metrics.values())


def summarize(runs: list[SeedRecord], task_metrics: Mapping[str, Sequence[str]],
              diverged: Sequence[DivergedRecord] = ()) -> dict[str, TaskSummary]:
    """Per task: median/mean/std/best over the finished seeds of the score and of each named metric,
    and `diverged_seeds`, how many seeds diverged (those are in `diverged`, never in `runs`)."""
    summary = {}
    for task, names in task_metrics.items():
        mine = [r for r in runs if r["task"] == task]
        if not mine:
            continue
        columns = {"score": [r["score"] for r in mine]}
        for split in mine[0]["metrics"]:
            for name in names:
                label = name if len(mine[0]["metrics"]) == 1 else f"{split}_{name}"
                columns[label] = [r["metrics"][split][name] for r in mine]
        summary[task] = results_schema.task_summary(
            {label: metrics.summarize(values) for label, values in columns.items()},
            train_examples_per_s=statistics.fmean(r["train_examples_per_s"] for r in mine),
            train_time_s=sum(r["train_time_s"] for r in mine),
            diverged_seeds=sum(r["task"] == task for r in diverged))
    return summary


def add_intervals(output_dir: Path, results: ResultsBody) -> dict[str, dict[str, stats.Estimate]]:
    """Intervals beside the summary's medians from the runs' dev outputs (tasks without them: none)."""
    estimates = {}
    for task in results["summary"]:
        splits = dev_outputs.load_task(output_dir, task, results_schema.seeds_of(results, task))
        if splits is not None:
            estimates[task] = intervals.task_estimates(task, splits)
    intervals.add_to_summary(results["summary"], estimates)
    return estimates

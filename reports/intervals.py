"""Intervals for a run's reported scores, from its per-seed dev outputs (reports/dev_outputs.py).

Every summary label of a task gets one (`mcc`, `validation_matched_accuracy`, `score`, ...; SQuAD:
the metrics that are means of per-question scores, so not the dev-tuned best_*), and the GLUE
average in the paper's convention gets one built from its tasks' (tasks are fine-tuned
independently, so their variances add). Scores keep their scale: fractions for GLUE, percent
for SQuAD.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from reports import stats
from reports.dev_outputs import SplitOutputs
from tasks import metrics, tagging_metrics
from tasks.registry import GLUE_AVERAGE_TASKS, GLUE_TASKS


@dataclass(frozen=True)
class Part:
    """One dev split scored by the mean of some metrics: per-seed scores and a resampling statistic."""

    seed_scores: np.ndarray  # (seeds,)
    per_seed: stats.Statistic  # dev-example indices -> (seeds, resamples) scores
    num_examples: int
    dev_set: str
    tokenization: str
    bounds: stats.Bounds = None  # the range of the score (the mean of its metrics' ranges)


def _mean_scorer(scores: np.ndarray, references: np.ndarray) -> np.ndarray:
    return scores.mean(-1)  # SQuAD: EM/F1 are means of per-question scores


def _scorer(split: SplitOutputs, metric: str) -> tuple[stats.Scorer, np.ndarray, np.ndarray]:
    if split.counts is not None:  # tagging: ratios of per-sentence counts summed over the resample
        rows = tagging_metrics.metric_rows(split.counts, split.types, metric)
        return tagging_metrics.batched_score(metric), rows, np.zeros(split.num_examples)
    if split.predictions is not None:
        batched = metrics.BATCHED_MULTILABEL if split.predictions.ndim == 3 else metrics.BATCHED
        return batched[metric], split.predictions, split.references
    return _mean_scorer, split.scores[metric], np.zeros(split.num_examples)


def part(split: SplitOutputs, names: Sequence[str]) -> Part:
    """The split scored by the mean of `names` (one name: that metric; all of a task's: its `score`)."""
    pieces = [_scorer(split, name) for name in names]
    statistics = [stats.seed_statistic(*piece) for piece in pieces]
    seed_scores = np.mean([scorer(pred, ref) for scorer, pred, ref in pieces], axis=0)
    return Part(seed_scores, lambda indices: np.mean([s(indices) for s in statistics], axis=0),
                split.num_examples, split.dev_set, split.tokenization,
                stats.mean_bounds([_range(split, name) for name in names]))


def _range(split: SplitOutputs, name: str) -> stats.Bounds:
    """A metric's range on the split's scale: SQuAD's per-question scores are percent."""
    found = metrics.metric_range(name)
    scale = 100.0 if split.scores and split.predictions is None and split.counts is None else 1.0
    return None if found is None else (found[0] * scale, found[1] * scale)


def estimate(parts: Sequence[Part], n_resamples: int = stats.N_RESAMPLES,
             seed: int = stats.SEED) -> stats.Estimate:
    """The mean of parts on independent dev splits (MNLI's m and mm) with its interval."""
    k = len(parts)
    dev_var = sum(stats.dev_variance([p.per_seed], p.num_examples, n_resamples=n_resamples, seed=seed)
                  for p in parts) / k ** 2
    return stats.interval(list(np.mean([p.seed_scores for p in parts], axis=0)), dev_var,
                          bounds=stats.mean_bounds([p.bounds for p in parts]))


def metric_names(task: str, splits: Mapping[str, SplitOutputs]) -> tuple[str, ...]:
    """The metrics an interval can be computed for: a GLUE task's, your own task's (its dev outputs name
    them), or SQuAD's per-question ones."""
    first = next(iter(splits.values()))
    if task in GLUE_TASKS:
        return GLUE_TASKS[task].metrics
    return first.metrics or tuple(first.scores)


def task_estimates(task: str, splits: Mapping[str, SplitOutputs], n_resamples: int = stats.N_RESAMPLES,
                   seed: int = stats.SEED) -> dict[str, stats.Estimate]:
    """Summary label -> estimate, labelled as seed_summary.summarize labels them."""
    names = metric_names(task, splits)
    found = {}
    for split_name, split in splits.items():
        for name in names:
            label = name if len(splits) == 1 else f"{split_name}_{name}"
            found[label] = estimate([part(split, [name])], n_resamples, seed)
    headline = next(iter(splits.values())).headline
    if task in GLUE_TASKS:
        found["score"] = estimate([part(split, names) for split in splits.values()], n_resamples, seed)
    elif headline is not None:  # your own task's score is its headline metric
        found["score"] = found[headline]
    elif "f1" in found:
        found["score"] = found["f1"]  # SQuAD's score is its F1
    return found


def glue_estimate(tasks: Sequence[str], estimates: Mapping[str, Mapping[str, stats.Estimate]]
                  ) -> stats.Estimate | None:
    """The GLUE average (paper convention) over `tasks`; None if none counts or one lacks an interval."""
    counted = [t for t in tasks if t in GLUE_AVERAGE_TASKS]
    chosen = [estimates.get(t, {}).get(GLUE_TASKS[t].paper_label) for t in counted]
    return stats.mean_of(chosen) if chosen and None not in chosen else None


def add_to_summary(summary: dict, estimates: Mapping[str, Mapping[str, stats.Estimate]]) -> None:
    """ci_low/ci_high (and what they cover) beside each label's median, in place."""
    for task, labels in estimates.items():
        for label, found in labels.items():
            if isinstance(summary.get(task, {}).get(label), dict):
                summary[task][label] |= {"ci_low": found.low, "ci_high": found.high,
                                         "ci_covers": found.covers}


"""GLUE metrics as pure functions of predictions and references (fractions in [0, 1], not x100)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import stats
from sklearn import metrics as skm


def accuracy(predictions: Sequence[int], references: Sequence[int]) -> float:
    return float(skm.accuracy_score(references, predictions))


def f1(predictions: Sequence[int], references: Sequence[int]) -> float:
    """F1 of the positive class (label 1), as GLUE scores MRPC and QQP."""
    return float(skm.f1_score(references, predictions, pos_label=1, average="binary", zero_division=0.0))


def mcc(predictions: Sequence[int], references: Sequence[int]) -> float:
    """Matthews correlation (CoLA); 0 when predictions or references are constant."""
    return float(skm.matthews_corrcoef(references, predictions))


def _correlation(function: Callable, predictions: Sequence[float], references: Sequence[float]) -> float:
    # A constant prediction has no defined correlation; score it as none (0) rather than NaN so
    # task and GLUE means stay numbers. Untrained models do produce near-constant outputs.
    if np.ptp(np.asarray(predictions, dtype=float)) == 0 or np.ptp(np.asarray(references, dtype=float)) == 0:
        return 0.0
    return float(function(predictions, references)[0])


def pearson(predictions: Sequence[float], references: Sequence[float]) -> float:
    return _correlation(stats.pearsonr, predictions, references)


def spearman(predictions: Sequence[float], references: Sequence[float]) -> float:
    return _correlation(stats.spearmanr, predictions, references)


METRICS: dict[str, Callable[[Sequence, Sequence], float]] = {
    "accuracy": accuracy, "f1": f1, "mcc": mcc, "pearson": pearson, "spearman": spearman}


def compute(names: Sequence[str], predictions: Sequence, references: Sequence) -> dict[str, float]:
    """The named metrics plus `score`, their mean (GLUE's per-task score)."""
    values = {name: METRICS[name](predictions, references) for name in names}
    values["score"] = statistics.fmean(values.values())
    return values


def glue_score(task_scores: Mapping[str, float]) -> float:
    """GLUE score: the mean of the task scores that were run."""
    return statistics.fmean(task_scores.values()) if task_scores else math.nan


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Median (the paper's statistic), mean, population std and best over seeds."""
    return {"median": statistics.median(values), "mean": statistics.fmean(values),
            "std": statistics.pstdev(values), "best": max(values), "n": len(values)}

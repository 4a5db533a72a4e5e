"""Task metrics as pure functions of predictions and references (fractions in [0, 1], not x100): GLUE's,
and macro- and micro-F1 for your own classification and multi-label data (tasks/text.py)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import stats
from sklearn import metrics as skm

from tasks.registry import GLUE_AVERAGE_TASKS, GLUE_TASKS

CORRELATIONS = frozenset({"mcc", "pearson", "spearman"})  # in [-1, 1]
# Shares of examples, tokens or chunks, in [0, 1] (SQuAD's exact and F1 too, x100); f1_TYPE: tagging's
# per-type F1; HasAns_/NoAns_: SQuAD 2.0's halves.
SHARES = frozenset({"accuracy", "f1", "macro_f1", "micro_f1", "precision", "recall", "exact", "exact_match"})


def metric_range(name: str) -> tuple[float, float] | None:
    """The values a metric can take, as a fraction; None for a metric this module does not know."""
    base = name.removeprefix("HasAns_").removeprefix("NoAns_")
    if base in CORRELATIONS:
        return (-1.0, 1.0)
    if base in SHARES or base.startswith("f1_"):
        return (0.0, 1.0)
    return None


THRESHOLDS = tuple(round(0.05 * k, 2) for k in range(1, 20))  # 0.05, 0.10, ..., 0.95


def best_threshold(score: Callable[[float], float], candidates: Sequence[float] = THRESHOLDS) -> float:
    """The candidate threshold with the highest score; a tie goes to the one nearest 0.5 (then the lower)."""
    return max(candidates, key=lambda t: (score(t), -abs(t - 0.5), -t))


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


def macro_f1(predictions: Sequence, references: Sequence) -> float:
    """The unweighted mean of per-class F1: over the classes that occur in predictions or references
    (class ids), or over every label column (multi-label: rows of 0/1 indicators, a label that is never
    predicted nor true scoring 0), as sklearn's f1_score(average="macro") does."""
    return float(skm.f1_score(np.asarray(references), np.asarray(predictions), average="macro",
                              zero_division=0.0))


def micro_f1(predictions: Sequence, references: Sequence) -> float:
    """F1 of all (example, label) decisions pooled (multi-label rows of 0/1 indicators); for single-label
    classes it equals accuracy."""
    return float(skm.f1_score(np.asarray(references), np.asarray(predictions), average="micro",
                              zero_division=0.0))


METRICS: dict[str, Callable[[Sequence, Sequence], float]] = {
    "accuracy": accuracy, "f1": f1, "mcc": mcc, "pearson": pearson, "spearman": spearman,
    "macro_f1": macro_f1, "micro_f1": micro_f1}


def compute(names: Sequence[str], predictions: Sequence, references: Sequence) -> dict[str, float]:
    """The named metrics plus `score`, their mean (GLUE's per-task score)."""
    values = {name: METRICS[name](predictions, references) for name in names}
    values["score"] = statistics.fmean(values.values())
    return values


def paper_value(task: str, split_metrics: Mapping[str, Mapping[str, float]]) -> float:
    """One run's score in the paper's metric for `task` (first dev split: MNLI matched)."""
    spec = GLUE_TASKS[task]
    return split_metrics[spec.dev_splits[0]][spec.paper_metric]


def glue_average(paper_values: Mapping[str, float]) -> float:
    """The GLUE score in the paper's convention (registry.GLUE_CONVENTION): the mean of the tasks'
    paper-metric values over the tasks present that count (WNLI and AX do not); nan if none."""
    counted = [value for task, value in paper_values.items() if task in GLUE_AVERAGE_TASKS]
    return statistics.fmean(counted) if counted else math.nan


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Median (the paper's statistic), mean, population std and best over seeds."""
    return {"median": statistics.median(values), "mean": statistics.fmean(values),
            "std": statistics.pstdev(values), "best": max(values), "n": len(values)}


# Batched forms: the same metrics over the last axis of (..., n) arrays, for resampling thousands of
# times (sklearn and scipy score one vector per call, ~1 ms each). tests/test_metrics.py pins them
# to the functions above, zero-division rules included.
def _counts(predictions: np.ndarray, references: np.ndarray, label) -> tuple[np.ndarray, np.ndarray]:
    return (predictions == label).sum(-1), (references == label).sum(-1)


def batched_accuracy(predictions: np.ndarray, references: np.ndarray) -> np.ndarray:
    return (predictions == references).mean(-1)


def batched_f1(predictions: np.ndarray, references: np.ndarray) -> np.ndarray:
    true_positive = ((predictions == 1) & (references == 1)).sum(-1)
    predicted, actual = _counts(predictions, references, 1)
    denominator = predicted + actual  # 2TP + FP + FN
    return np.where(denominator > 0, 2 * true_positive / np.maximum(denominator, 1), 0.0)


def batched_mcc(predictions: np.ndarray, references: np.ndarray) -> np.ndarray:
    """Multiclass MCC as sklearn computes it (Gorodkin's R_K); 0 where it is undefined."""
    labels = np.union1d(np.unique(predictions), np.unique(references))
    n = predictions.shape[-1]
    correct = (predictions == references).sum(-1).astype(float)
    predicted = np.stack([(predictions == k).sum(-1) for k in labels], -1).astype(float)
    actual = np.stack([(references == k).sum(-1) for k in labels], -1).astype(float)
    covariance = correct * n - (predicted * actual).sum(-1)
    denominator = np.sqrt((n * n - (predicted ** 2).sum(-1)) * (n * n - (actual ** 2).sum(-1)))
    return np.where(denominator > 0, covariance / np.where(denominator > 0, denominator, 1), 0.0)


def batched_pearson(predictions: np.ndarray, references: np.ndarray) -> np.ndarray:
    x = predictions - predictions.mean(-1, keepdims=True)
    y = references - references.mean(-1, keepdims=True)
    denominator = np.sqrt((x * x).sum(-1) * (y * y).sum(-1))
    # Constant predictions or references: 0, as in _correlation.
    constant = (np.ptp(predictions, axis=-1) == 0) | (np.ptp(references, axis=-1) == 0)
    return np.where(constant, 0.0, (x * y).sum(-1) / np.where(constant, 1, denominator))


def batched_spearman(predictions: np.ndarray, references: np.ndarray) -> np.ndarray:
    # Average ranks for ties, as scipy.stats.spearmanr.
    return batched_pearson(stats.rankdata(predictions, axis=-1), stats.rankdata(references, axis=-1))


def _f1_parts(true_positive, predicted, actual) -> tuple[np.ndarray, np.ndarray]:
    denominator = predicted + actual  # 2TP + FP + FN
    return np.where(denominator > 0, 2 * true_positive / np.maximum(denominator, 1), 0.0), denominator


def batched_macro_f1(predictions: np.ndarray, references: np.ndarray) -> np.ndarray:
    """macro_f1 of class ids over the last axis ((..., n))."""
    labels = np.union1d(np.unique(predictions), np.unique(references))
    per_class, present = [], []
    for k in labels:
        true_positive = ((predictions == k) & (references == k)).sum(-1)
        scores, denominator = _f1_parts(true_positive, *_counts(predictions, references, k))
        per_class.append(scores)
        present.append(denominator > 0)  # a class absent from a resample is not averaged, as sklearn
    per_class, present = np.stack(per_class, -1), np.stack(present, -1)
    return (per_class * present).sum(-1) / np.maximum(present.sum(-1), 1)


def batched_multilabel_macro_f1(predictions: np.ndarray, references: np.ndarray) -> np.ndarray:
    """macro_f1 of 0/1 indicators over the last two axes ((..., n, L)): every label column counts, one
    never predicted nor true as 0 (zero_division=0)."""
    true_positive = ((predictions == 1) & (references == 1)).sum(-2)
    return _f1_parts(true_positive, (predictions == 1).sum(-2), (references == 1).sum(-2))[0].mean(-1)


def batched_multilabel_micro_f1(predictions: np.ndarray, references: np.ndarray) -> np.ndarray:
    """micro_f1 of 0/1 indicators over the last two axes ((..., n, L))."""
    true_positive = ((predictions == 1) & (references == 1)).sum((-2, -1))
    return _f1_parts(true_positive, (predictions == 1).sum((-2, -1)), (references == 1).sum((-2, -1)))[0]


BATCHED: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "accuracy": batched_accuracy, "f1": batched_f1, "mcc": batched_mcc, "pearson": batched_pearson,
    "spearman": batched_spearman, "macro_f1": batched_macro_f1}
# Multi-label outputs: (seeds, n, L) indicator arrays (reports/intervals.py picks these by shape).
BATCHED_MULTILABEL: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "macro_f1": batched_multilabel_macro_f1, "micro_f1": batched_multilabel_micro_f1}

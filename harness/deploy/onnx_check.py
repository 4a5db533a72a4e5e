"""A bundle on real dev examples: the requests they make, and the dev metric each precision scores.

The metric runs through the runtime itself (tokenizer.json, windows, post-processing), so it is the
score the deployed bundle gets, not the score of the tensors the exporter saw. What each kind's requests
and scores are is its exporter's (harness/deploy/exporting.py).
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from harness.deploy.exporting import exporter_of
from harness.deploy.onnx_predictor import Predictor, Request


def requests_for(task: Any, examples: Dataset) -> list[Request]:
    """One runtime request per dev example, named by its position for error messages."""
    return exporter_of(task).requests(task, examples)


def dev_predictions(predictor: Predictor, task: Any, examples: Dataset) -> list[dict]:
    """The runtime's result for each dev example, in order."""
    return predictor.predict(requests_for(task, examples))


def dev_scores(task: Any, examples: Dataset, results: list[dict], settings: dict) -> dict[str, float]:
    """The task's dev metrics plus `score`, in the task's own units (GLUE fractions, SQuAD percent;
    tagging: conlleval's, as fractions); `settings`: the bundle's runtime settings."""
    return exporter_of(task).dev_scores(task, examples, results, settings)


def agreement(task: Any, first: list[dict], second: list[dict]) -> dict[str, float]:
    """How closely two precisions' results match: share of equal predictions, largest output gap."""
    return exporter_of(task).agreement(first, second)


def points(task: Any, score: float) -> float:
    """A score in points (percent), the unit of the int8 accuracy target."""
    return exporter_of(task).points(score)

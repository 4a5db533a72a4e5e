"""A bundle on real dev examples: the requests they make, and the dev metric each precision scores.

The metric runs through the runtime itself (tokenizer.json, windows, post-processing), so it is the
score the deployed bundle gets, not the score of the tensors the exporter saw.
"""

from __future__ import annotations

from datasets import Dataset

from harness.deploy.onnx_predictor import Predictor, Request
from tasks import evaluate_metrics, metrics
from tasks.registry import GlueTask, SquadTask
from tasks.tagging_task import TaggingTask
from tasks.text_task import TextTask

Task = GlueTask | SquadTask | TextTask | TaggingTask


def requests_for(task: Task, examples: Dataset) -> list[Request]:
    """One runtime request per dev example, named by its position for error messages (a tagging
    sentence: its words, pre-split as the file has them)."""
    where = f"{task.name} dev example"
    if isinstance(task, TaggingTask):
        return [Request.of_tokens(row["tokens"], str(i), f"{task.name} dev sentence at line {row['line']}")
                for i, row in enumerate(examples)]
    if isinstance(task, SquadTask):
        return [Request(row["question"], row["context"], row["id"], f"{where} {row['id']}")
                for row in examples]
    pairs = examples["text_b"] if "text_b" in examples.column_names else [None] * len(examples)
    return [Request(text, pair, str(i), f"{where} {i}")
            for i, (text, pair) in enumerate(zip(examples["text_a"], pairs, strict=True))]


def dev_predictions(predictor: Predictor, task: Task, examples: Dataset) -> list[dict]:
    """The runtime's result for each dev example, in order."""
    return predictor.predict(requests_for(task, examples))


def dev_scores(task: Task, examples: Dataset, results: list[dict],
               null_threshold: float = 0.0) -> dict[str, float]:
    """The task's dev metrics plus `score`, in the task's own units (GLUE fractions, SQuAD percent;
    tagging: conlleval's, as fractions)."""
    if isinstance(task, TaggingTask):
        from tasks import tagging_metrics

        counts = tagging_metrics.sentence_counts(examples["tags"], [r["tags"] for r in results], task.types)
        values = tagging_metrics.scores(counts)
        return {name: values[name] for name in task.metrics} | {"score": values[task.headline]}
    if isinstance(task, SquadTask):
        answers = {r["id"]: r["answer"] for r in results}
        null_odds = {r["id"]: r["null_odds"] for r in results} if task.has_unanswerable else None
        scores = evaluate_metrics.squad_scores(task, answers, examples, null_odds, null_threshold)
        return {name: scores[name] for name in task.metrics} | {"score": scores["score"]}
    if task.is_regression:
        predictions = [r["score"] for r in results]
    elif isinstance(task, TextTask) and task.is_multilabel:
        predictions = [[int(name in r["labels"]) for name in task.label_names] for r in results]
    else:
        predictions = [task.label_names.index(r["label"]) for r in results]
    if isinstance(task, TextTask):
        values = {name: metrics.METRICS[name](predictions, examples["label"]) for name in task.metrics}
        return values | {"score": values[task.headline]}
    return evaluate_metrics.glue_scores(task, predictions, examples["label"])


def agreement(first: list[dict], second: list[dict]) -> dict[str, float]:
    """How closely two precisions' results match: share of equal labels (answers), largest output gap."""
    pairs = list(zip(first, second, strict=True))
    if "tags" in first[0]:  # tagging: whole sentences tagged alike, and single tags
        tags = [(x, y) for a, b in pairs for x, y in zip(a["tags"], b["tags"], strict=True)]
        return {"same_prediction": sum(a["tags"] == b["tags"] for a, b in pairs) / len(pairs),
                "same_tags": sum(x == y for x, y in tags) / len(tags)}
    if "score" in first[0] and "answer" not in first[0]:  # regression
        return {"max_abs_diff": max(abs(a["score"] - b["score"]) for a, b in pairs)}
    if "labels" in first[0]:  # multi-label: the label sets, and each label's probability
        return {"same_prediction": sum(a["labels"] == b["labels"] for a, b in pairs) / len(pairs),
                "max_abs_diff": max(abs(a["scores"][name] - b["scores"][name])
                                    for a, b in pairs for name in a["scores"])}
    key = "label" if "label" in first[0] else "answer"
    result = {"same_prediction": sum(a[key] == b[key] for a, b in pairs) / len(pairs)}
    if key == "label":
        result["max_abs_diff"] = max(abs(a["probabilities"][name] - b["probabilities"][name])
                                     for a, b in pairs for name in a["probabilities"])
    return result


def points(task: GlueTask | SquadTask, score: float) -> float:
    """A score in points (percent), the unit of the int8 accuracy target."""
    return score if isinstance(task, SquadTask) else 100.0 * score

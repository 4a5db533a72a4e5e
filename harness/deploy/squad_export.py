"""SQuAD's side of `harness export onnx`: span models through SquadModel (its answer mask, answerability
and joint heads as saved), the windowing and post-processing settings the runtime needs, SQuAD's scores."""

from __future__ import annotations

import os
from pathlib import Path

from datasets import Dataset

from harness.deploy.exporting import Exporter as Base
from harness.deploy.pipeline import Request
from tasks import evaluate_metrics
from tasks.registry import SQUAD_TASKS, SquadTask


class Exporter(Base):
    """A SQuAD 1.1 or 2.0 span model."""

    pipeline = "question-answering"
    architecture = "ForQuestionAnswering"
    wanted = "a span model from `harness run squad`"
    has_labels = False
    extra_inputs = ("context_mask",)  # the answer mask reads it

    def describes(self, task) -> bool:
        return isinstance(task, SquadTask)

    def named_tasks(self) -> dict[str, SquadTask]:
        return {t.name: t for t in SQUAD_TASKS.values()}

    def model_class(self):
        from tasks.squad_model import SquadModel  # always: its answer mask is part of prediction

        return SquadModel

    def output_names(self, path: Path) -> tuple[str, ...]:
        from tasks.squad_model import HEAD_FILE, JOINT_FILE
        from tasks.squad_spans import JOINT_OUTPUTS

        spans = ("start_logits", *JOINT_OUTPUTS) if (path / JOINT_FILE).is_file() else \
            ("start_logits", "end_logits")
        return spans + (("null_logits",) if (path / HEAD_FILE).is_file() else ())

    def settings(self, task: SquadTask, max_length: int, settings: dict | None, path: Path) -> dict:
        """Windowing and post-processing: the run's settings, else the defaults for this length and head."""
        from tasks.config import SquadConfig, default_null_threshold
        from tasks.squad_model import HEAD_FILE

        defaults = SquadConfig()
        if settings is None:
            # Short models (fewer positions than the 512-token window) keep ELECTRA's proportions.
            room = max_length // 4
            settings = {"doc_stride": min(defaults.doc_stride, room),
                        "max_query_length": min(defaults.max_query_length, room)}
        keys = ("doc_stride", "max_query_length", "n_best", "max_answer_length", "null_threshold")
        chosen = {key: settings.get(key, getattr(defaults, key)) for key in keys}
        if chosen["null_threshold"] is None:  # not from a run's results: the default for the bundle's head
            chosen["null_threshold"] = default_null_threshold((path / HEAD_FILE).is_file())
        return chosen | {"version_2": task.has_unanswerable, "doc_stride_is_step": True}

    def runtime_fields(self, settings: dict) -> dict:
        return {"qa": settings}

    def labels(self, task: SquadTask) -> None:
        return None

    def dev_examples(self, task: SquadTask, data_dir: str | None, data: dict | None) -> Dataset:
        from tasks import squad_data

        chosen = data_dir or os.environ.get("SQUAD_DIR")
        if not chosen:
            return squad_data.load_squad_hub(task.version, "validation")
        return squad_data.load_squad_json(squad_data.squad_file(chosen, task.version, "dev"), task.version)[0]

    def requests(self, task: SquadTask, examples: Dataset) -> list[Request]:
        return [Request(row["question"], row["context"], row["id"], f"{task.name} dev example {row['id']}")
                for row in examples]

    def dev_scores(self, task: SquadTask, examples: Dataset, results: list[dict], settings: dict) -> dict:
        answers = {r["id"]: r["answer"] for r in results}
        null_odds = {r["id"]: r["null_odds"] for r in results} if task.has_unanswerable else None
        scores = evaluate_metrics.squad_scores(task, answers, examples, null_odds, settings["null_threshold"])
        return {name: scores[name] for name in task.metrics} | {"score": scores["score"]}

    def agreement(self, first: list[dict], second: list[dict]) -> dict[str, float]:
        pairs = list(zip(first, second, strict=True))
        return {"same_prediction": sum(a["answer"] == b["answer"] for a, b in pairs) / len(pairs)}

    def points(self, score: float) -> float:
        return score  # SQuAD's scores are percent already

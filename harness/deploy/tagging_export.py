"""Tagging's side of `harness export onnx`: the task, its tags and dev sentences as its run's results.json
describes them (a bare checkpoint is refused: it lacks them), scored by conlleval."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import transformers
from datasets import Dataset

from foundation.infra.errors import UserError
from harness.deploy import tag_spans
from harness.deploy.exporting import Exporter as Base
from harness.deploy.exporting import own_task
from harness.deploy.pipeline import Request
from tasks.tagging_task import TaggingTask


class Exporter(Base):
    """A `harness run tagging` tagger."""

    pipeline = "token-classification"
    architecture = "ForTokenClassification"
    wanted = "a tagger from `harness run tagging`"

    runs_describe_task = True

    def describes(self, task) -> bool:
        return isinstance(task, TaggingTask)

    def run_task(self, results: dict, task_name: str, run_dir: Path) -> TaggingTask:
        return own_task(TaggingTask, results, task_name, run_dir)

    def refuse_model(self, checkpoint, model_dir) -> None:
        # a tagger's tags, their scheme and its dev file (for the parity and F1 checks) are its run's
        raise UserError(f"{str(model_dir)!r} holds a tagger ({checkpoint.architecture}); a tagger exports "
                        "from the folder of the `harness run tagging` that trained it, which holds its tag "
                        "scheme and dev data: pass --run RUN_DIR instead of --model")

    def model_class(self):
        return transformers.AutoModelForTokenClassification

    def output_names(self, path: Path) -> tuple[str, ...]:
        return ("tag_logits",)

    def own_fields(self, task: TaggingTask) -> dict:
        # labels: the model's BIOES tags; answers are written in the task's scheme, over raw text split into
        # words by the named `tokenizers` pre-tokenizer (harness/deploy/tag_spans.py)
        return {"scheme": task.scheme, "types": list(task.types), "word_splitter": tag_spans.WORD_SPLITTER}

    def dev_examples(self, task: TaggingTask, data_dir: str | None, data: dict | None) -> Dataset:
        """The run's dev sentences, re-read as the run read them (train too: the task's tags come from
        both), their words and gold tags; a changed file is refused."""
        from tasks import tagging_data

        described = dataclasses.replace(tagging_data.description_of(data), test="")  # no test file needed
        read = tagging_data.read(described)
        changed = [split for split in ("train", "validation")
                   if read.record["files"][split]["sha256"] != data["files"].get(split, {}).get("sha256")]
        if changed:
            raise UserError(f"the {', '.join(changed)} data changed since the run (sha256 differs from "
                            "results.json's); restore the files the run read, or fine-tune again")
        sentences = read.splits["validation"].sentences
        return Dataset.from_dict({"tokens": [list(s.words) for s in sentences],
                                  "tags": [list(s.tags) for s in sentences],
                                  "line": [s.line for s in sentences]})

    def requests(self, task: TaggingTask, examples: Dataset) -> list[Request]:
        """Each dev sentence's words, pre-split as the file has them."""
        return [Request.of_tokens(row["tokens"], str(i), f"{task.name} dev sentence at line {row['line']}")
                for i, row in enumerate(examples)]

    def dev_scores(self, task: TaggingTask, examples: Dataset, results: list[dict], settings: dict) -> dict:
        """conlleval's scores, as fractions."""
        from tasks import tagging_metrics

        counts = tagging_metrics.sentence_counts(examples["tags"], [r["tags"] for r in results], task.types)
        values = tagging_metrics.scores(counts)
        return {name: values[name] for name in task.metrics} | {"score": values[task.headline]}

    def agreement(self, first: list[dict], second: list[dict]) -> dict[str, float]:
        """Whole sentences tagged alike, and single tags."""
        pairs = list(zip(first, second, strict=True))
        tags = [(x, y) for a, b in pairs for x, y in zip(a["tags"], b["tags"], strict=True)]
        return {"same_prediction": sum(a["tags"] == b["tags"] for a, b in pairs) / len(pairs),
                "same_tags": sum(x == y for x, y in tags) / len(tags)}

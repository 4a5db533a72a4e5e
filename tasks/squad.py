"""SQuAD through the one loop: where examples come from, windows, the span model, post-processing, scores."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset

from foundation.infra.errors import UserError
from tasks import evaluate_metrics, squad_data, squad_features, squad_spans
from tasks.config import SquadConfig
from tasks.loading import from_pretrained_quietly
from tasks.registry import SquadTask
from tasks.squad_model import SquadModel


@dataclass(frozen=True)
class SquadSource:
    """Where the examples come from: --train-file/--dev-file, else --data-dir or $SQUAD_DIR, else the Hub."""

    data_dir: str | None = None
    train_file: str | None = None
    dev_file: str | None = None


@dataclass
class SquadSplits:
    train: Dataset
    dev: Dataset
    info: dict  # for results.json: files, holdout split, answers that disagree with their context


def load_splits(task: SquadTask, source: SquadSource, settings: SquadConfig) -> SquadSplits:
    """Train and dev examples; without a train file, a by-article split of the dev file (see info)."""
    if source.data_dir and (source.train_file or source.dev_file):
        raise UserError("pass either --data-dir or --train-file/--dev-file, not both")
    if source.train_file and not source.dev_file:
        raise UserError(f"--train-file {source.train_file!r} needs a --dev-file to evaluate on")
    train_path, dev_path = _paths(task, source)
    if dev_path is None:
        train = squad_data.load_squad_hub(task.version, "train")
        dev = squad_data.load_squad_hub(task.version, "validation")
        # The Hub rows come pre-flattened, so their answers are not checked against the context.
        return SquadSplits(train, dev, {"source": "hub", "holdout": None, "answer_problems": None,
                                        "num_train_examples": len(train), "num_dev_examples": len(dev)})
    dev, problems = squad_data.load_squad_json(dev_path, task.version)
    info = {"source": "files", "dev_file": str(dev_path), "train_file": None, "holdout": None}
    if train_path is not None:
        train, train_problems = squad_data.load_squad_json(train_path, task.version)
        info["train_file"], problems = str(train_path), problems + train_problems
    else:
        train, dev = squad_data.split_by_article(dev, settings.holdout_fraction, settings.holdout_seed)
        info["holdout"] = {"fraction": settings.holdout_fraction, "seed": settings.holdout_seed,
                           "train_articles": len(set(train["title"])), "dev_articles": len(set(dev["title"]))}
    return SquadSplits(train, dev, info | {"answer_problems": problems, "num_train_examples": len(train),
                                           "num_dev_examples": len(dev)})


def _paths(task: SquadTask, source: SquadSource) -> tuple[Path | None, Path | None]:
    """(train, dev) files; train None means "hold out dev articles", dev None means "the Hub"."""
    if source.dev_file:
        return (Path(source.train_file) if source.train_file else None), Path(source.dev_file)
    data_dir = source.data_dir or os.environ.get("SQUAD_DIR")
    if not data_dir:
        return None, None
    dev = squad_data.squad_file(data_dir, task.version, "dev")
    train = Path(data_dir) / f"train-v{task.version}.json"
    return (train if train.is_file() else None), dev


@dataclass
class SquadAdapter:
    """A SQuAD version's windows and its scoring; satisfies tasks.finetune.TaskAdapter."""

    task: SquadTask
    settings: SquadConfig
    uses_head: bool  # the answerability classifier
    joint: bool  # joint start/end prediction
    train: Dataset  # windows with start/end token positions ([CLS] when the answer is not inside)
    evals: dict[str, Dataset]  # model inputs of the dev windows
    examples: dict[str, Dataset]  # the dev questions, for post-processing and scoring
    windows: dict[str, Dataset]  # example_id and offset_mapping of each dev window
    num_train_examples: int  # questions (train holds their windows)
    num_misaligned: int  # training answers that do not start or end on a token boundary
    pad_to_multiple_of: int | None = 8  # as its recorded figures ran (tagging's None is faster on a CPU)

    def example_outputs(self, output, batch) -> list[dict[str, np.ndarray]]:
        """Per window, its outputs by name (`SquadOutput`'s): per-token ones cut to the window's length."""
        lengths = batch["attention_mask"].sum(dim=1).tolist()
        per_token = ["start_logits"] if self.joint else ["start_logits", "end_logits"]
        names = per_token + (list(squad_spans.JOINT_OUTPUTS) if self.joint else [])
        names += ["null_logits"] if self.uses_head else []
        # Floats as fp32 (bf16 under autocast has no numpy form); beam indices stay integers.
        arrays = {name: (output[name].float() if output[name].is_floating_point() else output[name])
                  .cpu().numpy() for name in names}
        return [{name: values[row, :length] if name in per_token else values[row]
                 for name, values in arrays.items()} for row, length in enumerate(lengths)]

    def predictions(self, split: str, outputs: list[dict]) -> tuple[dict[str, str], dict[str, float]]:
        """Best non-null answer per question and, for v2.0, its null odds (the official na_prob file)."""
        # Spans are never blanked here (threshold inf): the null decision belongs to scoring, as in
        # ELECTRA's predictions.json, so evaluate-v2.0.py can tune the threshold from these files.
        return squad_features.postprocess(
            self.examples[split], self.windows[split], [o["start_logits"] for o in outputs],
            [o.get("end_logits") for o in outputs],
            n_best=self.settings.n_best, max_answer_length=self.settings.max_answer_length,
            version_2=self.task.has_unanswerable, null_threshold=math.inf,
            null_logits=[o["null_logits"] for o in outputs] if self.uses_head else None,
            joint=outputs if self.joint else None)

    def score(self, split: str, outputs: list[dict]) -> dict[str, float]:
        """The official script's metrics (percent) plus `score`, the F1."""
        answers, null_odds = self.predictions(split, outputs)
        return evaluate_metrics.squad_scores(self.task, answers, self.examples[split], null_odds,
                                             null_threshold=self.settings.null_threshold)


def _sample(examples: Dataset, limit: int | None) -> Dataset:
    if limit is None or limit >= len(examples):
        return examples
    return examples.shuffle(seed=0).select(range(limit))


def build_task(task: SquadTask, splits: SquadSplits, tokenizer, max_length: int, settings: SquadConfig,
               max_train_examples: int | None = None) -> SquadAdapter:
    """Windows of the training and dev questions (each subsampled when a limit is set)."""
    settings = settings.resolved(task)
    windowing = {"max_length": max_length, "doc_stride": settings.doc_stride,
                 "max_query_length": settings.max_query_length}
    train_examples = _sample(splits.train, max_train_examples)
    train, num_misaligned = squad_features.prepare_train_features(train_examples, tokenizer, **windowing)
    dev = _sample(splits.dev, settings.max_eval_examples)
    dev_windows = squad_features.prepare_eval_features(dev, tokenizer, **windowing)
    return SquadAdapter(
        task=task, settings=settings, uses_head=settings.answerability_head,
        joint=settings.joint_prediction, train=train,
        evals={"validation": dev_windows.remove_columns(["example_id", "offset_mapping", "allowed"])},
        examples={"validation": dev.select_columns(["id", "context", "answers"])},
        windows={"validation": dev_windows.select_columns(["example_id", "offset_mapping", "allowed"])},
        num_train_examples=len(train_examples), num_misaligned=num_misaligned)


def load_model(model_path: str, built: SquadAdapter, **load_options) -> torch.nn.Module:
    """The encoder with fresh SQuAD heads: span, answerability classifier, joint end as `built` says.

    load_options: what from_pretrained takes besides (attn_implementation, trust_remote_code).
    """
    return from_pretrained_quietly(SquadModel, model_path, answerability=built.uses_head, joint=built.joint,
                                   **load_options)

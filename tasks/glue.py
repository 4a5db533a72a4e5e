"""GLUE through the one loop: features, model head, output reading and scoring for a GlueTask."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from datasets import Dataset, concatenate_datasets
from transformers import AutoModelForSequenceClassification, PreTrainedTokenizerBase

from tasks import evaluate_metrics, glue_head
from tasks.loading import from_pretrained_quietly
from tasks.registry import GlueTask
from tasks.sequence_features import tokenize


@dataclass
class GlueAdapter:
    """A GlueTask's tokenised splits and its scoring; satisfies tasks.finetune.TaskAdapter."""

    task: GlueTask
    train: Dataset
    evals: dict[str, Dataset]
    references: dict[str, list]  # gold labels of the dev splits
    indices: dict[str, list[int]]  # example ids per eval split, for the test-server files
    double_unordered: bool = False  # train holds each pair in both orders
    target_scale: float = 1.0  # regression labels were divided by this for training (head=electra)
    pad_to_multiple_of: int | None = 8  # as its recorded figures ran (tagging's None is faster on a CPU)

    def example_outputs(self, output, batch) -> list[np.ndarray]:
        return list(output.logits.float().cpu().numpy())

    def predictions(self, outputs: list[np.ndarray]) -> np.ndarray:
        """Class ids, or scores for regression."""
        stacked = np.stack(outputs)
        return stacked[:, 0] * self.target_scale if self.task.is_regression else stacked.argmax(axis=-1)

    def score(self, split: str, outputs: list[np.ndarray]) -> dict[str, float]:
        predictions = self.predictions(outputs).tolist()
        return evaluate_metrics.glue_scores(self.task, predictions, self.references[split])

    def label_strings(self, outputs: list[np.ndarray]) -> list[str]:
        """Predictions as the GLUE server wants them: label names, or scores clipped to STS-B's 0..5."""
        values = self.predictions(outputs)
        if self.task.is_regression:
            return [f"{min(max(float(v), 0.0), 5.0):.3f}" for v in values]
        return [self.task.label_names[int(v)] for v in values]


def both_orders(train: Dataset) -> Dataset:
    """The pairs followed by the same pairs with their sentences swapped.

    As ELECTRA's MRPC and STS classes do with `double_unordered` (classification_tasks.py,
    `_create_examples`): training split only; the dev and test sets are scored in their own order.
    """
    swapped = train.map(lambda batch: {"text_a": batch["text_b"], "text_b": batch["text_a"]},
                        batched=True, desc="swap sentence order")
    return concatenate_datasets([train, swapped])


def build_task(task: GlueTask, splits: dict[str, Dataset], tokenizer: PreTrainedTokenizerBase,
               max_length: int, max_train_examples: int | None = None,
               extra_evals: dict[str, Dataset] | None = None,
               double_unordered: bool = False, head: str = "hf") -> GlueAdapter:
    """Tokenise a task's splits; `extra_evals` adds prediction-only splits (AX for MNLI).

    double_unordered: train on both sentence orders if the task's registry row allows it
    (after subsampling, so both orders of each kept example are trained on). head: "electra" scales
    regression targets by the task's target_scale.
    """
    train = splits["train"]
    if max_train_examples is not None and max_train_examples < len(train):
        train = train.shuffle(seed=0).select(range(max_train_examples))
    double_unordered = double_unordered and task.double_unordered
    if double_unordered:
        train = both_orders(train)
    target_scale = task.target_scale if head == "electra" else 1.0
    eval_splits = {s: d for s, d in splits.items() if s != "train"} | (extra_evals or {})
    return GlueAdapter(
        task=task,
        train=tokenize(train, tokenizer, max_length, keep_labels=True, target_scale=target_scale),
        evals={s: tokenize(d, tokenizer, max_length, keep_labels=False) for s, d in eval_splits.items()},
        references={s: d["label"] for s, d in eval_splits.items() if s.startswith("validation")},
        indices={s: d["idx"] for s, d in eval_splits.items()}, double_unordered=double_unordered,
        target_scale=target_scale)


def load_model(model_path: str, task: GlueTask, head: str = "hf", **load_options) -> torch.nn.Module:
    """The encoder with a fresh classification (or regression) head: its family's own or ELECTRA's.

    load_options: what from_pretrained takes besides (attn_implementation, trust_remote_code).
    """
    labels = task.label_names or ("score",)
    model = from_pretrained_quietly(
        AutoModelForSequenceClassification, model_path, num_labels=task.num_labels,
        **load_options, id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
        problem_type="regression" if task.is_regression else "single_label_classification")
    return glue_head.use_electra_head(model) if head == "electra" else model

"""Your own text task through the one loop: features, model head, output reading and scoring.

Classification and regression as GLUE's (tasks/glue.py: the same tokenisation and heads); multi-label
with one sigmoid per label (transformers' multi_label_classification loss), a label predicted where its
logit is above 0 (probability 0.5), as HF's run_classification.py does. With class weights
(tasks/class_weights.py) the loop trains on the adapter's weighted `loss` instead of the head's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from datasets import Dataset
from transformers import AutoModelForSequenceClassification, PreTrainedTokenizerBase

from foundation.infra.errors import UserError
from tasks import glue_head, metrics
from tasks.class_weights import weights_for
from tasks.loading import from_pretrained_quietly
from tasks.sequence_features import tokenize, windows
from tasks.text_task import TextTask


@dataclass
class TextAdapter:
    """A TextTask's tokenised splits and its scoring; satisfies tasks.finetune.TaskAdapter."""

    task: TextTask
    train: Dataset
    evals: dict[str, Dataset]
    references: dict[str, list]  # gold labels of the dev split: ids, scores or 0/1 rows
    indices: dict[str, list[int]]  # each eval row's number in its file
    double_unordered: bool = False
    target_scale: float = 1.0
    pad_to_multiple_of: int | None = 8  # as its recorded figures ran (tagging's None is faster on a CPU)
    class_weights: tuple[float, ...] | None = None  # each label's loss weight; None: the head's own loss
    # long_text=windows: per eval split, each row's text (evals hold windows); empty: a row is a text
    windows_of: dict[str, list[int]] = field(default_factory=dict)
    # choose_threshold: the threshold the last dev scoring chose (the seed's, once its last epoch is scored)
    chosen_threshold: float | None = None

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The batch's class-weighted loss (only where class_weights is set)."""
        return weighted_loss(logits, labels, self.class_weights, self.task.is_multilabel)

    def example_outputs(self, output, batch) -> list[np.ndarray]:
        return list(output.logits.float().cpu().numpy())

    def documents(self, split: str, outputs: list[np.ndarray]) -> list[np.ndarray]:
        """Each text's logits: the mean of its windows' (long_text=windows), else the rows as they are."""
        owners = self.windows_of.get(split)
        if owners is None or not outputs:
            return outputs
        stacked, owners = np.stack(outputs), np.asarray(owners)
        return [stacked[owners == text].mean(axis=0) for text in range(int(owners.max()) + 1)]

    def predictions(self, outputs: list[np.ndarray], threshold: float | None = None) -> np.ndarray:
        """Class ids, scores (regression), or 0/1 rows (multi-label: sigmoid above the threshold)."""
        stacked = np.stack(outputs)
        if self.task.is_regression:
            return stacked[:, 0]
        if self.task.is_multilabel:
            threshold = threshold or self.chosen_threshold or self.task.threshold
            return (stacked > np.log(threshold / (1 - threshold))).astype(np.int64)
        return stacked.argmax(axis=-1)

    def score(self, split: str, outputs: list[np.ndarray]) -> dict[str, float]:
        """The kind's metrics, and `score`: the headline metric (what seeds, search and compare rank by);
        choose_threshold: a dev split's at the threshold it chooses, recorded as `threshold`."""
        references = np.asarray(self.references[split])
        if self.task.choose_threshold and self.task.is_multilabel and split.startswith("validation"):
            self.chosen_threshold = metrics.best_threshold(
                lambda t: metrics.METRICS[self.task.headline](self.predictions(outputs, t), references))
        predictions = self.predictions(outputs)
        values = {name: metrics.METRICS[name](predictions, references) for name in self.task.metrics}
        chosen = {"threshold": self.chosen_threshold} if self.task.choose_threshold else {}
        return values | {"score": values[self.task.headline]} | chosen

    def named(self, outputs: list[np.ndarray]) -> list:
        """Predictions with label names: a name, a score, or a list of names."""
        values, names = self.predictions(outputs), self.task.label_names
        if self.task.is_regression:
            return [float(v) for v in values]
        if self.task.is_multilabel:
            return [[names[k] for k in np.flatnonzero(row)] for row in values]
        return [names[int(v)] for v in values]


def weighted_loss(logits: torch.Tensor, labels: torch.Tensor, weights: tuple[float, ...],
                  multilabel: bool) -> torch.Tensor:
    """The batch's mean loss with each class's weight: classification, each example's cross-entropy times
    its class's weight, averaged over the examples (not torch's weight-normalised mean), so
    loss_reduction=sum trains on the sum of weighted losses; multi-label, BCEWithLogitsLoss's pos_weight."""
    weight = torch.tensor(weights, dtype=torch.float32, device=logits.device)
    if multilabel:
        return torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), labels.float(),
                                                                    pos_weight=weight)
    flat = labels.view(-1)
    losses = torch.nn.functional.cross_entropy(logits.float().view(-1, len(weights)), flat, reduction="none")
    return (losses * weight[flat]).mean()


def training_rows(train: Dataset, max_train_examples: int | None) -> Dataset:
    """The training rows trained on: a seeded subsample where max_train_examples asks for fewer."""
    if max_train_examples is not None and max_train_examples < len(train):
        return train.shuffle(seed=0).select(range(max_train_examples))
    return train


def loss_weights(task: TextTask, train: Dataset, setting: str) -> tuple[float, ...] | None:
    """Each label's loss weight for the class_weights setting on these training rows; None: unweighted."""
    if setting != "none" and task.is_regression:
        raise UserError(f"class_weights={setting} weighs classes, and task {task.name!r} is a regression; "
                        "leave class_weights=none")
    return weights_for(setting, task.label_names or (), train["label"], task.is_multilabel)


def check_windows(task: TextTask) -> None:
    """long_text=windows reads one text: a pair's second text would leave each window a varying room."""
    if len(task.text_columns) != 1:
        raise UserError(f"long_text=windows reads one text column, and task {task.name!r} pairs "
                        f"{' and '.join(task.text_columns)}; leave long_text=truncate")


def build_task(task: TextTask, splits: dict[str, Dataset], tokenizer: PreTrainedTokenizerBase,
               max_length: int, max_train_examples: int | None = None,
               weights: tuple[float, ...] | None = None, overlap: int | None = None) -> TextAdapter:
    """Tokenise the splits (text_a, [text_b], label, idx; tasks/text_data.py); `weights`: loss_weights';
    `overlap`: long_text=windows' window_overlap (None: each text cut at max_length)."""
    train = training_rows(splits["train"], max_train_examples)
    evals = {split: data for split, data in splits.items() if split != "train"}
    windows_of = {}
    if overlap is None:
        train = tokenize(train, tokenizer, max_length, keep_labels=True)
        encoded = {split: tokenize(data, tokenizer, max_length, keep_labels=False)
                   for split, data in evals.items()}
    else:
        train = windows(train, tokenizer, max_length, overlap, keep_labels=True)[0]
        encoded = {}
        for split, data in evals.items():
            encoded[split], windows_of[split] = windows(data, tokenizer, max_length, overlap,
                                                        keep_labels=False)
    return TextAdapter(
        task=task, train=train, evals=encoded,
        references={split: data["label"] for split, data in evals.items() if split.startswith("validation")},
        indices={split: data["idx"] for split, data in evals.items()}, class_weights=weights,
        windows_of=windows_of)


def load_model(model_path: str, task: TextTask, head: str = "hf", **load_options) -> torch.nn.Module:
    """The encoder with a fresh head for the task, its label names in the config (id2label)."""
    labels = task.label_names or ("score",)
    model = from_pretrained_quietly(
        AutoModelForSequenceClassification, model_path, num_labels=task.num_labels, **load_options,
        id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)},
        problem_type=task.problem_type)
    return glue_head.use_electra_head(model) if head == "electra" else model

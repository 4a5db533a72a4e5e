"""`harness eval`: score a checkpoint that is already fine-tuned, with no training.

A seed of `harness eval` is the checkpoint's head as it is, run over the task's dev (and test) splits
through the loop's own `predict` and the task's own scorer, so its outputs, dev_outputs.json and
results.json have a run's form and `harness compare` pairs it with a run on the same examples (as the
official code's do_train=false, or transformers' --do_eval). The checkpoint's labels are matched to the
task's by name (config.json's id2label); transformers' placeholder names (LABEL_0, ...) are taken in
order, and said so.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import torch
import transformers

from foundation.infra.errors import UserError
from foundation.training import placement
from foundation.training.quiet import quiet_transformers
from harness.finetuning.model_setup import ModelSetup
from tasks import batching
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult, TaskAdapter, predict

PLACEHOLDER = re.compile(r"LABEL_\d+$")


# What a kind's Finetuning.load_checkpoint returns: the checkpoint's model, and what takes its outputs into
# the task's label order (None: they are in it already).
Remap = Callable[[dict[str, list[np.ndarray]]], dict[str, list[np.ndarray]]] | None


def evaluate_seed(load_checkpoint: Callable[[ModelSetup, TaskAdapter], tuple[torch.nn.Module, Remap]],
                  built: TaskAdapter, config: FinetuneConfig, setup: ModelSetup
                  ) -> tuple[torch.nn.Module, FinetuneResult]:
    """The checkpoint's predictions and dev scores on the task, in a FinetuneResult with no training;
    `load_checkpoint`: the kind's (its Finetuning's), with its head and label order."""
    model, remap = load_checkpoint(setup, built)
    model.to(setup.device)
    precision = placement.resolve_precision(config.precision, setup.device)
    autocast = placement.autocast(setup.device, precision)
    collate = batching.collator(setup.tokenizer, built.pad_to_multiple_of)
    outputs = predict(model, built, built.evals, config, collate, autocast)
    if remap is not None:
        outputs = remap(outputs)
    metrics = {split: built.score(split, rows) for split, rows in outputs.items()
               if split.startswith("validation")}
    row = {"epoch": 0, "train_loss": float("nan")} | {
        f"{split}_{name}": value for split, values in metrics.items() for name, value in values.items()}
    return model, FinetuneResult([row], metrics, outputs, 0, 0.0, 0.0, 0.0, 0)


def classifier_checkpoint(setup: ModelSetup, built: TaskAdapter) -> tuple[torch.nn.Module, Remap]:
    """A sequence classifier (GLUE, your own text) with its logits in the task's label order."""
    model = load_classifier(setup, transformers.AutoModelForSequenceClassification)
    order = label_order(model.config, built.task)
    if order is None:
        return model, None
    return model, lambda outputs: {split: [row[order] for row in rows] for split, rows in outputs.items()}


def token_classifier_checkpoint(setup: ModelSetup, built: TaskAdapter) -> tuple[torch.nn.Module, Remap]:
    """A token classifier (tagging) with each token's tag id, the checkpoint's, as the task's id."""
    model = load_classifier(setup, transformers.AutoModelForTokenClassification)
    order = label_order(model.config, built.task)
    if order is None:
        return model, None
    task_id = np.argsort(order)
    return model, lambda outputs: {split: [task_id[row].astype(row.dtype) for row in rows]
                                   for split, rows in outputs.items()}


def require_head(setup: ModelSetup, architecture: str = "ForSequenceClassification") -> None:
    """A UserError, before any data is read, where config.json names no head of the type the task needs
    (`architecture`: the class name's ending: ForSequenceClassification, ForQuestionAnswering, ...)."""
    architectures = getattr(setup.model_config, "architectures", None) or []
    if not any(name.endswith(architecture) for name in architectures):
        heads = {"ForQuestionAnswering": "span (question answering)",
                 "ForTokenClassification": "token-classification (tagging)"}
        head = heads.get(architecture, "classification")
        raise UserError(f"{setup.model_path!r} is a {', '.join(architectures) or 'bare encoder'}, with no "
                        f"fine-tuned {head} head; harness eval scores a fine-tuned checkpoint, "
                        "harness run fine-tunes one")


def load_classifier(setup: ModelSetup, auto_class=transformers.AutoModelForSequenceClassification
                    ) -> torch.nn.Module:
    """The checkpoint with its own classification (or token-classification) head, or a UserError where it
    has none."""
    try:
        with quiet_transformers():
            model, info = auto_class.from_pretrained(setup.model_path, output_loading_info=True,
                                                     **setup.load_options)
    except ValueError as error:  # a family without a sequence-classification head
        raise UserError(f"{setup.model_path!r} cannot be loaded as a classifier ({error}); pass a fine-tuned "
                        "classification checkpoint") from error
    missing = [key for key in info.get("missing_keys", ()) if "classifier" in key or "score" in key
               or "pooler" in key or "out_proj" in key] or list(info.get("missing_keys", ()))
    if missing:
        raise UserError(f"{setup.model_path!r} has no fine-tuned head for this task (missing weights: "
                        f"{', '.join(sorted(missing)[:4])}); harness eval scores a fine-tuned checkpoint, "
                        "harness run fine-tunes one")
    return model


def label_order(model_config, task) -> np.ndarray | None:
    """Indices taking the checkpoint's outputs into the task's label order; None where they already agree.

    Refused in one line naming both label sets where they differ (or the output counts do)."""
    names = task.label_names
    count = model_config.num_labels
    if names is None:  # regression: one output, no names to match
        if count != 1:
            raise UserError(f"the checkpoint has {count} outputs but {task.name} is a regression task (one "
                            "score); pass the task it was fine-tuned on")
        return None
    mine = [model_config.id2label[i] for i in range(count)]
    if count != len(names):
        raise UserError(f"the checkpoint's labels ({', '.join(map(str, mine))}) are not {task.name}'s "
                        f"({', '.join(names)}); pass the task it was fine-tuned on")
    if all(PLACEHOLDER.match(str(name)) for name in mine):
        print(f"note: the checkpoint's labels are unnamed ({', '.join(mine)}); taken in order as "
              f"{', '.join(names)}")
        return None
    if set(map(str, mine)) != set(names):
        raise UserError(f"the checkpoint's labels ({', '.join(map(str, mine))}) are not {task.name}'s "
                        f"({', '.join(names)}); pass the task it was fine-tuned on, or rename its "
                        "config.json's id2label")
    if list(map(str, mine)) == list(names):
        return None
    position = {str(name): i for i, name in enumerate(mine)}
    return np.array([position[name] for name in names])

"""Which settings of a results file depart from ELECTRA's fine-tuning recipe.

The recipe is the defaults of FinetuneConfig and SquadConfig (tasks/config.py); a setting left at
None takes the recipe's value for the model size and task, so an explicit value departs only where
it differs from that. A run with departures measures something else than the paper did: its scores
get their own leaderboard row and are not compared with the paper's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from tasks.config import FinetuneConfig, SquadConfig
from tasks.registry import GLUE_TASKS, SQUAD_TASKS

# Settings that change how a run computes or what it stores, not what it measures, so changing them
# keeps a run on the recipe: evaluation batch size, bf16 vs fp32 and torch.compile move scores by
# numerical noise only; save_models and predict_test decide which files are written; seed is where
# the seeds start, and seeds are the noise the median is taken over; gradient_accumulation_steps
# keeps the batch and its step, moving scores by summation order and dropout draws only; trust_remote_code
# only allows loading. Every other setting counts.
NOT_DEPARTURES = frozenset({"eval_batch_size", "precision", "compile", "save_models", "predict_test", "seed",
                            "gradient_accumulation_steps", "trust_remote_code"})
# What a recipe setting was in results files written before it existed (their config blocks hold
# every setting of their time): fine-tuning clipped the batch mean's gradient (the official code
# clips the batch sum's), and SQuAD predicted with independent start and end heads.
BEFORE_SETTING = {"loss_reduction": "mean", "joint_prediction": False}
# SQuAD without a train file trains on some dev articles and scores the rest: never the paper's setup.
HOLDOUT = ("holdout_fraction", "holdout_seed")
SQUAD_BY_NAME = {task.name: task for task in SQUAD_TASKS.values()}


def departures(results: Mapping, size: str | None) -> dict[str, object]:
    """{setting: value} of every setting the results file's run changed from the recipe.

    `size` is the model's recipe row (small, base, large); None when unknown, and then an explicit
    learning rate or layer-wise decay counts as a departure.
    """
    names = results.get("tasks", ())
    glue = [GLUE_TASKS[t] for t in names if t in GLUE_TASKS and GLUE_TASKS[t].predicted_by is None]
    squad = [SQUAD_BY_NAME[t] for t in names if t in SQUAD_BY_NAME]
    model = results.get("model") if isinstance(results.get("model"), Mapping) else {}
    # head=auto is ELECTRA's head on an ELECTRA discriminator, the family's own on any other (files written
    # before families were recorded are of ELECTRA discriminators, where "electra" was the default)
    family_head = "electra" if model.get("family", "electra") == "electra" else "hf"
    found = _finetune(results.get("config") or {}, glue + squad, size, family_head)
    if squad and isinstance(results.get("settings"), Mapping):
        found |= _squad(results["settings"], squad[0], (results.get("data") or {}).get("holdout"))
    return found


def _finetune(config: Mapping, tasks: Sequence, size: str | None, family_head: str) -> dict[str, object]:
    found = {}
    recipe = dataclasses.replace(FinetuneConfig(), head=family_head)
    for field in dataclasses.fields(FinetuneConfig):
        name, default = field.name, getattr(recipe, field.name)
        value = config.get(name, BEFORE_SETTING.get(name, default) if "max_grad_norm" in config else default)
        if name in NOT_DEPARTURES or value == default or (name == "head" and value == "auto"):
            continue
        if default is None and tasks and (size or name not in ("learning_rate", "layerwise_lr_decay")):
            # None means "the recipe's value for this size and task": the same value explicitly is no change
            resolved = {getattr(recipe.resolved(size or "small", t.num_epochs, t.max_length), name)
                        for t in tasks}
            if resolved == {value}:
                continue
        found[name] = value
    return found


def _squad(settings: Mapping, task, holdout: Mapping | None) -> dict[str, object]:
    recipe = SquadConfig().resolved(task)
    found = {}
    for field in dataclasses.fields(SquadConfig):
        name = field.name
        value = settings.get(name, BEFORE_SETTING.get(name, getattr(recipe, name)))
        if name in NOT_DEPARTURES or name in HOLDOUT:
            continue
        if value != getattr(recipe, name):
            found[name] = value
    if holdout:
        found |= {"holdout_fraction": holdout.get("fraction"), "holdout_seed": holdout.get("seed")}
    return found


def describe(found: Mapping[str, object]) -> str:
    """'max_train_examples=100, num_epochs=1': key=value as on the command line, sorted by name so that
    a row's identity does not depend on the order of the config's fields."""
    return ", ".join(f"{name}={_text(found[name])}" for name in sorted(found))


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():  # num_epochs=1 is parsed as 1.0: one identity
        return str(int(value))
    return "none" if value is None else str(value)

"""What `harness search` tunes: ranges around ELECTRA's recipe, per model size and task, overridable in TOML.

Every parameter is named after the FinetuneConfig key it sets, so a trial's parameters are a config
override as they stand (best_params.json, `harness run glue --params-from`).

The seed is not a parameter: a trial trains its configuration once per seed of `trial_seeds`, the
same seeds for every trial, and is scored by their mean. Drawing the seed would let the search pick
the luckiest seed of its configurations and carry it, and its optimistic score, into the follow-up run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import load_config, read_toml
from pretrain.infra.errors import UserError
from tasks.config import RECIPE

_BOUNDS = {  # what FinetuneConfig accepts for each ranged parameter
    "learning_rate": ("above 0", lambda v: v > 0),
    "layerwise_lr_decay": ("between 0 and 1", lambda v: 0 <= v <= 1),
    "num_epochs": ("at least 1", lambda v: v >= 1),
    "warmup_fraction": ("between 0 and 1", lambda v: 0 <= v <= 1),
    "weight_decay": ("at least 0", lambda v: v >= 0),
}
SEARCHED = ("learning_rate", "layerwise_lr_decay", "num_epochs", "batch_size", "warmup_fraction",
            "weight_decay")  # what a trial draws: its Optuna parameters
TRIAL_SEEDS_HELP = ("the fine-tuning seeds every trial trains its configuration on, scored by their mean "
                    "(the same for all trials; more for small dev sets, where seeds spread by points)")
SEED_REFUSED = ("seed is not searched: a trial trains on the fixed trial_seeds and is scored by their "
                "mean, so the search cannot pick a lucky seed; remove seed and set trial_seeds = [0, 1, 2] "
                "(or --trial-seeds 0,1,2) to measure each trial on more seeds")


@dataclass(frozen=True)
class SearchSpace:
    """[low, high] ranges (learning_rate on a log scale) and batch_size choices; low == high fixes one.

    None means "around ELECTRA's recipe": learning_rate from a third to three times the recipe's
    rate for the model size, num_epochs from half to one and a half times the task's epochs.
    """

    learning_rate: tuple[float, float] | None = None
    layerwise_lr_decay: tuple[float, float] = (0.6, 1.0)
    num_epochs: tuple[int, int] | None = None
    batch_size: tuple[int, ...] = (16, 32)
    warmup_fraction: tuple[float, float] = (0.0, 0.2)
    weight_decay: tuple[float, float] = (0.0, 0.1)
    trial_seeds: tuple[int, ...] = field(default=(0,), metadata={"help": TRIAL_SEEDS_HELP})

    def __post_init__(self):
        problems = []
        seeds = self.trial_seeds
        if not seeds or min(seeds) < 0 or len(set(seeds)) < len(seeds):
            problems.append(f"trial_seeds must list distinct seeds of 0 or more (got {list(seeds)})")
        for name, (allowed, within) in _BOUNDS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if len(value) != 2 or value[0] > value[1]:
                problems.append(f"{name} must be [low, high] with low <= high (got {list(value)})")
            elif not all(within(v) for v in value):
                problems.append(f"{name} range {list(value)} must be {allowed}")
        if not self.batch_size or min(self.batch_size) < 1:
            problems.append(f"batch_size must list positive sizes (got {list(self.batch_size)})")
        if problems:
            raise ValueError("; ".join(problems))

    def resolved(self, size: str, task_epochs: float) -> SearchSpace:
        """This space with the recipe-relative ranges filled in for a model size and task."""
        learning_rate = RECIPE[size][0]
        epochs = round(task_epochs)
        return dataclasses.replace(
            self, learning_rate=self.learning_rate or (learning_rate / 3, learning_rate * 3),
            num_epochs=self.num_epochs or (max(1, epochs // 2), epochs + epochs // 2))

    def suggest(self, trial) -> dict[str, Any]:
        """One trial's FinetuneConfig overrides, drawn from an optuna.Trial (space must be resolved)."""
        return {
            "learning_rate": trial.suggest_float("learning_rate", *self.learning_rate, log=True),
            "layerwise_lr_decay": trial.suggest_float("layerwise_lr_decay", *self.layerwise_lr_decay),
            "num_epochs": trial.suggest_int("num_epochs", *self.num_epochs),
            "batch_size": trial.suggest_categorical("batch_size", list(self.batch_size)),
            "warmup_fraction": trial.suggest_float("warmup_fraction", *self.warmup_fraction),
            "weight_decay": trial.suggest_float("weight_decay", *self.weight_decay),
        }

    def ranges(self) -> dict[str, Any]:
        """The searched ranges alone (no trial_seeds), as JSON would hold them: a study's `space`."""
        return {name: None if getattr(self, name) is None else list(getattr(self, name)) for name in SEARCHED}


def load_space(path: str | Path | None, overrides: list[str] = ()) -> SearchSpace:
    """The default space, with the ranges a TOML file sets (`learning_rate = [1e-4, 1e-3]`) and overrides
    (`trial_seeds=0,1,2`); a file or override naming `seed` is refused, saying why."""
    where = f"search space {str(path)!r}" if path is not None else "harness search"
    try:
        named = set(read_toml(Path(path))) if path is not None else set()
        if "seed" in named | {item.partition("=")[0].strip() for item in overrides}:
            raise UserError(SEED_REFUSED)
        return load_config(SearchSpace, path, overrides)
    except UserError as error:
        raise UserError(f"{where}: {error}") from error

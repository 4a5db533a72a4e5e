"""What `harness search` tunes: ranges around ELECTRA's recipe, per model size and task, overridable in TOML.

Every parameter is named after the FinetuneConfig key it sets, so a trial's parameters are a config
override as they stand (best_params.json, `harness run glue --params-from`).

The seed is not a parameter: a trial trains its configuration once per seed of `trial_seeds`, the
same seeds for every trial, and is scored by their mean. Drawing the seed would let the search pick
the luckiest seed of its configurations and carry it, and its optimistic score, into the follow-up run.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError
from foundation.infra.settings import Flag, choices, setting
from harness.config import load_config, read_toml
from tasks.config import RECIPE, FinetuneConfig

SEED_REFUSED = ("seed is not searched: a trial trains on the fixed trial_seeds and is scored by their "
                "mean, so the search cannot pick a lucky seed; remove seed and set trial_seeds = [0, 1, 2] "
                "(or --trial-seeds 0,1,2) to measure each trial on more seeds")


@dataclass(frozen=True)
class SearchSpace:
    """[low, high] ranges and batch_size choices, each field's help saying what it searches (`harness
    settings search`); low == high fixes one; None is a range around ELECTRA's recipe."""

    learning_rate: tuple[float, float] | None = setting(None, role="recipe", help=(
        "[low, high] of the peak rate, drawn on a log scale; none: a third to three times ELECTRA's rate "
        "for the model size"))
    layerwise_lr_decay: tuple[float, float] = setting((0.6, 1.0), role="recipe", help=(
        "[low, high] of the layer-wise learning-rate decay"))
    num_epochs: tuple[int, int] | None = setting(None, role="recipe", help=(
        "[low, high] of whole epochs; none: half to one and a half times the task's recipe epochs"))
    batch_size: tuple[int, ...] = setting((16, 32), role="recipe", help=(
        "the batch sizes a trial chooses from"))
    warmup_fraction: tuple[float, float] = setting((0.0, 0.2), role="recipe", help=(
        "[low, high] of the share of steps warming up"))
    weight_decay: tuple[float, float] = setting((0.0, 0.1), role="recipe", help=(
        "[low, high] of the weight decay"))
    # Departures from ELECTRA's recipe a trial may draw only where the space asks for them (empty: not
    # searched, the recipe's value); a run from the best trial names them on the leaderboard and card.
    class_weights: tuple[str, ...] = setting((), role="recipe", help=(
        "the class_weights a trial chooses from, e.g. [\"none\", \"balanced\"] (a departure, your own text "
        "only); empty: not searched"))
    select_epoch: tuple[str, ...] = setting((), role="recipe", help=(
        "the select_epoch a trial chooses from, e.g. [\"last\", \"best\"] (best: a departure, best epoch on "
        "dev); empty: not searched"))
    trial_seeds: tuple[int, ...] = setting((0,), role="recipe", flag=Flag("--trial-seeds", "SEEDS"), help=(
        "the fine-tuning seeds every trial trains its configuration on, scored by their mean (the same for "
        "all trials; more for small dev sets, where seeds spread by points)"))

    def __post_init__(self):
        problems = []
        seeds = self.trial_seeds
        if not seeds or min(seeds) < 0 or len(set(seeds)) < len(seeds):
            problems.append(f"trial_seeds must list distinct seeds of 0 or more (got {list(seeds)})")
        for name in SEARCHED + DEPARTURES:
            value = getattr(self, name)
            if value is None:
                continue
            if name in DEPARTURES:
                problems += [f"{name} choice {choice!r}: {refused}" for choice in value
                             if (refused := _refused_choice(name, choice))][:1]
            elif name == "batch_size" and not value:
                problems.append(f"batch_size must list positive sizes (got {list(value)})")
            elif name != "batch_size" and (len(value) != 2 or value[0] > value[1]):
                problems.append(f"{name} must be [low, high] with low <= high (got {list(value)})")
            elif refused := _refused(name, value):
                what = "choices" if name == "batch_size" else "range"
                problems.append(f"{name} {what} {list(value)}: {refused}")
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
        } | {name: trial.suggest_categorical(name, list(getattr(self, name))) for name in self.departures()}

    def departures(self) -> tuple[str, ...]:
        """The departures this space searches (those it lists choices for)."""
        return tuple(name for name in DEPARTURES if getattr(self, name))

    def ranges(self) -> dict[str, Any]:
        """The searched ranges alone (no trial_seeds), as JSON would hold them: a study's `space`."""
        # an unsearched departure is left out: a study made before they could be searched resumes
        return {name: None if getattr(self, name) is None else list(getattr(self, name))
                for name in SEARCHED + self.departures()}


# What every trial draws, its Optuna parameters: the space's settings that FinetuneConfig has (not
# trial_seeds); DEPARTURES only where the space lists choices for them.
DEPARTURES = ("class_weights", "select_epoch")
SEARCHED = tuple(name for name in SearchSpace.__dataclass_fields__
                 if name in FinetuneConfig.__dataclass_fields__ and name not in DEPARTURES)


def _refused_choice(name: str, choice: str) -> str | None:
    """Why FinetuneConfig's `name` cannot be `choice` (its declared choices, or its own checks), or None."""
    allowed = choices(typing.get_type_hints(FinetuneConfig)[name])
    if allowed and choice not in allowed:
        return f"choose from {', '.join(allowed)}"
    return _refused(name, (choice,))


def _refused(name: str, values: tuple) -> str | None:
    """What FinetuneConfig says of the first of these values of setting `name` it refuses (its own range
    checks, not restated here), or None."""
    for value in values:
        try:
            FinetuneConfig(**{name: value})
        except ValueError as error:
            return str(error)
    return None


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

"""Which settings of a results file depart from ELECTRA's fine-tuning recipe.

The recipe is the defaults of FinetuneConfig and SquadConfig (tasks/config.py); a setting left at
None takes the recipe's value for the model size and task, so an explicit value departs only where
it differs from that. A run with departures measures something else than the paper did: its scores
get their own leaderboard row and are not compared with the paper's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from foundation.infra.settings import befores, of_role
from tasks.config import FinetuneConfig, SquadConfig, head_for
from tasks.registry import GLUE_TASKS, SQUAD_TASKS

# Only recipe settings depart (foundation/infra/settings.py): runtime ones (evaluation batch size, precision,
# torch.compile, batch slicing, trust_remote_code, the seed the seeds start at) move scores by numerical
# noise or seed draws only, and output ones decide which files are written. A full config block without
# a setting was written before it existed: it counts as the setting's `before` value.
# SQuAD without a train file trains on some dev articles and scores the rest: never the paper's setup.
HOLDOUT = ("holdout_fraction", "holdout_seed")
BEST_EPOCH = "best epoch on dev"  # select_epoch=best, wherever its scores are shown
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
    found = _finetune(results.get("config") or {}, glue + squad, size, model.get("family"))
    if squad and isinstance(results.get("settings"), Mapping):
        found |= _squad(results["settings"], squad[0], (results.get("data") or {}).get("holdout"))
    task = (results.get("data") or {}).get("task") if isinstance(results.get("data"), Mapping) else None
    if isinstance(task, Mapping) and task.get("choose_threshold"):  # your own multi-label task's
        found["choose_threshold"] = True
    return found


def _finetune(config: Mapping, tasks: Sequence, size: str | None, family: str | None) -> dict[str, object]:
    found = {}
    recipe = dataclasses.replace(FinetuneConfig(), head=head_for("auto", family))
    before = befores(FinetuneConfig) if "max_grad_norm" in config else {}  # a full block, or a test's keys
    for name in of_role(FinetuneConfig, "recipe"):
        default = getattr(recipe, name)
        value = config.get(name, before.get(name, default))
        if name == "head":
            value = head_for(value, family)
        if value == default:
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
    legacy = SquadConfig(**befores(SquadConfig)).resolved(task)  # what a settings block without a key meant
    found = {}
    for name in of_role(SquadConfig, "recipe"):
        value = settings.get(name, getattr(legacy, name))
        if name in HOLDOUT:
            continue
        if value != getattr(recipe, name):
            found[name] = value
    if holdout:
        found |= {"holdout_fraction": holdout.get("fraction"), "holdout_seed": holdout.get("seed")}
    return found


# Departures whose name alone would hide what they do to the scores beside them
SAID = {("select_epoch", "best"): BEST_EPOCH, ("choose_threshold", True): "threshold tuned on dev"}


def describe(found: Mapping[str, object]) -> str:
    """'max_train_examples=100, num_epochs=1': key=value as on the command line, sorted by name so that
    a row's identity does not depend on the order of the config's fields; select_epoch=best says
    "(best epoch on dev)" beside it."""
    return ", ".join(f"{name}={_text(found[name])}" + (f" ({SAID[name, found[name]]})"
                                                       if (name, found[name]) in SAID else "")
                     for name in sorted(found))


def best_epoch_note(results: Mapping) -> str | None:
    """The run table's line for select_epoch=best: its scores are each seed's best epoch on dev, which
    inflates them; None for ELECTRA's last epoch."""
    chosen = [(r["task"], r["seed"], r["chosen_epoch"]) for r in results.get("runs", ())
              if "chosen_epoch" in r]
    if (results.get("config") or {}).get("select_epoch") != "best" or not chosen:
        return None
    epochs = ", ".join(f"{task} seed {seed}: {epoch}" for task, seed, epoch in chosen)
    return (f"scores: {BEST_EPOCH} (select_epoch=best, a departure from ELECTRA's last epoch; choosing on "
            f"dev inflates dev scores); epochs chosen: {epochs}")


def threshold_note(results: Mapping) -> str | None:
    """The run table's line for a multi-label threshold chosen on dev: each seed's; None otherwise."""
    task = (results.get("data") or {}).get("task") if isinstance(results.get("data"), Mapping) else None
    if not isinstance(task, Mapping) or not task.get("choose_threshold"):
        return None
    chosen = [f"{r['task']} seed {r['seed']}: {r['metrics']['validation']['threshold']:.2f}"
              for r in results.get("runs", ()) if "threshold" in r["metrics"].get("validation", {})]
    return ("thresholds: chosen on dev per seed (choose_threshold, a departure: it tunes the dev score "
            f"it is scored by); {', '.join(chosen)}")


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():  # num_epochs=1 is parsed as 1.0: one identity
        return str(int(value))
    return "none" if value is None else str(value)

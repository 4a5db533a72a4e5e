"""What `harness search` tunes: one task of any kind, built once by the kind's Finetuning itself.

A search trial reads, validates and tokenises its data through the same `Finetuning.prepare` and `build`
as `harness run` (harness/finetuning/orchestration.py), and trains a fresh model per trial and seed
through the same `train_seed`; a kind joins the search through its runner's `search` (harness/kinds.py)
and nothing here.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from typing import Any

from foundation.training.quiet import quiet_libraries
from harness.finetuning import model_setup
from harness.finetuning.orchestration import Finetuning, train_seed
from harness.search.trials import SearchTarget
from tasks.finetune import LoopIO


def search_target(finetuning: Finetuning[Any], model: str,
                     fixed: Callable[[Any], dict[str, Any]] | None = None) -> SearchTarget:
    """The kind's one task on `model`, its data read and tokenised once; a fresh model per trial.
    `fixed`: what the study records of the kind's own settings, from its plan.

    The kind's invocation carries the fixed settings every trial shares, with num_epochs unset (the
    task's recipe epochs centre the search range) and no test prediction (of no use to a search)."""
    config = finetuning.invocation.config
    with quiet_libraries():  # as in a run: no tokenising or loading bars
        setup = model_setup.load(model, config.precision, config.trust_remote_code)
        plan = finetuning.prepare(setup)
        [task] = plan.configs  # a search tunes one task
        resolved = plan.configs[task]
        built = finetuning.build(plan, task, setup)

    def train(trial_config, on_epoch):
        trial_config = dataclasses.replace(trial_config, max_length=resolved.max_length)
        trial_config = model_setup.for_model(trial_config, setup)
        io = LoopIO(on_epoch, progress=False)
        return train_seed(finetuning.load_model, built, trial_config, setup, io)[1]

    return SearchTarget(finetuning.experiment, task, model, setup.size, resolved.num_epochs, train, dev_score,
                        fixed(plan) if fixed else {})


def search_config(config):
    """The fixed settings as a kind's invocation takes them for a search (see search_target)."""
    return dataclasses.replace(config, num_epochs=None, predict_test=False)


def dev_score(row: dict[str, float]) -> float:
    """A history row's dev score: the mean over dev splits (MNLI m/mm) of each split's `score` (SQuAD: F1)."""
    return statistics.fmean(value for key, value in row.items()
                            if key.startswith("validation") and key.endswith("_score"))

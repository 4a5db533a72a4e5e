"""What `harness search` can tune: one function per benchmark, loading a task once, returning a SearchTarget.

A benchmark joins the search with a function here and a subparser in harness/commands/search.py.
"""

from __future__ import annotations

import dataclasses
import statistics

from harness.config import as_dict
from harness.finetuning import glue_benchmark, model_setup, squad_benchmark
from harness.finetuning.orchestration import train_seed
from harness.search.trials import SearchTarget
from pretrain.infra.errors import UserError
from tasks import glue, squad
from tasks.config import FinetuneConfig, SquadConfig
from tasks.finetune import LoopIO
from tasks.glue_data import glue_dir, load_glue
from tasks.registry import GLUE_TASKS, squad_task


def glue_target(model: str, task_name: str, data_dir: str | None, config: FinetuneConfig) -> SearchTarget:
    """One GLUE task: its train and dev splits tokenised once, a fresh classifier per trial."""
    task = GLUE_TASKS.get(task_name)
    if task is None or task.predicted_by is not None:
        choices = ", ".join(name for name, t in GLUE_TASKS.items() if t.predicted_by is None)
        raise UserError(f"cannot search task {task_name!r}; choose one of {choices}")
    setup = model_setup.load(model, config.precision, config.trust_remote_code)
    config = model_setup.for_model(config, setup)
    # Test splits are of no use to a search: drop them before tokenising.
    splits = {split: data for split, data in load_glue(task, glue_dir(data_dir)).items()
              if not split.startswith("test")}
    max_length = config.max_length or task.max_length
    built = glue.build_task(task, splits, setup.tokenizer, max_length, config.max_train_examples,
                            double_unordered=config.double_unordered, head=config.head)

    def train(config: FinetuneConfig, on_epoch):
        config = model_setup.for_model(dataclasses.replace(config, max_length=max_length), setup)
        return train_seed(glue_benchmark.load_model, built, config, setup,
                          LoopIO(on_epoch, progress=False))[1]

    return SearchTarget("glue", task.name, model, setup.size, task.num_epochs, train, dev_score)


def squad_target(model: str, version: str, source: squad.SquadSource, config: FinetuneConfig,
                 squad_config: SquadConfig) -> SearchTarget:
    """One SQuAD version: its windows built once, a fresh span model per trial; scored by dev F1."""
    task = squad_task(version)
    setup = model_setup.load(model, config.precision, config.trust_remote_code)
    max_length = config.max_length or task.max_length
    positions = setup.model_config.max_position_embeddings
    if max_length > positions:
        raise UserError(f"max_length {max_length} exceeds the model's {positions} positions; "
                        f"pass max_length={positions} or less")
    splits = squad.load_splits(task, source, squad_config)
    built = squad.build_task(task, splits, setup.tokenizer, max_length, squad_config,
                             config.max_train_examples)

    def train(config: FinetuneConfig, on_epoch):
        config = dataclasses.replace(config, max_length=max_length)
        return train_seed(squad_benchmark.load_model, built, config, setup,
                          LoopIO(on_epoch, progress=False))[1]

    defaults = as_dict(SquadConfig())
    fixed = {key: value for key, value in as_dict(squad_config).items() if value != defaults[key]}
    return SearchTarget("squad", task.name, model, setup.size, task.num_epochs, train, dev_score, fixed)


def dev_score(row: dict[str, float]) -> float:
    """A history row's dev score: the mean over dev splits (MNLI m/mm) of each split's `score` (SQuAD: F1)."""
    return statistics.fmean(value for key, value in row.items()
                            if key.startswith("validation") and key.endswith("_score"))

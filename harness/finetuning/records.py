"""results.json's records of a fine-tuning run, from the harness's objects (reports/results_schema.py
holds the schema): the fresh body, one (task, seed) row, resumed and diverged seeds, and the fine-tuned
checkpoint."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from pathlib import Path

import torch
import transformers

from foundation.infra import atomic
from foundation.infra.errors import UserError
from harness.config import as_dict
from reports import results_schema
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult


def fresh_results(results_format: str, model: results_schema.ModelBlock, config: FinetuneConfig,
                  tasks: Sequence[str], seeds: int, **extra) -> results_schema.ResultsBody:
    """A new results.json body; `extra` keys (settings, data, search) sit beside config."""
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    return results_schema.body(results_format, model, as_dict(config), tasks, seeds,
                               device=platform.processor() or platform.machine(), versions=versions, **extra)


def say_resumed(results: results_schema.ResultsBody, task: str, seeds: range) -> None:
    """On a resume, say which seeds results.json already holds, so the user knows what this invocation will
    (not) train. A seed that diverged counts as done: the same seed and settings diverge again."""
    kept = [seed for seed in seeds if results_schema.is_done(results, task, seed)]
    if kept:
        left = [seed for seed in seeds if seed not in kept]
        rest = f"training {_seeds(left)}" if left else "nothing left to train"
        print(f"resume {task}: kept {_seeds(kept)} from results.json; {rest}")


def _seeds(seeds: list[int]) -> str:
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def diverged_record(task: str, config: FinetuneConfig,
                    error: FloatingPointError) -> results_schema.DivergedRecord:
    """A (task, seed) whose training loss went non-finite: kept apart from `runs`, out of every summary."""
    return results_schema.diverged_record(task, config.seed, str(error), as_dict(config))


def diverged_error(diverged: Sequence[results_schema.DivergedRecord], recorded_in: str = results_schema.FILE,
                   left_out_of: str = "the summaries",
                   fix: str = "re-run with a lower learning_rate into a new --output-dir",
                   ) -> UserError | None:
    """One line naming the diverged tasks and seeds (diverged_record dicts) and the fix, or None when no
    seed diverged. An experiment passes its arms' records with the arm in `task` and its own wording."""
    if not diverged:
        return None
    by_task: dict[str, list[str]] = {}
    for record in diverged:
        by_task.setdefault(record["task"], []).append(str(record["seed"]))
    named = ", ".join(f"{task} seed{'s' if len(seeds) > 1 else ''} {'/'.join(seeds)}"
                      for task, seeds in by_task.items())
    return UserError(f"{len(diverged)} fine-tuning{'s' if len(diverged) > 1 else ''} diverged ({named}: "
                     f"{diverged[0]['error']}); they are recorded as diverged in {recorded_in} and left out "
                     f"of {left_out_of}; {fix}")


def seed_record(task: str, config: FinetuneConfig, result: FinetuneResult, score: float,
                num_train_examples: int, **extra) -> results_schema.SeedRecord:
    """One (task, seed) row of results.json."""
    return results_schema.seed_record(
        task, config.seed, result.metrics, score, result.history, result.num_train_steps, num_train_examples,
        result.train_time_s, result.train_examples_per_s, result.train_examples_seen,
        result.train_tokens_per_s, as_dict(config),
        **({"chosen_epoch": result.chosen_epoch} if result.chosen_epoch is not None else {}), **extra)


def save_model(model: torch.nn.Module, tokenizer, directory: Path) -> None:
    """A fine-tuned checkpoint, whole or not at all (a killed run leaves the previous one)."""
    atomic.save_pretrained(directory, model, tokenizer)

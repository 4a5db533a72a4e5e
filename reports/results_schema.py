"""results.json of a fine-tuning run directory (`harness run glue|squad`): its one schema.

The harness writes it (harness/finetuning) and reports read it, so it lives here, below both; tests
build their results.json fixtures from it too. The body's keys, in the order the file holds them:

    format, model {name, path, family, recipe}, config, [settings, data: SQuAD's; search: --params-from],
    tasks, seeds, runs, flops, device, versions, precision, compile, accelerator, wall_time_s,
    diverged (when a seed diverged), summary, [GLUE: glue_score, glue, submission]

`runs` holds one `SeedRecord` per finished (task, seed), `diverged` one `DivergedRecord` per seed whose
loss went non-finite. `summary` is per task seed_summary.summarize's statistics, with intervals
(reports/intervals.py); `glue` is `glue_section`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from pretrain.infra.errors import UserError
from tasks.registry import GLUE_AVERAGE_TASKS, GLUE_CONVENTION

if TYPE_CHECKING:
    from reports.stats import Estimate

FILE = "results.json"
GLUE_FORMAT = "electra-harness/glue-results/1"
SQUAD_FORMAT = "electra-harness/squad-results/1"
RECORDS = ("runs", "diverged")  # the (task, seed) record lists, merged across invocations


class SeedRecord(TypedDict, total=False):
    """One finished (task, seed), keys in the file's order."""

    task: str
    seed: int
    metrics: dict[str, dict[str, float]]  # final dev metrics per split
    score: float  # seed_summary.task_score of metrics
    history: list[dict[str, float]]  # per epoch: train_loss and each split's metrics
    num_train_steps: int
    num_train_examples: int
    train_time_s: float
    train_examples_per_s: float
    train_examples_seen: int  # what fine-tuning FLOPs are charged for
    train_tokens_per_s: float
    double_unordered: bool  # GLUE's
    resumed: list[dict[str, int]]  # the points a stopped seed went on from, when it was
    resolved_config: dict[str, Any]  # the seed's FinetuneConfig, every setting resolved


class DivergedRecord(TypedDict):
    """A (task, seed) whose training loss went non-finite: apart from `runs`, out of every summary."""

    task: str
    seed: int
    error: str
    resolved_config: dict[str, Any]


def body(results_format: str, model: dict[str, str], config: dict[str, Any], tasks: Sequence[str], seeds: int,
         device: str, versions: dict[str, str], **extra: Any) -> dict[str, Any]:
    """A new results.json body with no run yet; `extra` blocks (settings, data, search) sit beside config."""
    return {"format": results_format, "model": model, "config": config, **extra, "tasks": list(tasks),
            "seeds": seeds, "runs": [], "flops": None, "device": device, "versions": versions}


def seed_record(task: str, seed: int, metrics: dict[str, dict[str, float]], score: float,
                history: list[dict[str, float]], num_train_steps: int, num_train_examples: int,
                train_time_s: float, train_examples_per_s: float, train_examples_seen: int,
                train_tokens_per_s: float, resolved_config: dict[str, Any], **extra: Any) -> SeedRecord:
    """One (task, seed) row of `runs`; `extra` (double_unordered, resumed) sits before resolved_config."""
    return {"task": task, "seed": seed, "metrics": metrics, "score": score, "history": history,
            "num_train_steps": num_train_steps, "num_train_examples": num_train_examples,
            "train_time_s": train_time_s, "train_examples_per_s": train_examples_per_s,
            "train_examples_seen": train_examples_seen, "train_tokens_per_s": train_tokens_per_s, **extra,
            "resolved_config": resolved_config}


def diverged_record(task: str, seed: int, error: str, resolved_config: dict[str, Any]) -> DivergedRecord:
    return {"task": task, "seed": seed, "error": error, "resolved_config": resolved_config}


def seed_records_of(results: dict, task: str) -> list[SeedRecord]:
    """The task's finished seeds' records, in the file's order."""
    return [r for r in results["runs"] if r["task"] == task]


def seeds_of(results: dict, task: str) -> list[int]:
    """The task's finished seeds, sorted."""
    return sorted(r["seed"] for r in seed_records_of(results, task))


def is_done(results: dict, task: str, seed: int) -> bool:
    """Finished, or diverged: the same seed and settings diverge again, so a resume does not retry it."""
    return any(r["task"] == task and r["seed"] == seed for r in results["runs"] + results.get("diverged", []))


def glue_section(glue_median: float, found: Estimate | None, tasks: Sequence[str]) -> dict:
    """The `glue` section: the paper-convention average of `tasks`' medians, its interval, what it covers."""
    counted = [t for t in tasks if t in GLUE_AVERAGE_TASKS]
    block = {"score": glue_median, "convention": GLUE_CONVENTION, "tasks": counted}
    if found is not None:
        block |= {"ci_low": found.low, "ci_high": found.high, "ci_covers": found.covers,
                  "interval": found.as_dict()}
    return block


def read(path: Path) -> dict | None:
    """A results.json's body, None when absent, or a UserError naming a corrupt one and the fix."""
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{str(path)!r} is not a readable results file ({type(error).__name__}: {error}); "
                        "move it away to start this run directory afresh, or pass a new --output-dir") \
            from error
    if not isinstance(found, dict) or not isinstance(found.get("runs"), list):
        raise UserError(f"{str(path)!r} is not a results file of this harness (no list of runs); move it "
                        "away to start this run directory afresh, or pass a new --output-dir")
    return found

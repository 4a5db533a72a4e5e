"""results.json of a fine-tuning run directory (`harness run`, any kind): its one schema.

The harness writes it (harness/finetuning) and reports read it, so it lives here, below both; tests
build their results.json fixtures from it too. `ResultsBody` names every key in the order the file holds
them, with its meaning and units; each block has its own type and builder below. The body stays a plain
dict (TypedDicts): an invocation adds its blocks as it goes (runs after each seed, flops and summary at
the end), and a resumed body is an earlier invocation's file, with that version's keys and order, so it
is written back as it was read. Writers serialise through `write`, readers parse through `load` (or
`read`, which names a corrupt file and the fix). Scores and metrics are fractions (0.85, not 85).

Key order: `diverged` is added where the first diverged record lands, so it sits before `wall_time_s`
when the first record an invocation writes is a diverged one; every other key is in ResultsBody's order.
The pre-training record a run's FLOPs come from is foundation/models/pretrain_meta.py's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from foundation.infra import atomic
from foundation.infra.errors import UserError
from tasks.registry import GLUE_AVERAGE_TASKS, GLUE_CONVENTION

if TYPE_CHECKING:
    from reports.stats import Estimate

FILE = "results.json"
GLUE_FORMAT = "electra-harness/glue-results/1"
SQUAD_FORMAT = "electra-harness/squad-results/1"
TEXT_FORMAT = "electra-harness/text-results/1"  # your own data (tasks/text.py)
TAGGING_FORMAT = "electra-harness/tagging-results/1"  # tagging: chunk, NER, your own tags (tasks/tagging.py)
RECORDS = ("runs", "diverged")  # the (task, seed) record lists, merged across invocations


class ModelBlock(TypedDict):
    """The checkpoint fine-tuned."""

    name: str  # --model as given: a registry name, Hub id (with @revision) or folder
    path: str  # the local folder it resolved to (what a resume must share)
    family: NotRequired[str]  # config.json's model_type (electra, bert, ...); absent in older files
    recipe: NotRequired[str]  # the fine-tuning recipe row, electra-small|base|large; absent in older files
    # where its files came from: "local folder", "Hub cache (org/name@rev)", "Hugging Face Hub (...)",
    # "package NAME VERSION (pkg:NAME/FOLDER)"; absent in older files
    source: NotRequired[str]
    license: NotRequired[str | None]  # the checkpoint's licence (registry row or card); None: not stated


class SeedRecord(TypedDict, total=False):
    """One finished (task, seed), keys in the file's order."""

    task: str
    seed: int
    metrics: dict[str, dict[str, float]]  # final dev metrics per split (each with its `score`)
    score: float  # seed_summary.task_score of metrics: the mean of the splits' scores
    history: list[dict[str, float]]  # per epoch: epoch, train_loss and each split's metrics
    num_train_steps: int  # optimiser steps
    num_train_examples: int  # training examples (SQuAD: questions) after max_train_examples
    train_time_s: float  # seconds in the training loop, evaluation included
    train_examples_per_s: float
    train_examples_seen: int  # examples stepped over, all epochs: what fine-tuning FLOPs are charged for
    train_tokens_per_s: float
    double_unordered: bool  # GLUE's: symmetric pairs trained both ways round
    resumed: list[dict[str, int]]  # the points (epoch, step) a stopped seed went on from, when it was
    chosen_epoch: int  # select_epoch=best: the epoch (from 1) whose metrics, predictions and model these are
    resolved_config: dict[str, Any]  # the seed's FinetuneConfig, every setting resolved


class DivergedRecord(TypedDict):
    """A (task, seed) whose training loss went non-finite: apart from `runs`, out of every summary."""

    task: str
    seed: int
    error: str  # the loop's reason, as printed
    resolved_config: dict[str, Any]


class Compute(TypedDict):
    """How the last invocation computed, as resolved on its device (never "auto")."""

    precision: str  # bf16 or fp32
    compile: str  # torch.compile: "on" or "off"
    accelerator: str  # the GPU's name, or "cpu"


class Flops(TypedDict):
    """What the run cost, in the paper's convention (reports/accounting.py run_flops)."""

    convention: str  # how FLOPs are counted
    model_id: str  # the discriminator's stable key: Hub id, else absolute path
    num_params: int  # encoder parameters with embedding tables, no pooler or head
    pretrain_flops: float | None  # from the pre-training record; None when unknown
    pretrain_flops_basis: str  # where pretrain_flops comes from, or "unknown: why"
    pretrain_corpus: str | None  # what it was pre-trained on, in one line; None without a record
    inference_seq_len: int  # tokens per example that inference_flops counts
    inference_flops: float  # FLOPs of one example of inference_seq_len tokens
    finetune_flops: dict[str, float]  # per task, over its seeds, padded to max_length
    finetune_flops_total: float


class MetricSummary(TypedDict, total=False):
    """One metric (or the score) over a task's finished seeds; the interval where dev outputs give one."""

    median: float  # the paper's statistic
    mean: float
    std: float  # population standard deviation
    best: float
    n: int  # seeds
    ci_low: float  # 95% interval of the seed mean (reports/intervals.py)
    ci_high: float
    ci_covers: str  # what the interval covers: dev examples, seeds, or both


# Per task: MetricSummary per label ("score", "accuracy", MNLI's "validation_matched_accuracy", ...), then
# train_examples_per_s (the seeds' mean), train_time_s (seconds, summed over seeds) and diverged_seeds.
TaskSummary = dict[str, Any]


class GlueSection(TypedDict, total=False):
    """The GLUE average in the paper's convention, its interval and what it covers (glue_section)."""

    score: float  # the average of the counted tasks' medians (= glue_score)
    convention: str
    tasks: list[str]  # the tasks it averages
    ci_low: float
    ci_high: float
    ci_covers: str
    interval: dict[str, Any]  # reports.stats.Estimate.as_dict()


class Submission(TypedDict):
    """The GLUE server zip, from each task's best-dev seed."""

    file: str | None  # glue_submission.zip, None when no test predictions were written
    files: list[str]  # server file names in it
    missing: list[str]  # server file names it lacks
    note: str | None  # why it cannot be submitted as it is, or None


class SearchOrigin(TypedDict, total=False):
    """--params-from: the search that chose the settings (harness/search/study.py origin_block)."""

    study: str
    storage: str
    task: str  # the task it searched on
    trial: int  # the best trial's number
    trials: int  # complete and pruned trials
    score: float  # the best trial's dev score, the mean over trial_seeds
    trial_seeds: list[int]
    search_seeds: list[int]  # every seed any trial trained
    note: str


class SquadData(TypedDict, total=False):
    """SQuAD's data: tasks/squad.py load_splits' info, then what the windows kept (squad_finetuning)."""

    source: str  # "files" or "hub"
    dev_file: str
    train_file: str | None  # None: dev articles held out for training (holdout)
    holdout: dict[str, Any] | None  # fraction, seed, train_articles, dev_articles
    answer_problems: int | None  # answers that disagree with their context; None: unchecked (Hub)
    num_train_examples: int
    num_dev_examples: int
    num_train_examples_used: int  # questions after max_train_examples
    num_train_windows: int
    num_dev_examples_used: int
    num_dev_windows: int
    misaligned_answers: int  # training answers off token boundaries
    answerability_head: bool


class ResultsBody(TypedDict, total=False):
    """The whole file, keys in its order (see the module docstring for `diverged`)."""

    format: str  # GLUE_FORMAT, SQUAD_FORMAT, TEXT_FORMAT or TAGGING_FORMAT
    model: ModelBlock
    config: dict[str, Any]  # the invocation's FinetuneConfig, head=auto as the head it stands for
    settings: dict[str, Any]  # SQuAD: its SquadConfig, resolved for the version; your own text with
    # long_text=windows: long_text, window_overlap (tokens) and aggregate ("mean_logits": a text's logits are
    # the mean of its windows')
    data: SquadData  # SQuAD
    class_weights: dict[str, dict[str, float]]  # with class_weights set: per task, each label's loss weight
    search: SearchOrigin  # with --params-from
    tasks: list[str]  # every invocation's tasks (GLUE: AX rides with MNLI)
    seeds: int  # seeds per task, from config's seed
    runs: list[SeedRecord]
    flops: Flops | None  # None until the run's end
    device: str  # the host CPU (platform.processor, else machine)
    versions: dict[str, str]  # torch and transformers
    precision: str  # Compute's three keys
    compile: str
    accelerator: str
    wall_time_s: float  # seconds, every invocation's own time added up (side by side ones too)
    diverged: list[DivergedRecord]  # when a seed diverged
    summary: dict[str, TaskSummary]  # per task with a finished seed
    glue_score: float  # GLUE: the paper-convention average of task medians
    glue: GlueSection
    submission: Submission


def body(results_format: str, model: ModelBlock, config: dict[str, Any], tasks: Sequence[str], seeds: int,
         device: str, versions: dict[str, str], **extra: Any) -> ResultsBody:
    """A new body with no run yet; `extra` blocks (settings, data, search) sit beside config."""
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


def task_summary(columns: dict[str, MetricSummary], train_examples_per_s: float, train_time_s: float,
                 diverged_seeds: int) -> TaskSummary:
    """A task's `summary` entry: each label's statistics, then its throughput, time and diverged seeds."""
    return {**columns, "train_examples_per_s": train_examples_per_s, "train_time_s": train_time_s,
            "diverged_seeds": diverged_seeds}


def glue_section(glue_median: float, found: Estimate | None, tasks: Sequence[str]) -> GlueSection:
    """The `glue` section: the paper-convention average of `tasks`' medians, its interval, what it covers."""
    counted = [t for t in tasks if t in GLUE_AVERAGE_TASKS]
    block: GlueSection = {"score": glue_median, "convention": GLUE_CONVENTION, "tasks": counted}
    if found is not None:
        block |= {"ci_low": found.low, "ci_high": found.high, "ci_covers": found.covers,
                  "interval": found.as_dict()}
    return block


def seed_records_of(results: ResultsBody, task: str) -> list[SeedRecord]:
    """The task's finished seeds' records, in the file's order."""
    return [r for r in results["runs"] if r["task"] == task]


def seeds_of(results: ResultsBody, task: str) -> list[int]:
    """The task's finished seeds, sorted."""
    return sorted(r["seed"] for r in seed_records_of(results, task))


def is_done(results: ResultsBody, task: str, seed: int) -> bool:
    """Finished, or diverged: the same seed and settings diverge again, so a resume does not retry it."""
    return any(r["task"] == task and r["seed"] == seed for r in results["runs"] + results.get("diverged", []))


def write(path: Path, results: ResultsBody) -> None:
    """The file, indented JSON, keys in the body's order, whole or not at all."""
    atomic.write_json(path, results)


def load(path: Path) -> ResultsBody:
    """The file's body as it is; OSError, UnicodeDecodeError or JSONDecodeError for the caller to word."""
    return json.loads(path.read_text(encoding="utf-8"))


def read(path: Path) -> ResultsBody | None:
    """A results.json's body, None when absent, or a UserError naming a corrupt one and the fix."""
    if not path.is_file():
        return None
    try:
        found = load(path)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{str(path)!r} is not a readable results file ({type(error).__name__}: {error}); "
                        "move it away to start this run directory afresh, or pass a new --output-dir") \
            from error
    if not isinstance(found, dict) or not isinstance(found.get("runs"), list):
        raise UserError(f"{str(path)!r} is not a results file of this harness (no list of runs); move it "
                        "away to start this run directory afresh, or pass a new --output-dir")
    return found

"""pretrain_meta.json, a pre-training run's record: its one schema.

`harness pretrain` writes one into every checkpoint (pretrain/prepare.py TrainingSetup.meta builds it) and
publishes the last beside discriminator/ (layout.PRETRAIN_META); `harness init` writes a short one for
an untrained control. The loop's resume reads it back (pretrain/checkpoint.py), reports read its FLOPs
and corpus (reports/accounting.py), experiments its counts. It lives with model identity because both
pre-training and reports read it, and pretrain/ may import nothing above the foundation.

The record stays a plain dict (a TypedDict): a record from an older version lacks later keys, and its
readers take it as it is. `write` serialises it (keys sorted), `read` parses it.

Model identity (CONTRIBUTING.md): imports only foundation.infra.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from foundation.infra import atomic
from foundation.infra.errors import UserError


class Parameters(TypedDict):
    """Distinct parameters (tied and shared tensors counted once)."""

    discriminator: int
    generator: int  # 0 without a generator
    total: int  # the whole pre-training model, heads included


# A budget change a run was resumed with (pretrain/checkpoint.py budget_change); `from` is a keyword.
BudgetChange = TypedDict("BudgetChange", {
    "at_step": int,  # the step the run went on from
    "from": dict[str, Any],  # the changed budgets (max_steps, max_tokens, max_time_s, max_flops) before
    "to": dict[str, Any],  # and after
    "learning_rate_before": float,  # the next step's rate under the old budgets
    "learning_rate_after": float,  # and under the new ones
})


class PretrainMeta(TypedDict, total=False):
    """The record; a mid-run checkpoint's and the published one's have every key but `seed`."""

    objective: str  # electra, mlm, ...; "none (random init)" for an untrained control
    preset: str
    embedding_sharing: str | None  # None without a generator
    generator_fraction: float | None  # the generator's width over the discriminator's; None without one
    discriminator_shape: dict[str, int]  # foundation/models/shapes.py TransformerShape's fields
    generator_shape: dict[str, int] | None
    parameters: Parameters
    steps: int  # optimiser steps taken
    tokens_seen: int  # real (non-padding) tokens in every process's batches
    train_flops: float  # paper convention (foundation/models/flops.py), summed over steps
    wall_time_s: float  # seconds of training, resumed runs included
    stage: int  # two-stage's stage (1 otherwise)
    batch_size: int  # sequences per step, all processes
    seq_len: int  # tokens per sequence
    world_size: int  # processes
    precision: str  # as used: bf16, fp16 or fp32
    attention: str  # attn_implementation as used
    device: str  # cuda or cpu
    compiled: bool  # the step ran through torch.compile
    discriminator_head_trained: bool  # False where the objective never trained the replaced-token head
    metrics: dict[str, float]  # the last log window's losses, accuracies and tokens_per_s
    config: dict[str, Any]  # the resolved PretrainConfig, every setting (pretrain/config.py)
    extended: list[BudgetChange]  # the budget changes it was resumed with, oldest first
    corpus: dict[str, Any]  # pretrain/corpus_source.py provenance: summary (one line), sources
    stopped_by: str | None  # the budget that ended the run; None in a mid-run checkpoint
    schedule_completed: float  # how far the schedule got, at most 1: below it when max_time_s cut it
    seed: int  # an untrained control's only: the seed of its weights


def untrained(seed: int) -> PretrainMeta:
    """An untrained control's record: no steps, 0 FLOPs (the leaderboard reads 0, not unknown)."""
    return {"objective": "none (random init)", "steps": 0, "train_flops": 0, "seed": seed}


def write(path: Path, meta: PretrainMeta, sort_keys: bool = True) -> None:
    """The record as indented JSON, whole or not at all; keys sorted, except an untrained control's, which
    has always been written in its own order."""
    atomic.write_json(path, meta, sort_keys=sort_keys)


def read(path: Path) -> PretrainMeta:
    """The record at `path`, or a UserError naming it when it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise UserError(f"cannot read the pre-training record {str(path)!r} ({error})") from error

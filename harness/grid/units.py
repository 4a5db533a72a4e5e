"""The grid's unit: one (model, task, seed) fine-tuning into its model's run folder.

A unit is what one `harness run KIND --model M --seeds 1 seed=S` restricted to one task does, and it
writes what that run writes: its (task, seed) record merges into the model's results.json under the lock
(harness/finetuning/results_file.py), so units run side by side, on one machine or many sharing a file
system, leave the folder a single run would. A unit is a picklable, JSON-able spec: the local pool hands it
to a child process as a file, Slurm (submitit) pickles it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

State = Literal["queued", "running", "done", "failed"]


@dataclass(frozen=True)
class Unit:
    """One fine-tuning of the grid."""

    kind: str  # harness/kinds.py's name
    model: str  # as the user named it (hub id, folder, registry name)
    task: str  # results.json's record name for the task the unit trains
    seed: int
    output_dir: Path  # the model's run folder (every unit of the model writes there)
    description: dict[str, Any] = field(default_factory=dict)  # the kind's description, restricted to task
    settings: tuple[dict[str, Any], ...] = ()  # each settings class's values (FinetuneConfig first)
    gpus: int = 0  # GPUs the unit uses; over 1: the unit runs under torchrun, one process per GPU

    @property
    def name(self) -> str:
        """How logs, the display and failures name it: MODEL/TASK/seedS."""
        return f"{Path(self.model).name}/{self.task}/seed{self.seed}"

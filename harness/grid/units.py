"""The grid's unit: one (model, task, seed) fine-tuning into its model's run folder.

A unit is what one `harness run KIND --model M --seeds 1 seed=S` restricted to one task does, and it
writes what that run writes: its (task, seed) record merges into the model's results.json under the lock
(harness/finetuning/results_file.py), so units run side by side, on one machine or many sharing a file
system, leave the folder a single run would. A unit is a picklable, JSON-able spec: the local pool hands it
to a child process as a file, Slurm (submitit) pickles it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from foundation.infra import atomic

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
    task_file_dir: Path | None = None  # a --task-file's folder: the description's relative paths start there
    search: dict[str, Any] | None = None  # --params-from: the search that chose the settings

    @property
    def name(self) -> str:
        """How logs, the display and failures name it: RUN/TASK/seedS, RUN the model's run folder's name
        (unique in a grid: two models never share a folder)."""
        return f"{self.output_dir.name}/{self.task}/seed{self.seed}"

    @property
    def file_stem(self) -> str:
        """The unit's name as one file name (its log, its spec): RUN.TASK.seedS."""
        return self.name.replace("/", ".")

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON-ready values (paths as strings)."""
        found = asdict(self)
        found["output_dir"] = str(self.output_dir)
        found["task_file_dir"] = str(self.task_file_dir) if self.task_file_dir else None
        found["settings"] = list(self.settings)
        return found

    @classmethod
    def from_json(cls, found: dict[str, Any]) -> Unit:
        """The unit a to_json() spec describes."""
        return cls(**found | {"output_dir": Path(found["output_dir"]), "settings": tuple(found["settings"]),
                              "task_file_dir": Path(found["task_file_dir"]) if found.get("task_file_dir")
                              else None})


def write_spec(unit: Unit, folder: Path) -> Path:
    """FOLDER/RUN.TASK.seedS.json, written whole: what `python -m harness.grid.unit SPEC` runs."""
    path = folder / f"{unit.file_stem}.json"
    atomic.write_json(path, unit.to_json())
    return path


def read_spec(path: Path) -> Unit:
    """The unit a spec file describes."""
    return Unit.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def code_path() -> str:
    """PYTHONPATH with the folder of the harness this driver runs first: a unit in a process of its own
    (a GPU's child, a Slurm job) runs the driver's code, not another copy installed beside it."""
    import os

    root = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))


def command(spec: Path, gpus: int) -> list[str]:
    """How a unit runs in a process of its own: `python -m harness.grid.unit SPEC.json`, under torchrun
    with one process a GPU when it takes several (rank 0 writes its record, the others train with it)."""
    wide = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}"] if gpus > 1 else []
    return [sys.executable, *wide, "-m", "harness.grid.unit", str(spec)]

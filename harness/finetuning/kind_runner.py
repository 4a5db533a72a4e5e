"""What a kind of task does for `harness run`, `eval` and `search`: one runner per kind (KIND_RUNNER in
harness/finetuning/<kind>_finetuning.py, named by harness/kinds.py), handed a `Job` the command built
from the kind's description and settings. Torch-free: the commands import it before the runner."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from tasks.config import FinetuneConfig


@dataclass(frozen=True)
class Job:
    """One command's request of a kind: its task description and settings, loaded and checked."""

    model: str
    description: Any  # the kind's task description (harness/kinds.py's Kind.description)
    settings: tuple[Any, ...]  # FinetuneConfig, then the kind's own settings (Kind.settings, in order)
    output_dir: Path = Path(".")
    seeds: int = 1
    task_file_dir: Path | None = None  # a --task-file's folder: its relative paths start there
    tracking_uri: str | None = None
    search: dict | None = None  # --params-from: the search that chose the settings (results.json `search`)
    evaluate_only: bool = False  # harness eval: score the fine-tuned checkpoint, train nothing
    leaderboard: bool = True  # False: a search's trials, which add no run to the leaderboard
    progress: bool | None = None  # bars or lines: foundation/training/console.py's progress_mode

    @property
    def config(self) -> FinetuneConfig:
        return self.settings[0]


def evaluation_settings(settings: tuple[Any, ...]) -> tuple[Any, ...]:
    """harness eval's settings: the checkpoint's head as saved (transformers' own, on the task's scale: a
    harness run writes ELECTRA's head into it), and nothing saved again."""
    return (dataclasses.replace(settings[0], head="hf", save_models=False), *settings[1:])


class Searched(NamedTuple):
    """What `harness search` tunes of a kind: the task's name, its Finetuning, and what the study records
    of the kind's own settings (from the plan), if anything."""

    task: str
    finetuning: Any  # harness/finetuning/orchestration.py's Finetuning, its invocation without outputs
    fixed: Callable[[Any], dict[str, Any]] | None = None


class KindRunner(Protocol):
    """A kind's part of the commands: it builds its invocation, runs it and summarises it."""

    def run(self, job: Job) -> dict:
        """Fine-tune (or, job.evaluate_only, score) and return results.json's body."""

    def summary(self, results: dict) -> str:
        """The table (and notes) a finished run prints."""

    def search(self, job: Job) -> Searched:
        """The one task a search tunes, or a UserError where the description names none it can."""

    def fresh_results(self, job: Job) -> tuple[dict, tuple[str, ...]]:
        """results.json's body a run of the job starts from and the keys a resume must share
        (orchestration.fresh_results): a grid's rerun holds its finished units to them. Writes nothing."""

    def check_data(self, job: Job) -> None:
        """Read and validate the described data as a run would, without a model: a caller with hours of
        other work first (an experiment's pre-training) fails in seconds on bad data, in one UserError."""

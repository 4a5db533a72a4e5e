"""One unit of a grid, run in this process: `run_unit(unit)`, or `python -m harness.grid.unit SPEC.json`
(what the local pool starts, one child process per unit; Slurm calls run_unit inside its job).

The unit is rebuilt into the Job a `harness run KIND --seeds 1 seed=S` restricted to its task would make,
with tracking off (the driver logs finished units to MLflow from results.json: no two processes or nodes
write one SQLite file) and no leaderboard row (the driver records one over every model at the end). The
kind's runner does the rest, SIGTERM included: the seed's state is saved and a rerun resumes it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from harness import kinds
from harness.grid.units import Unit, read_spec
from harness.tracking import mlflow_runs


def job_of(unit: Unit):
    """The Job (harness/finetuning/kind_runner.py) a single `harness run` of the unit would hand its kind."""
    from harness.config import from_dict
    from harness.finetuning.kind_runner import Job

    found = kinds.kind(unit.kind)
    description = from_dict(kinds.load(found.description), unit.description)
    settings = tuple(from_dict(cls, values)
                     for cls, values in zip(kinds.settings_classes(found), unit.settings, strict=True))
    settings = (dataclasses.replace(settings[0], seed=unit.seed), *settings[1:])
    return Job(model=unit.model, description=description, settings=settings, output_dir=unit.output_dir,
               seeds=1, task_file_dir=unit.task_file_dir, tracking_uri=mlflow_runs.OFF, leaderboard=False,
               search=unit.search)


def run_unit(unit: Unit) -> dict | None:
    """Fine-tune the unit's (model, task, seed) into its model's run folder; results.json's body, or None
    in a torchrun process but rank 0 (it trained in step with rank 0, which alone writes)."""
    return kinds.load(kinds.kind(unit.kind).runner).run(job_of(unit))


def main(argv: list[str] | None = None) -> int:
    """Run the unit SPEC.json describes: 0 done (on every rank under torchrun), 2 bad input or diverged (one
    line, as a single run), 128+N stopped by signal N with its state saved, 1 anything else (the traceback
    in the unit's log). Rank 0 logs when it started and ended, in UTC: when the grid's units ran."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.grid.unit SPEC.json", file=sys.stderr)
        return 2
    said = os.environ.get("RANK", "0") == "0"  # under torchrun: one line in the unit's log, not one a rank
    code = _main(Path(argv[0]), said)
    if said:
        print(f"unit ended {_now()}: exit {code}", flush=True)
    return code


def _main(spec: Path, said: bool) -> int:
    from foundation.infra.errors import UserError
    from foundation.training.stop import Stopped
    from harness.finetuning.records import diverged_error

    try:
        unit = read_spec(spec)
        if said:
            print(f"unit {unit.name}: {unit.kind} on {unit.model} into {unit.output_dir}; started {_now()}",
                  flush=True)
        body = run_unit(unit)
        diverged = [record for record in (body or {}).get("diverged", [])
                    if (record["task"], record["seed"]) == (unit.task, unit.seed)]
        if diverged:  # recorded, not retried: a single run's line and status
            raise diverged_error(diverged)
    except UserError as error:
        print(f"harness: error: {error}", file=sys.stderr)
        return 2
    except Stopped as stopped:  # the seed's state is saved: the grid's rerun resumes it
        print(f"harness: {stopped}; rerun the grid's command to resume it", file=sys.stderr)
        return stopped.exit_status
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130
    return 0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


if __name__ == "__main__":
    sys.exit(main())

"""A grid of real units through the test Slurm cluster (tests/slurm.py): `harness run glue --executor slurm`
equals single runs bit for bit (and so the local pool, tests/test_grid.py); a unit cancelled with scancel
is finished by rerunning the command; a unit given Slurm's timeout signal saves, is requeued and resumes."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests import grid_fixtures, processes
from tests.grid_fixtures import GRID_SEEDS, grid_args, records

# the grid's shared fixtures (two tiny models, GLUE's tiny files, the single runs), found by pytest here
grid_models, grid_glue, single_runs = grid_fixtures.grid_models, grid_fixtures.grid_glue, grid_fixtures.single_runs


def _array_task(state: str, index: int, timeout_s: float = 300.0) -> str:
    """The id of the grid's array task `index` once squeue shows it in `state`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = subprocess.run(["squeue", "-h", "-r", "-n", "harness-grid", "-o", "%i %T"], capture_output=True,
                                text=True).stdout.split("\n")
        found = [job for job, shown in (line.split() for line in listed if line) if job.endswith(f"_{index}")
                 and shown == state]
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"array task {index} not {state} after {timeout_s} s")


def _wait_for_unit(logs: Path, job_id: str, timeout_s: float = 120.0) -> None:
    """Until the job's log shows its unit started (its signal handlers set)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for log in logs.iterdir():
            if f"/{job_id}/" in str(log.readlink()) and log.exists() and "harness: unit " in log.read_text():
                return
        time.sleep(0.2)
    raise AssertionError(f"job {job_id}'s unit not started after {timeout_s} s")


@pytest.mark.slow
def test_a_grid_through_slurm_equals_single_runs_and_a_cancelled_unit_is_finished_by_a_rerun(
        on_slurm, grid_models, grid_glue, single_runs, tmp_path, capsys):
    # The one check of real units through Slurm: 2 models x 2 tasks x 2 seeds as one job array, two at a
    # time on 2 cores (~100 s here: each unit a fresh process importing torch). Once they run, array
    # task 6 is cancelled (the grid fails it; the rerun trains only it) and task 7 gets Slurm's timeout
    # signal (USR2, as slurmctld sends it before the time limit): it stops, is requeued and finishes.
    # (That a unit stopped mid-training resumes from its saved state: tests/test_stop.py for the run,
    # tests/test_slurm_executor.py for the requeue; these units train one step.)
    out = tmp_path / "out"
    args = grid_args(grid_models, grid_glue, out, "--executor", "slurm", "--partition", on_slurm.partition,
                     "--tracking-uri", "none")
    first = processes.start(args, tmp_path, env=processes.child_env())
    try:
        subprocess.run(["scancel", _array_task("RUNNING", 6)], check=True)
        last = _array_task("RUNNING", 7)
        # a job is RUNNING as its batch script starts; submitit's USR2 handler comes after its imports
        _wait_for_unit(out / "grid" / "logs", last)
        subprocess.run(["scancel", "--signal=USR2", last], check=True)
        code, output = processes.finish(first, timeout=400)
    finally:
        first.kill()
    assert code == 1, output
    assert "grid: 8 units (2 models x 2 tasks x 2 seeds) through the slurm executor" in output
    failed = re.findall(r"^failed: (\S+) \(log: (\S+)\)$", output, re.MULTILINE)
    assert len(failed) == 1, output
    assert "CANCELLED" in Path(failed[0][1]).read_text()
    logs = [log.read_text() for log in (out / "grid" / "logs").iterdir()]
    assert len(logs) == 8
    requeued = [log for log in logs if "Slurm's signal: stopping it with its state saved" in log]
    assert len(requeued) == 1 and "Requeued job" in requeued[0]

    code = processes.run_here(args, tmp_path)  # the same command: only the cancelled unit trains
    rerun = capsys.readouterr().out
    assert code == 0 and "grid: 7 of 8 units finished already" in rerun, rerun
    for name, single in single_runs.items():
        body = json.loads((out / name / "results.json").read_text())
        assert records(body) == records(single) and len(records(body)) == 2 * GRID_SEEDS

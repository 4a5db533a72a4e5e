"""A grid of real units through the test Slurm cluster (tests/slurm.py): a unit cancelled with scancel
mid-training saves and is resumed from its step by rerunning the command; a unit given Slurm's time-limit
signal saves, is requeued and resumes from its step; both equal unbroken single runs bit for bit (and so
the local pool's units, tests/test_grid.py)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests import grid_fixtures, processes
from tests.grid_fixtures import LONG_STEPS, long_args, same_as_unbroken, wait_for

# the grid's shared fixtures (two tiny models, GLUE's tiny files, the single runs), found by pytest here
grid_models, grid_glue, long_runs = grid_fixtures.grid_models, grid_fixtures.grid_glue, grid_fixtures.long_runs


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


# The one check of real units through Slurm (220-280 s pinned to one core shared at load 6-15: each unit
# a fresh process importing torch, then a requeue and a rerun): both models' RTE seed as one job array,
# each LONG_STEPS (320) steps.
# Mid-training array task 0 is cancelled with scancel (SIGTERM to each process of its job: the unit saves;
# the grid fails it; the rerun resumes it from its step) and task 1 is given Slurm's time-limit signal
# (USR2, sent with `scancel --signal` as slurmctld sends it 90 s before the limit: it saves, is requeued
# and resumes from its step). Both end bit-equal to unbroken single runs, weights too.
@pytest.mark.slow
def test_units_cancelled_or_timed_out_on_slurm_resume_from_their_step_and_equal_unbroken_runs(
        on_slurm, grid_models, grid_glue, long_runs, tmp_path, capsys):
    from tasks.finetune_state import seed_path

    out = tmp_path / "out"
    args = long_args(grid_models, grid_glue, out, "--executor", "slurm", "--partition", on_slurm.partition,
                     "--tracking-uri", "none")
    states = [seed_path(out / model.name, "rte", 0) for model in grid_models]
    first = processes.start(args, tmp_path, env=processes.child_env())
    try:
        # one after the other: a cluster of one core (pytest pinned to it) runs one unit at a time
        for index, command in ((0, ["scancel"]), (1, ["scancel", "--signal=USR2"])):
            job = _array_task("RUNNING", index)
            wait_for(states[index].exists, f"unit {index} training", process=first)
            subprocess.run([*command, job], check=True)
        code, output = processes.finish(first, timeout=400)
    finally:
        first.kill()
    assert code == 1, output
    assert "grid: 2 units (2 models x 1 task x 1 seed) through the slurm executor" in output
    failed = re.findall(r"^failed: (\S+) \(log: (\S+)\)$", output, re.MULTILINE)
    assert [name for name, _ in failed] == [f"{grid_models[0].name}/rte/seed0"], output
    cancelled = Path(failed[0][1]).read_text()
    assert "CANCELLED" in cancelled and cancelled.count("harness: stopped by SIGTERM at step ") == 1, cancelled
    requeued = (out / "grid" / "logs" / f"{grid_models[1].name}.rte.seed0.log").read_text()
    assert "Slurm's signal: stopping it with its state saved" in requeued and "Requeued job" in requeued
    assert requeued.count("harness: stopped by SIGTERM at step ") == 1 and "resume rte seed 0: from " in requeued

    code = processes.run_here(args, tmp_path)  # the same command: only the cancelled unit trains, resumed
    rerun = capsys.readouterr().out
    assert code == 0 and "grid: 1 of 2 units finished already" in rerun, rerun
    for model in grid_models:
        [point] = same_as_unbroken(out, long_runs, model.name)["resumed"]
        assert 0 < point["step"] < LONG_STEPS

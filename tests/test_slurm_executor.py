"""The Slurm executor (harness/grid/slurm.py) on the test cluster (tests/slurm.py), its units stood in for
by tests/slurm_fake_unit.py: one array, a log each, states from squeue, Slurm's timeout signal saving and
requeueing a unit that then resumes, scancel; and bad input refused before anything is submitted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foundation.infra.errors import UserError
from harness.grid import slurm
from harness.grid.slurm import SlurmExecutor, SlurmSettings, sbatch_parameters
from harness.grid.units import Unit
from tests.conftest import run_cli

FAKE = Path(__file__).with_name("slurm_fake_unit.py")


def _units(tmp_path: Path, *tasks: str) -> list[Unit]:
    return [Unit("glue", "tiny", task, 0, tmp_path / "tiny") for task in tasks]


def _executor(tmp_path: Path, steps: dict[str, int], fail: tuple[str, ...] = (), **settings) -> SlurmExecutor:
    """An executor whose units are fake ones: STEPS[task] steps each, their state in tmp_path/TASK.state."""
    def command(unit: Unit, folder: Path) -> list[str]:
        return [sys.executable, str(FAKE), str(tmp_path / f"{unit.task}.state"), str(steps[unit.task]),
                *(["fail"] if unit.task in fail else [])]
    return SlurmExecutor(SlurmSettings(**settings), command=command)


def _wait(handles, until, timeout_s: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = [handle.state() for handle in handles]
        if until(states):
            return states
        time.sleep(0.2)
    raise AssertionError(f"states {states} after {timeout_s} s; logs:\n" +
                         "\n".join(handle.log.read_text() for handle in handles if handle.log.exists()))


def _finished(states) -> bool:
    return all(state in ("done", "failed") for state in states)


@pytest.mark.slow
def test_units_run_as_one_array_each_with_its_log_and_a_failure_is_its_own(on_slurm, tmp_path):
    # the one check of a real Slurm array through submitit and squeue (~6 s)
    executor = _executor(tmp_path, {"rte": 2, "cola": 2, "stsb": 1}, fail=("cola",), array_parallelism=2)
    units = _units(tmp_path, "rte", "cola", "stsb")
    executor.check(units)
    handles = executor.start(units, tmp_path / "grid")
    assert len({handle.job_id.split("_")[0] for handle in handles}) == 1  # one array
    assert _wait(handles, _finished) == ["done", "failed", "done"]
    assert [handle.log.name for handle in handles] == ["tiny.rte.seed0.log", "tiny.cola.seed0.log",
                                                       "tiny.stsb.seed0.log"]
    for handle, steps in zip(handles, (2, 2, 1), strict=True):
        lines = handle.log.read_text().splitlines()
        assert [line for line in lines if line.startswith(("step", "done"))] == [
            *(f"step {step}" for step in range(steps)), "done"]
    assert "unit tiny/cola/seed0 failed (exit 1)" in handles[1].log.read_text()


@pytest.mark.slow
def test_slurms_timeout_signal_saves_the_unit_requeues_it_and_it_resumes(on_slurm, tmp_path):
    # the one check of Slurm's time-limit signal on a real cluster: USR2 (submitit's --signal=USR2@90),
    # sent with scancel as slurmctld sends it; the unit saves, `scontrol requeue` runs it again (~12 s)
    executor = _executor(tmp_path, {"rte": 20})
    (handle,) = executor.start(_units(tmp_path, "rte"), tmp_path / "grid")
    _wait([handle], lambda states: states == ["running"])
    _wait_for_line(handle.log, "step 3")
    subprocess.run(["scancel", "--signal=USR2", handle.job_id], check=True)
    assert _wait([handle], _finished) == ["done"]
    starts = [int(line) for line in (tmp_path / "rte.state.starts").read_text().split()]
    assert len(starts) == 2 and starts[0] == 0 and starts[1] >= 3  # resumed, not restarted
    log = handle.log.read_text()
    assert f"stopped at step {starts[1]}" in log and f"resume from step {starts[1]}" in log
    assert json.loads((tmp_path / "rte.state").read_text()) == {"step": 20}


@pytest.mark.slow
def test_a_unit_cancelled_mid_run_has_saved_and_a_new_start_resumes_it(on_slurm, tmp_path):
    # the one check of scancel on a real cluster: SIGTERM to the job's processes (~8 s)
    executor = _executor(tmp_path, {"rte": 12})
    (handle,) = executor.start(_units(tmp_path, "rte"), tmp_path / "grid")
    _wait_for_line(handle.log, "step 2")
    executor.cancel()
    assert _wait([handle], _finished) == ["failed"]
    saved = json.loads((tmp_path / "rte.state").read_text())["step"]
    assert 2 <= saved < 12
    (again,) = executor.start(_units(tmp_path, "rte"), tmp_path / "grid")  # what rerunning the grid does
    assert _wait([again], _finished) == ["done"]
    assert again.log.name == "tiny.rte.seed0.log" and f"resume from step {saved}" in again.log.read_text()


def _wait_for_line(log: Path, line: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and line in log.read_text().splitlines():
            return
        time.sleep(0.1)
    raise AssertionError(f"{line!r} not in {log} after {timeout_s} s")


@pytest.mark.parametrize(("settings", "message"), [
    ({"partition": "nope"}, "Slurm has no partition 'nope' (sinfo lists them); fix --partition"),
    ({"sbatch_extra": "--no-such-option=1"},
     "sbatch refused an option of --sbatch-extra (unrecognized option '--no-such-option=1'); see sbatch --help"),
])
def test_slurm_settings_it_refuses_are_one_line_and_nothing_is_submitted(on_slurm, tmp_path, settings, message):
    # the one check of sbatch --test-only against a real controller
    def jobs() -> str:
        return subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i"], capture_output=True, text=True,
                              check=True).stdout
    before = jobs()
    with pytest.raises(UserError) as refused:
        _executor(tmp_path, {"rte": 1}, **settings).check(_units(tmp_path, "rte"))
    assert str(refused.value) == message
    assert jobs() == before
    assert list(tmp_path.iterdir()) == []


def test_without_sbatch_on_path_the_grid_is_one_line_and_writes_nothing(tiny_model, glue_data, tmp_path,
                                                                       monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    args = ["run", "glue", "--model", tiny_model, "--data-dir", glue_data, "--tasks", "rte", "--output-dir",
            tmp_path / "out", "--tracking-uri", "none", "--executor", "slurm"]
    code, _, err = run_cli(args, capsys)
    assert (code, err) == (2, "harness: error: --executor slurm needs Slurm's sbatch on PATH (none found); run "
                              "the grid on a node of the cluster, or choose --executor local\n")
    assert not (tmp_path / "out").exists()


def test_settings_become_submitit_parameters_and_a_file_fills_what_flags_leave():
    settings = SlurmSettings(partition="gpu", mem_gb_per_unit=1.5,
                             sbatch_extra="--qos=high --mail-type=BEGIN,END --exclusive")
    # the array's GPUs are its units' (--gpus-per-unit, a grid setting both executors read)
    units = [Unit(kind="glue", model="m", task="rte", seed=0, output_dir=Path("out"), gpus=1)]
    assert "gpus_per_node" not in sbatch_parameters(settings)
    assert sbatch_parameters(settings, units) == {
        "time": 60, "cpus_per_task": 1, "stderr_to_stdout": True, "job_name": "harness-grid",
        "additional_parameters": {"qos": "high", "mail-type": "BEGIN,END", "exclusive": True}, "partition": "gpu", "gpus_per_node": 1,
        "mem": "1536MB"}
    with pytest.raises(ValueError, match="sbatch_extra option '-q' is not in the long form"):
        SlurmSettings(sbatch_extra="-q high")
    with pytest.raises(ValueError, match="time_limit_min must be at least 3 .got 1.: Slurm signals a unit to save"):
        SlurmSettings(time_limit_min=1)


def test_a_toml_slurm_table_fills_the_settings_and_a_flag_given_wins(tmp_path):
    config = tmp_path / "slurm.toml"
    config.write_text('[slurm]\npartition = "gpu"\ncpus_per_unit = 4\nsbatch_extra = "--qos=high"\n')
    settings = SlurmSettings.from_items([f"slurm_config={config}", "cpus_per_unit=2"])
    assert (settings.partition, settings.cpus_per_unit, settings.sbatch_extra) == ("gpu", 2, "--qos=high")
    # a flag equal to its default is given all the same: it wins (it lost to the table before)
    assert SlurmSettings.from_items([f"slurm_config={config}", "cpus_per_unit=1"]).cpus_per_unit == 1
    config.write_text('[slurm]\npartition = "gpu"\ncpu_per_unit = 4\n')
    with pytest.raises(UserError) as unknown:
        SlurmSettings.from_items([f"slurm_config={config}"])
    assert str(unknown.value).startswith(f"{config} [slurm]: unknown setting 'cpu_per_unit' (did you mean "
                                         "'cpus_per_unit'?")
    config.write_text('partition = "gpu"\n')
    with pytest.raises(UserError, match=r"has no \[slurm\] table; put the Slurm settings under \[slurm\]$"):
        SlurmSettings.from_items([f"slurm_config={config}"])


def test_a_flag_equal_to_its_default_wins_over_the_table_on_the_command_line(tmp_path):
    from harness.grid import executors

    config = tmp_path / "slurm.toml"
    config.write_text("[slurm]\ntime_limit_min = 30\n")
    _, executor = executors.load_grid({"executor": "slurm", "slurm_config": str(config), "time_limit_min": 60})
    assert executor.settings.time_limit_min == 60
    _, executor = executors.load_grid({"executor": "slurm", "slurm_config": str(config)})
    assert executor.settings.time_limit_min == 30


def _fake_squeue(folder: Path, script: str) -> str:
    """A PATH with an `squeue` that does what `script` says (a controller down or hung), then the rest."""
    import os

    (folder / "bin").mkdir()
    squeue = folder / "bin" / "squeue"
    squeue.write_text(f"#!/bin/sh\n{script}\n")
    squeue.chmod(0o755)
    scancel = folder / "bin" / "scancel"
    scancel.write_text(f"#!/bin/sh\necho \"$@\" >> {folder / 'scancelled'}\n")
    scancel.chmod(0o755)
    return f"{folder / 'bin'}:{os.environ['PATH']}"


@pytest.mark.parametrize(("script", "said"), [
    ("sleep 5", "squeue did not answer within 1 s"),
    ("echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1",
     "squeue failed (squeue: error: Unable to contact slurm controller)"),
])
def test_a_squeue_that_cannot_answer_cancels_the_array_in_one_line(tmp_path, monkeypatch, script, said):
    # a squeue failing from the start showed "queued" for ever; a time-out was a traceback, the array left
    monkeypatch.setenv("PATH", _fake_squeue(tmp_path, script))
    monkeypatch.setattr(slurm, "SQUEUE_TIMEOUT_S", 1.0)
    monkeypatch.setattr(slurm, "SQUEUE_PATIENCE_S", 0.0)
    executor = SlurmExecutor(SlurmSettings())
    executor._array = slurm.Array(["4242"])  # as start() leaves it: the array submitted
    with pytest.raises(UserError) as gave_up:
        executor.poll()
    assert str(gave_up.value) == (f"{said} for 0 s: the grid's job array 4242 is cancelled (running units "
                                  "saved their state); rerun the command once squeue answers")
    assert (tmp_path / "scancelled").read_text() == "4242\n"


def test_a_squeue_failure_keeps_the_last_answer_until_its_patience_is_spent(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _fake_squeue(tmp_path, "exit 1"))
    array = slurm.Array(["4242"])
    array.refresh()  # within the patience: no error, the state as before the first answer
    assert array.state("4242_0") == "PENDING"
    (tmp_path / "bin" / "scancel").write_text("#!/bin/sh\nexit 1\n")
    monkeypatch.setattr(slurm, "SQUEUE_PATIENCE_S", 0.0)
    monkeypatch.setattr(slurm, "POLL_S", 0.0)
    executor = SlurmExecutor(SlurmSettings())
    executor._array = array
    with pytest.raises(UserError, match=r"and scancel failed too: the grid's job array 4242 is left as it is; "
                                        r"`scancel 4242` once Slurm answers, then rerun the command$"):
        executor.poll()


def test_submitit_is_pinned_to_the_range_tested():
    # harness/grid/slurm.py reads submitit's private _make_sbatch_string and its result pickle's layout
    import tomllib
    from importlib.metadata import version

    from packaging.requirements import Requirement

    project = tomllib.loads(Path(__file__).parents[1].joinpath("pyproject.toml").read_text())["project"]
    (pin,) = [Requirement(item) for item in project["dependencies"] if item.startswith("submitit")]
    assert pin.specifier.contains(version("submitit")) and not pin.specifier.contains("1.6.0")

"""The Slurm executor: a grid's units as one job array, submitted through submitit.

Each array task runs one unit (harness/grid/slurm_job.py: its child process, stopped with its state
saved and requeued on Slurm's timeout signal). The settings are declared once (SlurmSettings), as flags
or a TOML file's [slurm] table. check() asks Slurm, with `sbatch --test-only` of the very script the
array would be, whether it takes the partition, account and extra options, so that bad input is one
line before anything is submitted. States come from squeue (one call for the whole array, at most every
POLL_S), not from submitit's sacct, which a cluster without an accounting database cannot answer; a
job squeue no longer lists is judged by the result file submitit writes when the unit returns.

Torch-free and submitit-free at import: the CLI builds its flags from SlurmSettings.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError
from foundation.infra.settings import Flag, setting
from harness.grid.units import State, Unit

POLL_S = 2.0  # squeue at most this often, however many units the driver asks about
SQUEUE_TIMEOUT_S = 60.0  # one squeue call
SQUEUE_PATIENCE_S = 300.0  # squeue failing (or never answering) this long: the grid gives up, in one line
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RESIZING", "SUSPENDED"}
RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "STOPPED"}


@dataclass(frozen=True)
class SlurmSettings:
    """What each unit's array task asks Slurm for."""

    partition: str = setting("", role="runtime", flag=Flag("--partition", "NAME"), help=(
        "the Slurm partition the units run in (default: the cluster's default partition)"))
    account: str = setting("", role="runtime", flag=Flag("--account", "NAME"), help=(
        "the Slurm account the units are charged to (default: yours)"))
    time_limit_min: int = setting(60, role="runtime", flag=Flag("--time-limit-min", "MIN"), help=(
        "each unit's time limit; a unit that reaches it saves, is requeued and resumes where it stopped"))
    max_requeues: int = setting(3, role="runtime", flag=Flag("--max-requeues", "N"), help=(
        "how often a unit that reached its time limit is requeued before it counts as failed"))
    cpus_per_unit: int = setting(1, role="runtime", flag=Flag("--cpus-per-unit", "N"), help=(
        "CPU cores each unit gets (its torch threads)"))
    mem_gb_per_unit: float = setting(0.0, role="runtime", flag=Flag("--mem-gb-per-unit", "GB"), help=(
        "memory each unit gets (0: the partition's default)"))
    array_parallelism: int = setting(0, role="runtime", flag=Flag("--array-parallelism", "N"), help=(
        "at most this many units of the array run at once (0: as many as Slurm starts)"))
    sbatch_extra: str = setting("", role="runtime", flag=Flag("--sbatch-extra", "OPTIONS"), help=(
        "extra sbatch options in their long form, split as a shell would, e.g. "
        "--sbatch-extra='--qos=high --mail-type=END'"))
    slurm_config: str = setting("", role="runtime", flag=Flag("--slurm-config", "FILE"), help=(
        "a TOML file whose [slurm] table holds these settings (keys as here); a flag given wins"))

    @classmethod
    def from_items(cls, items: list[str]) -> SlurmSettings:
        """The settings from key=value items over their slurm_config file's [slurm] table: a setting given
        wins, whatever its value (its default too)."""
        from harness.config import load_config, read_toml, shown

        given = load_config(cls, None, items)
        if not given.slurm_config:
            return given
        table = read_toml(Path(given.slurm_config)).get("slurm")
        if not isinstance(table, dict):
            raise UserError(f"{given.slurm_config} has no [slurm] table; put the Slurm settings under "
                            "[slurm]")
        from_file = [f"{key}={shown(value)}" for key, value in table.items() if key != "slurm_config"]
        try:
            load_config(cls, None, from_file)
        except UserError as error:  # name the file: the flags were fine a moment ago
            raise UserError(f"{given.slurm_config} [slurm]: {error}") from None
        return load_config(cls, None, from_file + items)

    def __post_init__(self):
        if self.time_limit_min < 3:  # the timeout signal comes 90 s ahead: a unit needs time before it
            raise ValueError(f"time_limit_min must be at least 3 (got {self.time_limit_min}): Slurm "
                             "signals a unit to save 90 s before its time limit")
        if self.cpus_per_unit < 1:
            raise ValueError(f"cpus_per_unit must be at least 1 (got {self.cpus_per_unit})")
        for name in ("max_requeues", "mem_gb_per_unit", "array_parallelism"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative (got {getattr(self, name)})")
        try:
            options = shlex.split(self.sbatch_extra)
        except ValueError as error:
            raise ValueError(f"sbatch_extra {self.sbatch_extra!r} does not split as a shell would "
                             f"({error}); quote it as one shell word") from None
        bad = [option for option in options if not option.startswith("--") or option == "--"]
        if bad:
            raise ValueError(f"sbatch_extra option {bad[0]!r} is not in the long form --name[=value]; "
                             "write e.g. --sbatch-extra='--qos=high'")


def sbatch_parameters(settings: SlurmSettings, units: list[Unit] = ()) -> dict[str, Any]:
    """submitit's SlurmExecutor parameters for these settings and units (each array task gets the GPUs of
    the widest unit, --gpus-per-unit; one log file a unit: stderr joins stdout)."""
    extra = {}
    for option in shlex.split(settings.sbatch_extra):
        name, sep, value = option[2:].partition("=")
        extra[name] = value if sep else True
    found = {"time": settings.time_limit_min, "cpus_per_task": settings.cpus_per_unit,
             "stderr_to_stdout": True, "job_name": "harness-grid", "additional_parameters": extra}
    gpus = max((unit.gpus for unit in units), default=0)
    memory = f"{int(settings.mem_gb_per_unit * 1024)}MB" if settings.mem_gb_per_unit else None
    optional = {"partition": settings.partition, "account": settings.account, "gpus_per_node": gpus,
                "mem": memory, "array_parallelism": settings.array_parallelism}
    return found | {key: value for key, value in optional.items() if value}


def unit_command(unit: Unit, folder: Path) -> list[str]:
    """The command an array task runs its unit with: harness/grid/unit.py on the unit's spec in folder,
    under torchrun when the unit takes several GPUs (as the local pool runs it)."""
    from harness.grid.units import command, write_spec

    return command(write_spec(unit, folder), unit.gpus)


class SlurmExecutor:
    """Runs a grid's units as one Slurm job array (harness/grid/executors.py's Executor)."""

    name = "slurm"
    spans_hosts = True  # the output folder's locks must reach every node (harness/grid/driver.py)

    def __init__(self, settings: SlurmSettings, command: Callable[[Unit, Path], list[str]] = unit_command):
        self.settings, self.command = settings, command
        self._array: Array | None = None

    def check(self, units: list[Unit]) -> None:
        """No sbatch, or a script Slurm would refuse (partition, account, an sbatch option): one line."""
        if shutil.which("sbatch") is None:
            raise UserError("--executor slurm needs Slurm's sbatch on PATH (none found); run the grid on a "
                            "node of the cluster, or choose --executor local")
        from submitit.slurm.slurm import _make_sbatch_string

        with tempfile.TemporaryDirectory() as folder:  # only named in the script: nothing is written there
            script = _make_sbatch_string("true", folder, map_count=max(1, len(units)),
                                         **sbatch_parameters(self.settings, units))
        done = subprocess.run(["sbatch", "--test-only"], input=script, capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0:
            raise UserError(refusal(done.stderr or done.stdout, self.settings))

    def start(self, units: list[Unit], log_dir: Path) -> list[Handle]:
        """Submit every unit as one array; each unit's log is LOG_DIR/logs/RUN.TASK.seedS.log."""
        import submitit

        from harness.grid.slurm_job import UnitJob
        from harness.grid.units import code_path

        log_dir = Path(log_dir).absolute()
        jobs = [UnitJob(self.command(unit, log_dir / "specs"), unit.name) for unit in units]
        # submitit's files (the pickled job, its result, Slurm's output) in a folder per array task
        executor = submitit.SlurmExecutor(folder=log_dir / "slurm" / "%j",
                                          max_num_timeout=self.settings.max_requeues)
        executor.update_parameters(**sbatch_parameters(self.settings, units),
                                   setup=[f"export PYTHONPATH={shlex.quote(code_path())}"])
        submitted = executor.submit_array(jobs)
        self._array = Array(sorted({job.job_id.split("_")[0] for job in submitted}))
        return [Handle(unit, _link_log(log_dir / "logs", unit, job.paths.stdout), self._array, job.job_id,
                       job.paths.result_pickle) for unit, job in zip(units, submitted, strict=True)]

    def poll(self) -> None:
        """squeue's states of the array (at most every POLL_S); a squeue that cannot answer for
        SQUEUE_PATIENCE_S cancels the array and is one line saying so (or the array's id to cancel)."""
        if self._array is None:
            return
        try:
            self._array.refresh()
        except SqueueFailed as failed:
            ids = " ".join(self._array.ids)
            if self.cancel():
                raise UserError(f"{failed} for {SQUEUE_PATIENCE_S:.0f} s: the grid's job array {ids} is "
                                "cancelled (running units saved their state); rerun the command once squeue "
                                "answers") from None
            raise UserError(f"{failed} for {SQUEUE_PATIENCE_S:.0f} s, and scancel failed too: the grid's "
                            f"job array {ids} is left as it is; `scancel {ids}` once Slurm answers, then "
                            "rerun the command") from None

    def cancel(self) -> bool:
        """scancel the array: running units get SIGTERM and save; queued ones never start. False where
        scancel failed (the controller down)."""
        if self._array is None:
            return True
        try:
            done = subprocess.run(["scancel", *self._array.ids], capture_output=True,
                                  timeout=SQUEUE_TIMEOUT_S)
        except (subprocess.TimeoutExpired, OSError):
            return False
        return done.returncode == 0


def refusal(stderr: str, settings: SlurmSettings) -> str:
    """One line for what `sbatch --test-only` refused."""
    said = next((line.strip() for line in stderr.splitlines() if line.strip()), "no reason given")
    if "invalid partition" in said.lower():
        return f"Slurm has no partition {settings.partition!r} (sinfo lists them); fix --partition"
    if "unrecognized option" in said or "invalid option" in said:
        return (f"sbatch refused an option of --sbatch-extra ({said.removeprefix('sbatch: ')}); "
                "see sbatch --help")
    return f"Slurm refused the grid's job array ({said.removeprefix('sbatch: ')}); check the Slurm settings"


def _link_log(log_dir: Path, unit: Unit, target: Path) -> Path:
    """LOG_DIR/RUN.TASK.seedS.log, a link to the file Slurm writes the unit's output to."""
    log_dir.mkdir(parents=True, exist_ok=True)
    link = log_dir / f"{unit.file_stem}.log"
    link.unlink(missing_ok=True)  # a rerun's unit logs to its new job's file
    link.symlink_to(os.path.relpath(target, log_dir))
    return link


class SqueueFailed(Exception):
    """squeue has not answered for SQUEUE_PATIENCE_S: why, as one phrase."""


class Array:
    """The squeue states of the grid's jobs, asked for once per POLL_S for all of them."""

    def __init__(self, ids: list[str]):
        self.ids, self._states, self._asked = ids, None, 0.0
        self._answered = time.monotonic()  # the last answer, or the submission

    def refresh(self) -> None:
        """Ask squeue (at most every POLL_S); a failure keeps the last answer (the controller busy), until
        squeue has not answered for SQUEUE_PATIENCE_S: then SqueueFailed."""
        if time.monotonic() - self._asked < POLL_S:
            return
        self._asked = time.monotonic()
        command = ["squeue", "-h", "-r", "-t", "all", "-o", "%i %T", "-j", ",".join(self.ids)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            why = f"squeue did not answer within {SQUEUE_TIMEOUT_S:.0f} s"
        else:
            if done.returncode == 0:
                self._states = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
                self._answered = time.monotonic()
                return
            said = next((line.strip() for line in done.stderr.splitlines() if line.strip()), "no reason")
            why = f"squeue failed ({said})"
        if time.monotonic() - self._answered >= SQUEUE_PATIENCE_S:
            raise SqueueFailed(why)

    def state(self, job_id: str) -> str | None:
        """Slurm's state of one array task (PENDING, RUNNING, COMPLETED...), None once squeue forgets it;
        PENDING until squeue first answers. Asks squeue when due; giving up is the executor's poll's."""
        with contextlib.suppress(SqueueFailed):
            self.refresh()
        return "PENDING" if self._states is None else self._states.get(job_id)


@dataclass
class Handle:
    """One unit in the array (harness/grid/executors.py's Handle)."""

    unit: Unit
    log: Path
    array: Array
    job_id: str  # ARRAY_INDEX
    result: Path  # submitit's result pickle: written when the unit's job returns or raises
    ended: State | None = None  # done or failed, once its result is read

    def state(self) -> State:
        """queued or running as squeue says; done when the job returned; failed otherwise."""
        if self.ended is not None:
            return self.ended
        slurm = self.array.state(self.job_id)
        if slurm in QUEUED:
            return "queued"
        if slurm in RUNNING:
            return "running"
        if slurm in (None, "COMPLETED") and self.result.exists():  # final: the result is read once
            self.ended = "done" if _succeeded(self.result) else "failed"
            return self.ended
        return "failed"  # cancelled, timed out, out of memory, node failure, or gone without a result


def _succeeded(result: Path) -> bool:
    import pickle

    try:
        with result.open("rb") as handle:
            return pickle.load(handle)[0] == "success"
    except (OSError, EOFError, pickle.UnpicklingError, IndexError, TypeError):
        return False

"""The local pool: the grid's units as child processes on this machine, a few at a time.

One worker per GPU, pinned to it with CUDA_VISIBLE_DEVICES (a unit of G GPUs takes G and runs under
torchrun); on a CPU machine `--workers N` units side by side, the cores split among them as threads.
Each unit is harness/grid/unit.py's main on a spec written whole under the grid's folder, in a child
process of its own with its output in its own log file: on a GPU `python -m harness.grid.unit SPEC.json`
(CUDA starts in the unit's own process), on a CPU a fork of a server that imported the kind's modules
once (multiprocessing's forkserver: a fresh interpreter paid ~10 s of imports per unit here, more than
a tiny unit trains). The children run in sessions of their own: a Ctrl-C reaches the driver alone, which
stops them with one SIGTERM each (each saves its seed's state, as a stopped run does, and the rerun
resumes it).
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from foundation.infra.errors import UserError
from harness.grid.executors import LocalSettings, cpu_count
from harness.grid.units import State, Unit, code_path, command, write_spec

STOP_GRACE_S = 60.0  # after SIGTERM a unit finishes its step and saves; then it is killed


class Started:
    """One unit of the pool: queued until a worker is free, then a child process."""

    def __init__(self, pool: LocalPool, unit: Unit, spec: Path, log: Path):
        self.pool, self.unit, self.spec, self.log = pool, unit, spec, log
        self.process: subprocess.Popen | multiprocessing.Process | None = None
        self.devices: tuple[str, ...] = ()
        self.code: int | None = None  # the exit status once ended; -1: cancelled before it started

    def state(self) -> State:
        """As of the pool's last poll (the driver polls once a round)."""
        if self.code is not None:
            return "done" if self.code == 0 else "failed"
        return "queued" if self.process is None else "running"


class LocalPool:
    """The Executor (harness/grid/executors.py) of one machine's GPUs or cores."""

    name = "local"

    def __init__(self, settings: LocalSettings):
        self.settings = settings
        self.visible = visible_gpus()
        self.devices = self._chosen_devices()
        self.workers = settings.workers or len(self.devices) or cpu_count()
        self.threads = max(1, cpu_count() // self.workers)
        self.started: list[Started] = []
        self.queued: collections.deque[Started] = collections.deque()  # in the grid's order
        self.running: list[Started] = []
        self.free: list[str] = list(self.devices)
        self.forks: multiprocessing.context.BaseContext | None = None  # the fork server, once started

    def _chosen_devices(self) -> tuple[str, ...]:
        """The GPUs (as this process sees them: indices into CUDA_VISIBLE_DEVICES) the workers use."""
        if not self.settings.devices:
            return tuple(str(index) for index in range(len(self.visible)))
        chosen = tuple(d.strip() for d in self.settings.devices.split(",") if d.strip())
        missing = [d for d in chosen if not d.isdigit() or int(d) >= len(self.visible)]
        if missing or len(set(chosen)) != len(chosen) or not chosen:
            there = (f"the GPUs visible are {', '.join(map(str, range(len(self.visible))))}"
                     if self.visible else "no GPU is visible here (run without --devices on a CPU machine)")
            raise UserError(f"--devices {self.settings.devices!r} names no GPU here "
                            f"({', '.join(missing) or 'each once'}); {there}")
        return chosen

    def check(self, units: list[Unit]) -> None:
        widest = max((unit.gpus for unit in units), default=0)
        if widest and not self.devices:
            raise UserError(f"--gpus-per-unit {widest} asks for {widest} GPU{'s' * (widest > 1)} a unit and "
                            "no GPU is visible here; leave --gpus-per-unit out to train on the CPU (a worker "
                            "a core), or --executor slurm")
        if widest > len(self.devices):
            raise UserError(f"--gpus-per-unit {widest} asks for {widest} GPUs a unit and this pool has "
                            f"{len(self.devices)}; choose at "
                            "most as many GPUs a unit as the pool has (--devices), or --executor slurm")

    def start(self, units: list[Unit], log_dir: Path) -> list[Started]:
        specs = log_dir / "specs"
        started = [Started(self, unit, write_spec(unit, specs), log_dir / "logs" / f"{unit.file_stem}.log")
                   for unit in units]
        self.started += started
        self.queued.extend(started)
        self.poll()
        return list(self.started)

    def poll(self) -> None:
        """Reap the children that ended, then start queued units while workers (and GPUs) are free: time
        linear in the running units and those started, whatever the grid's size."""
        still = []
        for item in self.running:
            code = _exit_code(item.process)
            if code is None:
                still.append(item)
            else:
                item.code = code
                self.free += item.devices
        self.running = still
        while self.queued and len(self.running) < self.workers:
            item = self.queued[0]
            needed = max(1, item.unit.gpus) if self.devices else 0
            if needed > len(self.free):
                break  # in order: a wide unit waits for its GPUs rather than be overtaken for ever
            self.queued.popleft()
            item.devices, self.free = tuple(self.free[:needed]), self.free[needed:]
            item.process = self._launch(item)
            self.running.append(item)

    def _running(self) -> list[Started]:
        return list(self.running)

    def _launch(self, item: Started) -> subprocess.Popen | multiprocessing.Process:
        item.log.parent.mkdir(parents=True, exist_ok=True)
        if not self.devices:
            return self._fork(item)
        env = dict(os.environ) | {"PYTHONPATH": code_path()}
        if self.devices:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.visible[int(d)] for d in item.devices)
        else:
            env["OMP_NUM_THREADS"] = str(self.threads)
        with open(item.log, "ab") as log:  # the child holds its own descriptor
            return subprocess.Popen(command(item.spec, len(item.devices)), env=env,
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    def _fork(self, item: Started) -> multiprocessing.Process:
        """The unit in a fork of the server, which imported the kind's runner before the first fork."""
        if self.forks is None:
            from harness import kinds

            self.forks = multiprocessing.get_context("forkserver")
            runner = kinds.kind(item.unit.kind).runner.partition(":")[0]
            self.forks.set_forkserver_preload(["harness.grid.unit", runner])
        process = self.forks.Process(target=_forked_unit, args=(str(item.spec), str(item.log), self.threads),
                                     name=item.unit.name)
        process.start()
        return process

    def cancel(self) -> None:
        """Queued units never start; running ones get SIGTERM (they save), then SIGKILL after a grace."""
        for item in self.queued:
            item.code = -1
        self.queued.clear()
        running = self._running()
        for item in running:
            _signal(item.process, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for item in running:
            item.code = _wait(item.process, max(0.0, deadline - time.monotonic()))
            if item.code is None:
                _signal(item.process, signal.SIGKILL)
                item.code = _wait(item.process, None)


def _forked_unit(spec: str, log: str, threads: int) -> None:
    """A forked unit: its own session (a Ctrl-C reaches the driver alone), its output to its log, its share
    of the cores, then what `python -m harness.grid.unit SPEC` does."""
    import torch

    from harness.grid import unit

    os.setsid()
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    for stream in (1, 2):
        os.dup2(descriptor, stream)
    os.close(descriptor)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    sys.exit(unit.main([spec]))


def _exit_code(process: subprocess.Popen | multiprocessing.Process) -> int | None:
    """The child's exit status, None while it runs."""
    if isinstance(process, subprocess.Popen):
        return process.poll()
    return process.exitcode


def _wait(process: subprocess.Popen | multiprocessing.Process, timeout: float | None) -> int | None:
    if isinstance(process, subprocess.Popen):
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    process.join(timeout)
    return process.exitcode


def _signal(process: subprocess.Popen | multiprocessing.Process, number: int) -> None:
    """SIGTERM to the unit's own process alone: under torchrun that is the agent, which forwards it to each
    worker once (signalled as a group too, each worker had it twice); SIGKILL to its whole session."""
    try:
        if number == signal.SIGKILL:
            os.killpg(process.pid, number)
        else:
            os.kill(process.pid, number)
    except ProcessLookupError:
        pass


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them to a child."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if len(listed) >= count and listed else [str(index) for index in range(count)]

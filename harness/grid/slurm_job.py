"""What a Slurm job of the grid runs: one unit, as a child process, stopped and requeued on Slurm's signal.

submitit runs `UnitJob()` inside the job (`python -m submitit.core._submit`). The unit itself runs as a
child process (`python -m harness.grid.unit SPEC`, or whatever command the executor gave), so that the
stop is the one every run has (foundation/training/stop.py): SIGTERM asks the unit's loop to save the
seed's state at its next step and end Stopped (exit 128 + 15), and the same command run again resumes
from that state. In-process, submitit's signal handler would run in the middle of a training step and
exit before any step boundary came.

The signals, in the order Slurm sends them:
- timeout ahead (submitit's `--signal=USR2@90`): USR2 reaches every process of the step. The child
  ignores it (set before it starts); this process's handler (submitit's) calls `checkpoint`, which
  sends the child SIGTERM, waits for it to save and end, and hands submitit the same job to requeue
  (`scontrol requeue`): the job starts again and the unit resumes from the saved state.
- scancel, `scontrol requeue`, preemption: SIGTERM reaches every process of the step, the child
  included, which saves and ends; this process ends with the child's status and writes no result,
  so that Slurm's requeue (or cancel) decides what follows. A USR2 after that SIGTERM (submitit's own
  preemption: SIGTERM, then USR2) forwards no second SIGTERM (the loop would ignore it: under torchrun
  each worker has Slurm's SIGTERM and the agent's forward of it, foundation/training/stop.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import submitit

STOPPED = {128 + signal.SIGTERM, 128 + signal.SIGINT, -signal.SIGTERM}  # a unit that saved and stopped
SAVE_WAIT_S = 75  # how long the checkpoint waits for the unit to save: under submitit's 90 s signal delay


def _ignore_usr2() -> None:
    """In the child before exec: Slurm's USR2 is for the job, not the unit (its default action kills)."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


class UnitJob(submitit.helpers.Checkpointable):
    """One unit of the grid, run by a Slurm job as a child process; requeued on Slurm's timeout signal."""

    def __init__(self, command: list[str], name: str):
        self.command, self.name = list(command), name
        self._child: subprocess.Popen | None = None
        self._waiter: threading.Thread | None = None
        self._terminated = False

    def __getstate__(self) -> dict[str, Any]:
        """What submitit pickles: the command, never the running child."""
        return {"command": self.command, "name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["command"], state["name"])

    def __call__(self) -> int:
        """Run the unit to its end; 0 when it finished (submitit writes the result), else the job fails."""
        signal.signal(signal.SIGTERM, self._on_sigterm)  # submitit's handler only logs it
        env = dict(os.environ)
        if "OMP_NUM_THREADS" not in env and os.environ.get("SLURM_CPUS_PER_TASK"):
            env["OMP_NUM_THREADS"] = os.environ["SLURM_CPUS_PER_TASK"]  # torch: the cores Slurm gave
        print(f"harness: unit {self.name}: {' '.join(self.command)}", flush=True)
        self._child = subprocess.Popen(self.command, env=env, preexec_fn=_ignore_usr2)
        self._waiter = threading.Thread(target=self._child.wait, daemon=True)
        self._waiter.start()
        # poll, not wait(): submitit's USR2 handler runs in this thread and waits for the child itself,
        # which a blocked Popen.wait (holding its lock) would deadlock
        self._wait_for_child()
        code = self._child.returncode
        if code == 0:
            return 0
        if code in STOPPED:  # saved; Slurm requeues or cancels the job
            print(f"harness: unit {self.name} stopped with its state saved (exit {code})", flush=True)
            sys.exit(code)
        raise RuntimeError(f"unit {self.name} failed (exit {code}); its log is above")

    def checkpoint(self) -> submitit.helpers.DelayedSubmission:
        """Slurm's timeout or preemption signal: the unit saves and stops, and the job is requeued with it."""
        if self._child is not None and self._child.poll() is None and not self._terminated:
            print(f"harness: unit {self.name}: Slurm's signal: stopping it with its state saved", flush=True)
            self._child.send_signal(signal.SIGTERM)
        self._wait_for_child(SAVE_WAIT_S)
        return submitit.helpers.DelayedSubmission(UnitJob(self.command, self.name))

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self._terminated = True  # Slurm signalled the whole step: the child has it too

    def _wait_for_child(self, timeout_s: float | None = None) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._waiter is not None and self._waiter.is_alive():
            if deadline is not None and time.monotonic() > deadline:
                return
            time.sleep(0.1)

"""Stopping a run on SIGTERM or Ctrl-C without losing its work.

A preemptible GPU or a batch scheduler sends SIGTERM; a user presses Ctrl-C (SIGINT). While `handled()`
is held (every MLflow run holds it), such a signal interrupts at once (KeyboardInterrupt) -- unless a
training loop has called `arm()`: then the first signal only asks for a stop, which the loop honours at
its next step boundary by writing a checkpoint and raising `Stopped`; the CLI prints that as one line
saying how to resume and exits 128 + the signal's number. A second Ctrl-C interrupts at once (the user
insists; the checkpoint writers are atomic, so the previous checkpoint survives); a second SIGTERM does
not: it comes from a machine, not a user -- torchrun's agent forwards the SIGTERM Slurm (or a process
group's kill) already gave each worker, so every worker of a stopped grid unit is sent it twice -- and the
loop goes on to its save.

Part of the training kit (CONTRIBUTING.md): imports nothing else of ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(KeyboardInterrupt):
    """A run stopped on a signal with its state saved; the message says where, the CLI adds how to resume.

    A KeyboardInterrupt, so that whatever ends a run on Ctrl-C (MLflow runs end KILLED) treats it alike.
    """

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """128 + the signal's number: the shell's status for a process ended by that signal."""
        return 128 + self.signum


class _State:
    depth = 0  # nesting of handled(): the outermost installs and restores the handlers
    armed = False  # a loop is running that checks requested() at each step boundary
    signum: int | None = None  # the signal that asked for a stop


_state = _State()


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGTERM and SIGINT handled here while held: at once, or at the next step of an armed loop.

    Nested blocks (an MLflow run per seed inside the invocation's) share the outermost's handlers; a
    loop armed inside a block is over when the block ends, so it disarms.
    """
    if threading.current_thread() is not threading.main_thread():  # only it receives signals
        yield
        return
    outermost = not _state.depth
    if outermost:
        previous = {number: signal.getsignal(number) for number in SIGNALS}
        for number in SIGNALS:
            signal.signal(number, _on_signal)
        _state.signum = None
    armed, _state.depth = _state.armed, _state.depth + 1
    try:
        yield
    finally:
        _state.depth -= 1
        _state.armed = armed
        if outermost:
            for number, handler in previous.items():
                signal.signal(number, handler)
            _state.signum = None


def arm() -> None:
    """Called by a loop that saves its state on a stop: from now on a signal stops at a step boundary."""
    _state.armed = bool(_state.depth)


def requested() -> int | None:
    """The signal that asked for a stop, or None."""
    return _state.signum


def raise_if_requested(where: str) -> None:
    """Stopped, saying `where` the run stopped, if a signal asked for a stop (nothing left to save)."""
    if _state.signum is not None:
        raise stopped(where)


def stopped(where: str) -> Stopped:
    """The Stopped a loop raises once its checkpoint is written; `where` names the step and checkpoint."""
    signum = _state.signum or signal.SIGTERM  # a DDP process stopped because another one was signalled
    return Stopped(f"stopped by {signal.Signals(signum).name} {where}", signum)


def ignore_in_worker(worker_id: int = 0) -> None:
    """A DataLoader worker's init: Ctrl-C reaches the whole process group, and a worker it ended would
    fail the main process's next batch; the main process stops its workers when it is done."""
    for number in SIGNALS:
        signal.signal(number, signal.SIG_IGN)


def _on_signal(signum: int, frame) -> None:
    if _state.armed and _state.signum is not None and signum == signal.SIGTERM:
        return  # a stop is under way: a repeated SIGTERM is a forward of the first (torchrun, Slurm)
    if not _state.armed or _state.signum is not None:
        raise KeyboardInterrupt  # nothing to save yet, or Ctrl-C twice: stop now
    _state.signum = signum
    # os.write, not print: a handler that prints while a progress bar writes to stderr raises
    # "reentrant call" in the buffered writer.
    os.write(2, f"harness: {signal.Signals(signum).name} received: stopping after this step with a "
                "checkpoint (Ctrl-C again to stop at once)\n".encode())

"""Child processes of the project's code, for the tests that need a real process (signals, torchrun,
parallel runs, workers): one environment for all of them, so a child runs what the test's process would.

The environment: this process's, with the checkout first on PYTHONPATH (a child's working directory is
seldom the checkout), the Hugging Face Hub offline, and one thread (the machine's two cores are shared).
`run_here` runs the same command in this process, for the runs beside them that need no process of
their own.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child_env(*first_on_path: Path, drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """os.environ for a child process: the checkout importable (after `first_on_path`), the Hub offline,
    one thread; the variables in `drop` removed, `extra` set last."""
    path = os.pathsep.join(filter(None, (*map(str, first_on_path), str(REPO), os.environ.get("PYTHONPATH"))))
    env = {key: value for key, value in os.environ.items() if key not in drop}
    return env | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                  "PYTHONPATH": path} | extra


def start(args, cwd, module: str | None = "harness.cli", env: dict[str, str] | None = None) -> subprocess.Popen:
    """`python -m MODULE ARGS` (or `python ARGS` with module=None) in `cwd`, stdout and stderr together."""
    command = [sys.executable, *(("-m", module) if module else ()), *map(str, args)]
    return subprocess.Popen(command, cwd=cwd, env=env or child_env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)


def finish(process: subprocess.Popen, earlier: str = "", timeout: float = 600) -> tuple[int, str]:
    """Wait for `process`: its exit code and everything it printed (after `earlier`, read already)."""
    output = earlier + process.communicate(timeout=timeout)[0]
    return process.returncode, output


def run_here(args, cwd) -> int:
    """`harness ARGS` in this process, as `start` would run it in a child (in `cwd`, one thread): for the
    runs beside a real process whose own process is not the point (an unbroken reference run, the
    resume of a stopped one), which so skip a child's imports (~7 s here) and its MLflow set-up. Its
    exit code; what it prints goes to pytest's capture."""
    import torch

    from harness.cli import main

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the child's OMP_NUM_THREADS=1: the same kernels, the same bits
    try:
        with contextlib.chdir(cwd):
            return main([str(a) for a in args])
    finally:
        torch.set_num_threads(threads)

"""The grid driver's own CPU time while a large grid's units run: 1,000 torch-free stand-in units through
the local pool and through Slurm (the tests' one-node cluster, tests/slurm.py).

Each stand-in unit sleeps UNIT_S seconds: through the pool a child process (`sleep`, started as the pool
starts a GPU unit: its own session, its own log), through Slurm a job of the array (submitit's job runs it
as harness/grid/slurm_job.py runs a unit's command). The driver is the grid's own follow loop
(harness/grid/driver.py's _follow: the executor's poll once a round, every unit's state, the display in
lines). Reported: the driver process's CPU time (user + system, its children excluded) over the follow's
wall time, as % of one core, and the rounds it polled. The target: under 2% of one core while units run.

    python benchmarks/grid_driver.py [--units 1000] [--unit-s 30] [--workers 250] [--executor local,slurm]
                                     [--slurm-units 1000] [--slurm-cpus 30]

HARNESS_CHECKOUT=DIR measures another checkout's driver (the pool's stand-in needs nothing new of it).
Slurm needs slurm-wlm and munge and root (tests/slurm.py); its jobs' own start (submitit's Python, ~0.3 s
of CPU each) loads the machine, not the driver, whose CPU time alone is counted. At 250 jobs at once on
one loaded core, job steps waited past the test cluster's 5 s credential (`cred_expire=5`) and failed:
hence 30 at once, with 10 s units, which keeps the array within ~10 minutes here.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("HARNESS_CHECKOUT", str(REPO)))  # another checkout's driver, to compare


def _cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def units(count: int, folder: Path) -> list:
    """`count` units of one model, as many tasks: their names, specs and logs are a real grid's."""
    from harness.grid.units import Unit

    return [Unit(kind="glue", model="stand-in", task=f"t{index:04d}", seed=0, output_dir=folder / "stand-in")
            for index in range(count)]


def follow(executor, handles) -> dict[str, float]:
    """The driver's follow loop over `handles`, the executor's polls counted (the driver's rounds; before,
    every unit's state() polled the pool: units x rounds); wall and CPU seconds."""
    from harness.grid import driver

    rounds = [0]
    polled = getattr(executor, "poll", None)
    if polled is not None:  # the driver calls it once a round (before: each state() polled the pool)
        def counted(*args):
            rounds[0] += 1
            polled(*args)
        executor.poll = counted
    wall, cpu = time.monotonic(), _cpu_s()
    with contextlib.redirect_stdout(io.StringIO()):
        failed = driver._follow(executor, handles, None)
    wall, cpu = time.monotonic() - wall, _cpu_s() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "rounds": rounds[0] or wall / driver.POLL_S, "failed": len(failed)}


def pool(count: int, unit_s: float, workers: int, folder: Path) -> dict[str, float]:
    """The local pool, each unit a `sleep` child started as the pool starts a GPU unit."""
    from harness.grid.executors import LocalSettings
    from harness.grid.local import LocalPool

    def launch(item):  # what LocalPool._launch does for a unit on a GPU, with the stand-in's command
        item.log.parent.mkdir(parents=True, exist_ok=True)
        with open(item.log, "ab") as log:
            return subprocess.Popen(["sleep", str(unit_s)], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    executor = LocalPool(LocalSettings(workers=workers))
    executor._launch = launch
    started = time.monotonic()
    handles = executor.start(units(count, folder), folder / "grid")
    found = follow(executor, handles)
    return found | {"start_s": time.monotonic() - started - found["wall_s"]}


def slurm(count: int, unit_s: float, cpus: int, folder: Path) -> dict[str, float]:
    """A job array on a fresh one-node cluster declaring `cpus` CPUs, each job the stand-in."""
    from harness.grid.slurm import SlurmExecutor, SlurmSettings
    from tests import slurm as test_slurm

    with test_slurm.cluster(cpus=cpus) as cluster:
        os.environ.update(cluster.env)
        os.environ["PATH"] = f"{os.environ['PATH']}:{test_slurm.SBIN}"
        executor = SlurmExecutor(SlurmSettings(partition=cluster.partition, time_limit_min=10),
                                 command=lambda unit, spec_folder: ["sleep", str(unit_s)])
        started = time.monotonic()
        handles = executor.start(units(count, folder), folder / "grid")
        submitted = time.monotonic() - started
        return follow(executor, handles) | {"start_s": submitted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--units", type=int, default=1000)
    parser.add_argument("--unit-s", type=float, default=30.0, help="each stand-in unit's run time")
    parser.add_argument("--workers", type=int, default=250, help="the pool's units side by side")
    parser.add_argument("--executor", default="local,slurm")
    parser.add_argument("--slurm-units", type=int, default=None, help="default: --units")
    parser.add_argument("--slurm-cpus", type=int, default=30, help="the test node's CPUs: jobs at once")
    args = parser.parse_args()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                  if line.startswith("Model name")), "?")
    print(f"CPU: {model}, {len(os.sched_getaffinity(0))} core(s) this process may use; "
          f"python {sys.version.split()[0]}")
    print("executor | units | at once | unit s | start s | follow wall s | driver CPU s | % of one core | "
          "polls | CPU ms a poll | failed")
    for name in args.executor.split(","):
        with tempfile.TemporaryDirectory(prefix="grid-driver-") as folder:
            if name == "local":
                count, at_once = args.units, args.workers
                found = pool(count, args.unit_s, args.workers, Path(folder))
            else:
                count, at_once = args.slurm_units or args.units, args.slurm_cpus
                found = slurm(count, args.unit_s, args.slurm_cpus, Path(folder))
        share = 100 * found["cpu_s"] / found["wall_s"]
        print(f"{name} | {count} | {at_once} | {args.unit_s:g} | {found['start_s']:.1f} | "
              f"{found['wall_s']:.1f} | {found['cpu_s']:.2f} | {share:.2f} | {found['rounds']:.0f} | "
              f"{1000 * found['cpu_s'] / max(1, found['rounds']):.2f} | {found['failed']}", flush=True)


if __name__ == "__main__":
    main()

"""The test Slurm cluster (tests/slurm.py) runs a job array through submitit, as the Slurm executor
submits a grid; and a cluster whose session died is ended by the next one."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests import slurm


def _square_and_where(value: int) -> tuple[int, str]:
    return value * value, os.environ["SLURM_ARRAY_TASK_ID"]


@pytest.mark.slow
def test_a_job_array_runs_on_the_cluster(on_slurm, tmp_path):
    # the one check that the cluster the Slurm executor's tests use starts and runs an array (~3 s)
    import submitit

    executor = submitit.SlurmExecutor(folder=tmp_path / "%j")
    executor.update_parameters(partition=on_slurm.partition, time=5, cpus_per_task=1, array_parallelism=2,
                               stderr_to_stdout=True)
    jobs = executor.map_array(_square_and_where, [1, 2, 3])
    assert [job.result() for job in jobs] == [(1, "0"), (4, "1"), (9, "2")]
    assert len({job.job_id.split("_")[0] for job in jobs}) == 1  # one array, three tasks
    listed = subprocess.run(["squeue", "-h", "-t", "all", "-r", "-o", "%i %T", "-j", jobs[0].job_id.split("_")[0]],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    assert sorted(line for line in listed if line) == [f"{job.job_id} COMPLETED" for job in jobs]


def test_a_cluster_left_by_a_dead_session_is_ended_and_a_live_one_kept(tmp_path):
    def session(name: str, owner: int) -> subprocess.Popen:
        """A cluster folder owned by `owner`, and a process of that cluster (SLURM_CONF names its conf)."""
        root = tmp_path / f"{slurm.PREFIX}{name}"
        root.mkdir()
        (root / "owner").write_text(str(owner))
        return subprocess.Popen(["sleep", "60"], env={**os.environ, "SLURM_CONF": str(root / "slurm.conf")})

    ended = subprocess.Popen(["true"])
    ended.wait()  # its pid is a session that is gone
    dead, live = session("dead", ended.pid), session("live", os.getpid())
    try:
        slurm.clean_leftovers(tmp_path)
        assert dead.wait(timeout=5) == -15  # SIGTERM
        assert live.poll() is None
        assert sorted(path.name for path in tmp_path.iterdir()) == [f"{slurm.PREFIX}live"]
    finally:
        for process in (dead, live):
            process.kill()
            process.wait()

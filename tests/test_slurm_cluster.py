"""The test Slurm cluster (tests/slurm.py): a cluster whose session died is ended by the next session.
(That the cluster runs a job array is tests/test_slurm_executor.py's first check.)"""

from __future__ import annotations

import os
import subprocess

from tests import slurm


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

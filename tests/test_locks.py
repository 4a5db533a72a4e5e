"""Shared disks (foundation/infra/locks.py): before a grid writes, a real second process checks that the
output folder's file lock keeps it out; where the executor spans nodes, a mount whose locks are one host's
alone (NFS nolock or local_lock, Lustre localflock) is refused; each in one line, nothing written."""

from __future__ import annotations

import fcntl

import pytest

from foundation.infra import locks
from tests.conftest import run_cli
from tests.grid_fixtures import grid_args


def test_a_working_lock_keeps_a_second_process_out_and_leaves_nothing(tmp_path):
    assert locks.second_process_excluded(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_lock_that_excludes_no_one_is_found_by_the_second_process(tmp_path, monkeypatch):
    # as on a file system that takes flock and ignores it: this process's lock is a no-op, the child's real
    monkeypatch.setattr(fcntl, "flock", lambda fd, operation: None)
    assert not locks.second_process_excluded(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_grid_on_a_folder_whose_lock_excludes_no_one_is_one_line(tiny_model, glue_data, tmp_path,
                                                                   monkeypatch, capsys):
    monkeypatch.setattr(fcntl, "flock", lambda fd, operation: None)
    code, _, err = run_cli(grid_args([tiny_model], glue_data, tmp_path / "out", "--workers", "1"), capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"harness: error: file locks in {tmp_path} keep no second process out, and the grid's "
                          "units merge results.json under one; choose an --output-dir on a file system whose")
    assert list(tmp_path.iterdir()) == [glue_data]  # nothing written


MOUNTS = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /shared rw,relatime shared:9 - nfs4 server:/export rw,vers=4.2,local_lock=none,addr=10.0.0.1
31 22 0:41 / /scratch rw,relatime shared:10 - nfs server:/scratch rw,vers=3,nolock,local_lock=all
32 22 0:42 / /lustre rw shared:11 - lustre 10.0.0.2@tcp:/fs rw,localflock
33 22 0:43 / /lustre2 rw shared:12 - lustre 10.0.0.2@tcp:/fs rw,flock
34 31 0:44 / /scratch/my\\040disk rw shared:13 - ext4 /dev/sdb1 rw
"""


@pytest.mark.parametrize("path, why", [
    ("/home/me/runs", None),  # a local disk: its own host's processes, which the second process checked
    ("/shared/runs/grid", None),  # NFSv4 locks go through the server
    ("/scratch/runs", "/scratch is nfs mounted with local_lock=all: its locks are this host's alone"),
    ("/lustre/runs", "/lustre is lustre mounted with localflock: its locks are this node's alone"),
    ("/lustre2/runs", None),
    ("/scratch/my disk/runs", None),  # the longest mount point above the path
])
def test_a_mount_whose_locks_are_one_hosts_is_named(path, why):
    assert locks.host_local_lock(path, MOUNTS) == why


def test_the_slurm_executor_refuses_a_folder_whose_locks_stay_on_one_node(tmp_path, monkeypatch):
    from foundation.infra.errors import UserError
    from harness.grid import driver
    from harness.grid.slurm import SlurmExecutor, SlurmSettings

    grid = driver.Grid(kind="glue", models=("m",), output_dirs=(tmp_path / "out",), grid_dir=tmp_path / "grid",
                       description=None, settings=(), seeds=1, retry="")
    monkeypatch.setattr(locks, "host_local_lock", lambda path: "/x is nfs mounted with nolock: its locks are "
                                                               "this host's alone")
    with pytest.raises(UserError, match=r"^--executor slurm runs units on several nodes, and /x is nfs mounted "
                                        r"with nolock: its locks are this host's alone; choose an --output-dir"):
        driver._check_locks(grid, SlurmExecutor(SlurmSettings()))

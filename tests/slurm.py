"""A throwaway one-node Slurm cluster for tests: munged, slurmctld and slurmd from a slurm.conf in a temp dir.

Everything the cluster writes (munge key and socket, state, spool, logs, pid files) lives in its own
folder under the system temp dir, and its daemons listen on free ports, so each pytest-xdist worker
runs a cluster of its own beside the others. The daemons run as root (SlurmUser=SlurmdUser=root), with
process tracking by parent pid and no task plugin: no cgroups, no accounting database (sacct answers
"accounting storage is disabled"; the Slurm executor reads squeue). Every daemon and job is started
with SLURM_CONF naming this folder's slurm.conf, which is how a later session finds and ends the
processes of a cluster whose pytest died without stopping it. `.ci/run` installs slurm-wlm and munge.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import free_port

PREFIX = "harness-slurm-"
PARTITION = "harness"
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "slurmstepd")
COMMANDS = ("sbatch", "srun", "squeue", "sinfo", "scancel", "scontrol")
SBIN = "/usr/sbin:/sbin"


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A running cluster: its folder, slurm.conf, partition and the variables Slurm's commands need."""

    root: Path
    conf: Path
    partition: str
    node: str
    cpus: int

    @property
    def env(self) -> dict[str, str]:
        """What sbatch, squeue, scancel and scontrol need to find this cluster (not /etc/slurm)."""
        return {"SLURM_CONF": str(self.conf)}


def _which(name: str) -> str | None:
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SBIN}")


def why_unavailable() -> str | None:
    """None when a cluster can be started here, else the reason (for pytest.skip)."""
    missing = [name for name in DAEMONS + COMMANDS if _which(name) is None]
    if missing:
        return (f"Slurm or munge not installed ({', '.join(missing)} not found); install the Debian packages "
                "slurm-wlm and munge (.ci/run does)")
    if os.geteuid() != 0:
        return "the test Slurm cluster runs its daemons as root (SlurmdUser=root); run the tests as root"
    return None


def _conf_text(root: Path, node: str, cpus: int, memory_mb: int) -> str:
    ctld_port, slurmd_port = free_port(), free_port()
    return "\n".join([
        f"ClusterName=h{node}",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge",
        # a job that requeues itself waits for its credential to expire (120 s by default) before it starts
        f"AuthInfo=socket={root / 'munge' / 'munge.socket'},cred_expire=5",
        f"StateSaveLocation={root / 'state'}", f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}", f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        # measured to work on this machine: no cgroups, no MPI, no mail
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none", "MailProg=/bin/true",
        "SwitchType=switch/none", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
        "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        # the node is what this file says, not what slurmd measures; back in service after a restart
        "SlurmdParameters=config_overrides", "ReturnToService=2",
        # scancel's SIGTERM is followed by SIGKILL after KillWait: time for a unit to save (default 30 s)
        "KillWait=10", "MinJobAge=600",
        # a requeued job is started by the periodic scheduler passes (60 s and 30 s by default)
        "SchedulerParameters=sched_interval=1,bf_interval=1",
        f"NodeName={node} NodeAddr=127.0.0.1 NodeHostname={socket.gethostname().split('.')[0]} "
        f"CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _memory_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        total_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:"))
    return max(1, total_kb // 1024 - 512)


def _pids_of(conf: Path) -> list[int]:
    """Processes started for the cluster of `conf`: its daemons, step daemons and jobs (by SLURM_CONF)."""
    marker = f"SLURM_CONF={conf}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def _kill_all(conf: Path, grace_s: float = 5.0) -> None:
    """SIGTERM every process of the cluster, SIGKILL what is left after grace_s."""
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        pids = _pids_of(conf)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        deadline = time.monotonic() + wait_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = _pids_of(conf)
        if not pids:
            return


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_leftovers(parent: Path | None = None) -> None:
    """End the clusters of test sessions that died without stopping theirs, and delete their folders."""
    for root in Path(parent or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            owner = int((root / "owner").read_text())
        except (OSError, ValueError):
            owner = None
        if owner is not None and _alive(owner):
            continue  # another session's (an xdist worker beside this one)
        _kill_all(root / "slurm.conf", grace_s=2.0)
        shutil.rmtree(root, ignore_errors=True)


def _start(command: list[str], env: dict[str, str], what: str) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")


def _wait_idle(cluster: Cluster, env: dict[str, str], timeout_s: float = 60.0) -> None:
    deadline, state = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        done = subprocess.run(["sinfo", "-h", "-N", "-n", cluster.node, "-o", "%T"], env=env,
                              capture_output=True, text=True, timeout=30)
        state = done.stdout.strip()
        if done.returncode == 0 and state == "idle":
            return
        time.sleep(0.2)
    logs = "\n".join(path.read_text()[-2000:] for path in sorted((cluster.root / "log").glob("*.log")))
    raise RuntimeError(f"node {cluster.node} not idle after {timeout_s:.0f} s (state {state!r}):\n{logs}")


@contextlib.contextmanager
def cluster(cpus: int | None = None) -> Iterator[Cluster]:
    """Start a one-node cluster in a fresh folder; yields it once its node is idle; stops it and deletes
    the folder after (jobs still running are ended with it). `cpus`: what the node declares (default: the
    cores this process may use), so many one-CPU jobs at once (benchmarks/grid_driver.py: more)."""
    clean_leftovers()
    root = Path(tempfile.mkdtemp(prefix=PREFIX))
    (root / "owner").write_text(str(os.getpid()))
    root.chmod(0o755)  # munged wants every folder above its socket searchable
    for name in ("munge", "state", "spool", "log"):
        (root / name).mkdir(mode=0o711)
    cpus = cpus or len(os.sched_getaffinity(0))
    suffix = re.sub(r"[^a-z0-9]", "", root.name[len(PREFIX):].lower())
    running = Cluster(root, root / "slurm.conf", PARTITION, f"node{suffix}", cpus)
    running.conf.write_text(_conf_text(root, running.node, cpus, _memory_mb()))
    env = {**os.environ, **running.env, "PATH": f"{os.environ.get('PATH', '')}:{SBIN}"}
    munge = root / "munge"
    try:
        _start([_which("mungekey"), "--create", f"--keyfile={munge / 'munge.key'}"], env, "mungekey")
        _start([_which("munged"), "--force", f"--socket={munge / 'munge.socket'}",
                f"--key-file={munge / 'munge.key'}", f"--log-file={munge / 'munged.log'}",
                f"--pid-file={munge / 'munged.pid'}", f"--seed-file={munge / 'munged.seed'}"], env, "munged")
        # absolute paths and -f: measured to be what slurmctld and slurmd need here
        _start([_which("slurmctld"), "-f", str(running.conf), "-c"], env, "slurmctld")
        _start([_which("slurmd"), "-f", str(running.conf), "-N", running.node], env, "slurmd")
        _wait_idle(running, env)
        yield running
    finally:
        _stop(running, env)
        shutil.rmtree(root, ignore_errors=True)


def _stop(running: Cluster, env: dict[str, str]) -> None:
    """Cancel what runs, shut the daemons down, then end whatever of the cluster is left."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["scancel", "--partition", running.partition], env=env, capture_output=True, timeout=10)
        subprocess.run(["scontrol", "shutdown"], env=env, capture_output=True, timeout=10)
    _kill_all(running.conf)

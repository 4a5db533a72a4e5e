"""Whether a folder's file locks do what results.json's merge needs of them: harness/finetuning/
results_file.py takes a filelock lock (flock(2) on Linux) around every merge, and a second process, or a
process on another host, must wait for the first.

Some file systems take a lock and exclude no one: FUSE mounts that do not pass locks on, NFS mounted with
`local_lock=flock|all` or `nolock` (the lock is this host's alone), Lustre mounted with `localflock`.
There two units that finish together can both read results.json, and the second write drops the first's
record. `second_process_excluded` asks a real second process; `host_local_lock` reads the mount's
options, since a lock no other node sees cannot be tested from one node.

Part of the lowest layer (CONTRIBUTING.md): imports nothing from the project.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

# the second process: 1 when the lock the first holds kept it out, 0 when it got the lock too
_TRY = ("import sys\nfrom filelock import FileLock, Timeout\n"
        "try:\n    FileLock(sys.argv[1]).acquire(timeout=0)\nexcept Timeout:\n    sys.exit(1)\nsys.exit(0)\n")


def nearest_folder(path: Path) -> Path:
    """`path`, or the nearest folder above it that exists: where a folder to be made will live."""
    path = Path(path).absolute()
    return next(p for p in (path, *path.parents) if p.is_dir())


def second_process_excluded(folder: Path) -> bool:
    """Lock a probe file in `folder` (filelock, as results.json's merge does) and let a second process try
    it: whether it was kept out. The probe is removed; nothing else is written."""
    from filelock import FileLock

    probe = Path(folder) / f".harness-lock-check-{uuid.uuid4().hex}.lock"
    try:
        with FileLock(str(probe)):
            tried = subprocess.run([sys.executable, "-I", "-c", _TRY, str(probe)], capture_output=True,
                                   timeout=60)
    finally:
        probe.unlink(missing_ok=True)
    return tried.returncode == 1


def mount_of(path: Path, mountinfo: str) -> tuple[str, str, set[str]]:
    """The mount point, file system type and options (the mount's and the super block's) of `path`, from
    /proc/self/mountinfo's text (proc(5)): the longest mount point above it."""
    best = ("/", "", set())
    target = str(Path(path).resolve())
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 10:
            continue
        point = fields[4].replace("\\040", " ")
        fstype, *_, options = line.split(" - ", 1)[1].split()
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, fstype, set(fields[5].split(",")) | set(options.split(",")))
    return best


def host_local_lock(path: Path, mountinfo: str | None = None) -> str | None:
    """Why a lock taken under `path` excludes no process on another host (its mount and the option that
    says so), or None where the file system's locks reach the other hosts (or are its own: a local disk)."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None  # not Linux: nothing to read; second_process_excluded still asks
    point, fstype, options = mount_of(path, mountinfo)
    if fstype.startswith("nfs"):
        local = sorted(options & {"nolock", "local_lock=flock", "local_lock=all"})
        if local:
            return f"{point} is {fstype} mounted with {local[0]}: its locks are this host's alone"
    if fstype == "lustre" and "localflock" in options:  # without -o flock, flock fails and filelock
        # falls back to O_EXCL marker files, which Lustre keeps coherent across its clients
        return f"{point} is lustre mounted with localflock: its locks are this node's alone"
    return None


"""The project's one atomic writer: a reader (or a resumed run) sees the old file or the new one,
never half of one. Files and directories are built beside their target, then renamed into place,
with the permissions the umask gives any new file (the temporaries start private).

A rename publishes only what is on disk: without fsync a host crash (power, kernel) can leave the
new name pointing at an empty or short file, or the rename itself undone. So a file is fsynced
before its rename, a directory's files and folders before the directory is renamed in, and the
parent folder after the rename (that makes the new name itself durable). Where the OS cannot fsync
a directory (Windows) that last step is skipped.

Part of the lowest layer (CONTRIBUTING.md): imports nothing from the project.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import shutil
import tempfile
import uuid
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def staged_file(path: Path) -> Iterator[Path]:
    """A temporary file beside `path` that replaces it only if the block completes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(descriptor)
    try:
        yield Path(temporary)
        os.chmod(temporary, 0o666 & ~current_umask())  # mkstemp made it 0600; others in the group may read
        fsync_file(Path(temporary))
        os.replace(temporary, path)
        fsync_dir(path.parent)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes) -> None:
    with staged_file(path) as temporary:
        temporary.write_bytes(data)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: Any, sort_keys: bool = False) -> None:
    """Indented JSON; numpy values and paths are converted. The text is built before anything is written."""
    write_text(path, json.dumps(data, indent=2, sort_keys=sort_keys, default=_jsonable) + "\n")


def write_zip(path: Path, files: Mapping[str, str]) -> None:
    """A zip of in-memory text files."""
    with staged_file(path) as temporary:
        with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, text in files.items():
                archive.writestr(name, text)


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield an empty temp dir beside `target`; when the block succeeds it becomes `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_dir(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp made it 0700
        fsync_tree(tmp)
        replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already where it was renamed in
        raise


# Replacing a directory. POSIX renames a directory only onto a missing or empty one, so a folder
# that exists is swapped in two renames: the old one aside to `.NAME.old-*`, the new one in. Linux's
# renameat2(RENAME_EXCHANGE) (macOS: renamex_np(RENAME_SWAP)) would swap them in one step, but it is
# Linux-only, needs a libc wrapper (glibc 2.28+, via ctypes) and is refused by some filesystems
# (older NFS, overlay mounts), so the portable path below would still be needed and would be the
# one that must be right; it is the only one. What keeps a target there:
# - the old folder is kept, under a name `recover_dir` finds, until the new one is in place; an
#   exception or signal (KeyboardInterrupt) between the two renames moves it back before it
#   propagates; a kill or host crash there leaves it aside, and the next writer, or a reader that
#   calls `recover_dir` (the pre-training resume, a bundle's load), moves it back first;
# - two writers racing for one target: each rename either lands or finds the other's folder there
#   (ENOTEMPTY/EEXIST) or its own old one gone (ENOENT); the one that finds the other's folder in
#   place keeps it and deletes its own copy, as if it had published first and been replaced at once.
#   Either way one complete folder is the target, no temporary folder is left, and nothing raises.
_OLD = ".old-"


def replace_dir(source: Path, target: Path) -> None:
    """Move `source` to `target`, replacing any directory there; the target is never missing (above)."""
    source, target = Path(source), Path(target)
    for _ in range(100):  # each round ends unless another writer moved the target this very instant
        try:
            os.rename(source, target)  # lands only where no target (or an empty one) is: the first publish
            fsync_dir(target.parent)
            return
        except OSError as error:
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        old = target.with_name(f".{target.name}{_OLD}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(target, old)
        except FileNotFoundError:  # another writer moved it aside first: try to land where it stood
            continue
        try:
            os.rename(source, target)
        except BaseException as error:
            if not (isinstance(error, OSError) and error.errno in (errno.ENOTEMPTY, errno.EEXIST)):
                with contextlib.suppress(OSError):  # failed or interrupted between the renames
                    os.rename(old, target)
                raise
            if not old.exists():  # a reader's recover_dir put the old folder back: go round again
                continue
            # another writer's folder landed in the gap: it wins, as if ours had landed just before it
            shutil.rmtree(source, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
            return
        fsync_dir(target.parent)
        shutil.rmtree(old, ignore_errors=True)
        return
    raise OSError(errno.EBUSY, f"{target} kept changing under other writers; nothing was replaced")


def recover_dir(target: Path) -> bool:
    """If `target` is missing but a replace left its old folder aside (a kill between the renames),
    move that folder back; True if it did. Old folders beside an existing target are deleted."""
    target = Path(target)
    if not target.parent.is_dir():
        return False
    kept = sorted(target.parent.glob(f".{glob.escape(target.name)}{_OLD}*"), key=_mtime, reverse=True)
    restored = False
    for old in kept:
        if not target.exists():
            try:
                os.rename(old, target)
                restored = True
                continue
            except OSError:  # another process restored or replaced it this instant
                pass
        shutil.rmtree(old, ignore_errors=True)
    if restored:
        fsync_dir(target.parent)
    return restored


def recover_all(folder: Path) -> list[str]:
    """`recover_dir` for every folder in `folder` that a replace left aside; the names put back."""
    folder = Path(folder)
    names = {entry.name[1:entry.name.rindex(_OLD)] for entry in folder.glob(f".*{_OLD}*")} \
        if folder.is_dir() else set()
    return sorted(name for name in names if recover_dir(folder / name))


def fsync_file(path: Path) -> None:
    """Flush a file's bytes to disk (what a rename is about to publish)."""
    descriptor = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)  # Windows' _commit writes
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename into it, a file created in it); a no-op where the OS
    cannot open directories (Windows)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:  # some filesystems refuse fsync on a directory (EINVAL): nothing more can be done
        pass
    finally:
        os.close(descriptor)


def fsync_tree(root: Path) -> None:
    """Every file and folder under `root`, and `root`, flushed: before the tree is renamed into place."""
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                fsync_file(path)
        fsync_dir(Path(folder))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def save_pretrained(directory: Path, *parts: Any) -> None:
    """Things with save_pretrained() (model, tokenizer) written into `directory` together, atomically."""
    with atomic_dir(directory) as staging:
        for part in parts:
            part.save_pretrained(staging)


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows (another thread may be writing)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o077)  # elsewhere: set and restore at once, the strict value in between
    os.umask(mask)
    return mask


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


@contextlib.contextmanager
def exclusive(lock_file: Path, busy: str) -> Iterator[None]:
    """Held while one command writes an output; a second, in another process, is refused at once.

    `busy` is the one-line UserError the second gets. The lock is an OS file lock (filelock), so it
    dies with its process: a killed run leaves no stale lock, only the (harmless) empty file.
    """
    from filelock import FileLock, Timeout

    from foundation.infra.errors import UserError

    Path(lock_file).parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_file))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise UserError(busy) from None
    try:
        yield
    finally:
        lock.release()

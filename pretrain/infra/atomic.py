"""The project's one atomic writer: a reader (or a resumed run) sees the old file or the new one,
never half of one. Files and directories are built beside their target, then renamed into place,
with the permissions the umask gives any new file (the temporaries start private).

Part of the lowest layer (README, "Architecture"): imports nothing from the project.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
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
        os.replace(temporary, path)
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
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp made it 0700
    replace_dir(tmp, target)


def replace_dir(source: Path, target: Path) -> None:
    """Move `source` to `target`, replacing any existing directory there."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(source, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


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

    from pretrain.infra.errors import UserError

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

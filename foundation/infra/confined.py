"""File names read from a file (a bundle's manifest, a weights index) kept inside their folder.

A name such as `../x`, `/etc/passwd` or a symlink pointing out of the folder would make a loader read,
or a checker hash, a file the folder's author never shipped. Names must be plain relative paths, and
the file they name, symlinks followed, must lie in the folder.

The lowest layer: imports nothing else of ours but errors.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

from foundation.infra.errors import UserError


def confined(directory: Path, name: object, where: str, fix: str, *,
             also_within: tuple[Path, ...] = ()) -> Path:
    """`directory / name`, or a one-line UserError if `name` reaches outside `directory`.

    `where` names the file that gave the name (e.g. "'b/manifest.json'"), `fix` what to do.
    `also_within`: other folders a symlink may resolve into (a Hub cache snapshot's blobs).
    """
    reason = _bad_name(name)
    if reason is None:
        path = Path(directory) / str(name)
        real = path.resolve()
        roots = [Path(directory).resolve(), *(Path(root).resolve() for root in also_within)]
        if not any(real.is_relative_to(root) for root in roots):
            reason = f"a symlink to {str(real)!r}"
        else:
            return path
    raise UserError(f"{where} names the file {name!r}, which lies outside its folder ({reason}); {fix}")


def _bad_name(name: object) -> str | None:
    if not isinstance(name, str) or not name:
        return "not a file name"
    if "\0" in name or "\\" in name:
        return "a name with a backslash or NUL"
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).drive or PureWindowsPath(name).root:
        return "an absolute path"
    if ".." in PurePosixPath(name).parts:
        return "a '..' in it"
    return None

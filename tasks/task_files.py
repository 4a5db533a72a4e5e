"""Reading a task's data files, for any kind that reads files: their text, decoded with one clear error."""

from __future__ import annotations

from pathlib import Path

from foundation.infra.errors import UserError


def require_file(split: str, path: Path, folder_hint: str = "") -> None:
    """Refuse a data file that is missing or a directory, in one line naming it and the fix."""
    if path.is_dir():
        raise UserError(f"{split} file {str(path)!r} is a directory; pass a data file inside it{folder_hint}")
    if not path.is_file():
        raise UserError(f"{split} file {str(path)!r} does not exist; check the path")


def decode_utf8(path: Path, data: bytes) -> str:
    """A data file's text, or one line naming the line of its first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: bytes that are not UTF-8 ({data[error.start:error.start + 4]!r}); "
                        "re-save the file as UTF-8") from None


SPLIT_FILES = {"train": "train file", "validation": "dev file"}  # the splits whose data a score depends on


def recorded_digests(data: dict | None) -> dict[str, tuple[str, str]]:
    """{"train file": ("sha256", digest), ...} of results.json's `data.files`: what a kind that reads files
    records of the data it trained and scored on (a test file's predictions change no score)."""
    files = (data or {}).get("files", {})
    return {label: ("sha256", files[split]["sha256"]) for split, label in SPLIT_FILES.items()
            if files.get(split, {}).get("sha256")}

"""Reading a task's data files, for any kind that reads files: their text, decoded with one clear error."""

from __future__ import annotations

from pathlib import Path

from foundation.infra.errors import UserError


def decode_utf8(path: Path, data: bytes) -> str:
    """A data file's text, or one line naming the line of its first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: bytes that are not UTF-8 ({data[error.start:error.start + 4]!r}); "
                        "re-save the file as UTF-8") from None

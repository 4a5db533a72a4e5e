"""What a kind of task shows in `harness run|eval|search KIND --help` beside its flags, declared as data by
the kind's description module, so that the commands build every kind's parser alike. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Fine-tuning settings only your own text reads (its adapter weighs classes and reads a text as windows);
# the other kinds refuse them in one line, and their `run --help` leaves them out (a description's `refused`)
TEXT_ONLY_SETTINGS = ("class_weights", "long_text", "window_overlap")


@dataclass(frozen=True)
class CommandText:
    """One command's help for one kind."""

    help: str  # the kind's line in `harness COMMAND --help` (run: the kind's row in harness/kinds.py says it)
    description: str
    epilog: str = ""  # examples and notes, printed as written
    # run: the heading of each settings class's list (the kind's settings classes, in order)
    settings: tuple[str, ...] = ()
    # a setting's flag as this command offers it, where it differs from the field's own: argparse options
    # (flag: another name; required; help; metavar) replacing those harness/config.py add_flags makes
    flags: dict[str, dict[str, Any]] = field(default_factory=dict)


def task_row(name: str, metrics: str, labels: str, epochs: float, note: str) -> str:
    """One line of `harness tasks`, in its columns."""
    return f"{name:8} {metrics:30} {labels:32} {epochs:<6} {note}".rstrip()

"""transformers' own load reports and progress bars, silenced while the harness loads or saves.

A pre-training checkpoint always lacks the new head (and has the RTD head fine-tuning drops), and one
bar per shard per save drowns a run's own bar: both are noise to a harness user.
Part of the lowest layer (README, "Architecture"): imports nothing else of ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_transformers(reports: bool = True) -> Iterator[None]:
    """transformers' progress bars off (and, with `reports`, its warnings) inside the block."""
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    if reports:
        logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()

"""transformers' own load reports and progress bars, and datasets' bars, silenced while we work.

A pre-training checkpoint always lacks the new head (and has the RTD head fine-tuning drops), and one
bar per shard per save (or per `map`) drowns a run's own progress: both are noise to a harness user.
Part of the training kit (CONTRIBUTING.md): imports nothing else of ours.
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


@contextlib.contextmanager
def quiet_datasets() -> Iterator[None]:
    """`datasets`' progress bars (one per map, per split) off inside the block."""
    from datasets.utils import logging

    bars = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            logging.enable_progress_bar()


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Both libraries' bars off for a whole run, whose own progress (training/console.py) covers them.

    transformers' warnings stay on: outside the loads and saves that quiet_transformers wraps they
    can matter.
    """
    with quiet_transformers(reports=False), quiet_datasets():
        yield

"""Checks that a run can write everywhere it will write, made before it trains.

Without them a read-only MLflow store failed with ~200 lines of SQLAlchemy, and a read-only HF_HOME
(where `evaluate` copies the metric modules at the first dev evaluation) only after the first epoch.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from foundation.infra.errors import UserError


def check_run_outputs(output_dir: Path, tracking_uri: str) -> None:
    """A UserError naming the first place a fine-tuning run cannot write: output dir, HF cache, store."""
    writable(Path(output_dir), "--output-dir", "pass a writable --output-dir")
    writable(modules_cache(), "the Hugging Face modules cache (HF_HOME/modules, where `evaluate` keeps the "
             "metric modules)", "set HF_HOME (or HF_MODULES_CACHE) to a writable folder")
    if tracking_uri.startswith("sqlite:///"):
        store = Path(tracking_uri.removeprefix("sqlite:///")).expanduser()
        fix = "pass --tracking-uri sqlite:///A/WRITABLE/mlflow.db (or set MLFLOW_TRACKING_URI)"
        writable(store.parent, "the MLflow store's folder", fix)
        if store.exists():
            try:
                with open(store, "r+b"):  # opened for writing, nothing written
                    pass
            except OSError as error:
                raise UserError(f"the MLflow store {str(store)!r} is not writable "
                                f"({error.strerror or error}); {fix}") from None


def modules_cache() -> Path:
    """Where `evaluate` copies local metric modules (HF_MODULES_CACHE, else HF_HOME/modules)."""
    import evaluate.config  # its own reading of the environment, made at import: the one it will use

    return Path(evaluate.config.HF_MODULES_CACHE).expanduser()


def writable(directory: Path, what: str, fix: str) -> None:
    """Create `directory` if needed and a file in it (then remove it), or a UserError saying what failed."""
    existing = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():  # "not writable (File exists)" named the wrong problem
        where = "is a file" if existing == directory else f"is under {str(existing)!r}, a file"
        raise UserError(f"{what} {str(directory)!r} {where}; {fix}") from None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        descriptor, probe = tempfile.mkstemp(dir=directory, prefix=".harness-write-check-")
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        raise UserError(f"{what} {str(directory)!r} is not writable ({error.strerror or error}); "
                        f"{fix}") from None

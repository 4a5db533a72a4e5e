"""MLflow runs that always end: FINISHED, FAILED on an exception, KILLED on Ctrl-C or SIGTERM.

Default store is a local SQLite file (embedded, no server); `--tracking-uri` or MLFLOW_TRACKING_URI
points at a server instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

DEFAULT_TRACKING_URI = "sqlite:///runs/mlflow.db"


def tracking_uri(explicit: str | None = None) -> str:
    """The URI to log to: the flag, then MLFLOW_TRACKING_URI, then the local SQLite default."""
    uri = explicit or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return uri


def setup(experiment: str, uri: str | None = None) -> None:
    """Point MLflow at the store and experiment; artefacts of a SQLite store go beside it."""
    import mlflow

    resolved = tracking_uri(uri)
    mlflow.set_tracking_uri(resolved)
    with store_lock(resolved):
        if mlflow.get_experiment_by_name(experiment) is None:
            location = None
            if resolved.startswith("sqlite:///"):
                db_dir = Path(resolved.removeprefix("sqlite:///")).parent
                location = (db_dir / "mlartifacts").resolve().as_uri()
            mlflow.create_experiment(experiment, artifact_location=location)
    mlflow.set_experiment(experiment)


def store_lock(uri: str) -> contextlib.AbstractContextManager:
    """A lock file beside a SQLite store, held while a process first opens it (a no-op for servers).

    Opening a store that does not exist yet creates and migrates its schema; two runs started together
    on a new machine raced that migration (`duplicate column name: step`) and the experiment's creation.
    """
    if not uri.startswith("sqlite:///"):
        return contextlib.nullcontext()
    from filelock import FileLock

    return FileLock(uri.removeprefix("sqlite:///") + ".lock")


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """A killed job (SIGTERM from a scheduler or `kill`) ends its runs as KILLED, like Ctrl-C."""
    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def run(name: str, params: Mapping[str, Any] = (), tags: Mapping[str, str] = (), nested: bool = False):
    """An MLflow run that ends FINISHED, FAILED or KILLED, never left RUNNING."""
    import mlflow

    with _sigterm_as_interrupt():
        active = mlflow.start_run(run_name=name, nested=nested, tags=dict(tags))
        try:
            if params:
                mlflow.log_params({k: _param(v) for k, v in params.items()})
            yield active
        except KeyboardInterrupt:
            mlflow.end_run(status="KILLED")
            raise
        except BaseException:
            mlflow.end_run(status="FAILED")
            raise
        else:
            mlflow.end_run(status="FINISHED")


def _param(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Log numeric metrics, skipping non-numbers (MLflow rejects them)."""
    import mlflow

    clean = {k.replace("@", "_"): float(v) for k, v in metrics.items() if isinstance(v, int | float)}
    if clean:
        mlflow.log_metrics(clean, step=step)

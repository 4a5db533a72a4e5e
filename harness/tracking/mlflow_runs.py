"""MLflow runs that always end: FINISHED, FAILED on an exception, KILLED on Ctrl-C or SIGTERM.

Default store is a local SQLite file (embedded, no server); `--tracking-uri` or MLFLOW_TRACKING_URI
points at a server instead, and the URI `none` turns tracking off: every function here then does
nothing and MLflow is never imported (a GPU image without it, a user with another tracker).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError
from foundation.infra.secrets import redact_uri

DEFAULT_TRACKING_URI = "sqlite:///runs/mlflow.db"
TRACKING_HELP = f"MLflow tracking URI, or none: no MLflow (default: {DEFAULT_TRACKING_URI})"
# Experiment names here, where `harness --help` can read them without the leaderboard's imports
LEADERBOARD_EXPERIMENT, REPORTS_EXPERIMENT = "leaderboard", "leaderboard-reports"
PID_TAG, HOST_TAG = "harness.pid", "harness.host"  # the process that opened a run, and where
DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")  # MLflow's SQLAlchemy stores
OFF = "none"  # the tracking URI that means no MLflow at all
# Whether the last use_experiment turned tracking off. MLflow keeps its store and active run in
# process-wide state; this is that state's twin for the `none` store, set by the same call.
_store = {"off": False}


def is_off(explicit: str | None = None) -> bool:
    """Whether the flag (or MLFLOW_TRACKING_URI) says `none`: no MLflow, nothing logged."""
    return chosen_uri(explicit).strip().lower() == OFF


def tracking_off() -> bool:
    """Whether the store chosen by the last use_experiment is `none`."""
    return _store["off"]


def import_mlflow():
    """The mlflow module, or a UserError saying how to install it or run without it."""
    try:
        import mlflow
    except ImportError as error:
        raise UserError("MLflow is not installed: `pip install mlflow`, or pass --tracking-uri none (or set "
                        "MLFLOW_TRACKING_URI=none) to run without tracking") from error
    return mlflow


def tracking_uri(explicit: str | None = None) -> str:
    """The URI to log to: the flag, then MLFLOW_TRACKING_URI, then the local SQLite default."""
    uri = chosen_uri(explicit)
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return uri


def chosen_uri(explicit: str | None = None) -> str:
    """The flag, then MLFLOW_TRACKING_URI, then the local SQLite default; nothing created."""
    return checked_uri(explicit or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI)


def checked_uri(uri: str) -> str:
    """`uri`, unless it is a database or server URL that cannot be parsed: then a UserError naming it.

    Without this a typo such as `sqlite:/runs/mlflow.db` failed as SQLAlchemy's traceback at the first
    MLflow call, after the run's output folder was made. Paths and other schemes pass to MLflow as given.
    """
    from urllib.parse import urlsplit

    from foundation.infra.errors import UserError

    scheme = uri.partition(":")[0].split("+")[0].lower() if ":" in uri else ""
    if scheme in DATABASE_SCHEMES:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(uri)
        except (ArgumentError, ValueError):  # ValueError: a port that is not a number
            url = None
        if url is not None and (scheme != "sqlite" or url.database):  # sqlite:// alone is in memory
            return uri
    elif scheme in ("http", "https"):
        if urlsplit(uri).hostname:
            return uri
    else:
        return uri
    raise UserError(f"tracking URI {redact_uri(uri)!r} is not a valid {scheme} URL; write e.g. "
                    "sqlite:///runs/mlflow.db (three slashes, then the file's path) or http://HOST:PORT "
                    "for a server")


def use_experiment(experiment: str, uri: str | None = None) -> None:
    """Point MLflow at the store and experiment; artefacts of a SQLite store go beside it. The
    store `none` turns tracking off until the next call."""
    _store["off"] = is_off(uri)
    if _store["off"]:
        return
    mlflow = import_mlflow()
    resolved = tracking_uri(uri)
    if redact_uri(resolved) != resolved:  # MLflow prints "View run ... at: URI/#/...", its password too
        os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
    check_server(resolved)
    with store_errors(resolved, f"opening experiment {experiment!r}"):
        mlflow.set_tracking_uri(resolved)
        with store_lock(resolved):
            if mlflow.get_experiment_by_name(experiment) is None:
                location = None
                if resolved.startswith("sqlite:///"):
                    db_dir = Path(resolved.removeprefix("sqlite:///")).parent
                    location = (db_dir / "mlartifacts").resolve().as_uri()
                mlflow.create_experiment(experiment, artifact_location=location)
        mlflow.set_experiment(experiment)


def check_server(uri: str) -> str:
    """`uri`; a server that does not answer /health in 5 s is a one-line UserError naming it, its
    password hidden, and what to do. MLflow itself retries for minutes, then prints the URI, password
    and all, in a traceback."""
    if not uri.startswith(("http://", "https://")):
        return uri
    import base64
    import urllib.error
    import urllib.request
    from urllib.parse import unquote, urlsplit

    shown = redact_uri(uri)
    fix = ("start it with `mlflow ui --backend-store-uri sqlite:///runs/mlflow.db --host 127.0.0.1 --port "
           "5000` or pass --tracking-uri sqlite:///runs/mlflow.db (or none: no tracking)")
    try:
        parts = urlsplit(uri)
        bare = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))
        request = urllib.request.Request(bare.geturl().rstrip("/") + "/health")
        if parts.username is not None or parts.password is not None:  # urllib takes no user-info
            login = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
            request.add_header("Authorization", "Basic " + base64.b64encode(login).decode())
    except (TypeError, ValueError) as error:  # no host, a port that is not a number
        raise UserError(f"tracking URI {shown!r} is not a valid server URL; write http://HOST:PORT") \
            from error
    try:
        with urllib.request.urlopen(request, timeout=5):
            pass
    except urllib.error.HTTPError as error:  # it answered: a proxy's or auth's refusal is MLflow's to word
        if error.code in (401, 403, 404, 405):
            return uri
        raise UserError(f"MLflow tracking server {shown} answered /health with HTTP {error.code}; {fix}") \
            from error
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or getattr(error, "code", None) or error
        raise UserError(f"MLflow tracking server {shown} is unreachable ({redact_uri(str(reason))}); "
                        f"{fix}") from error
    return uri


@contextlib.contextmanager
def store_errors(uri: str, doing: str) -> Iterator[None]:
    """MLflow, HTTP and database failures as one line naming the store (its password hidden) and what
    was being done."""
    from mlflow.exceptions import MlflowException
    from requests.exceptions import RequestException
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (MlflowException, RequestException, SQLAlchemyError, OSError) as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(f"MLflow store {redact_uri(uri)} failed while {doing} ({redact_uri(message)[:200]}); "
                        "check that it is reachable and writable, or pass --tracking-uri none") from error


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
    """A killed job (SIGTERM from a scheduler or `kill`) ends its runs as KILLED, like Ctrl-C; a loop
    inside that saves its state stops at its next step instead (foundation/training/stop.py)."""
    from foundation.training import stop

    with stop.handled():
        yield


@contextlib.contextmanager
def run(name: str, params: Mapping[str, Any] = (), tags: Mapping[str, str] = (), nested: bool = False):
    """An MLflow run that ends FINISHED, FAILED or KILLED, never left RUNNING; None with tracking off."""
    if tracking_off():
        yield None
        return
    import mlflow

    with _sigterm_as_interrupt():
        owner = {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}  # for close_orphans
        active = mlflow.start_run(run_name=name, nested=nested, tags=dict(tags) | owner)
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


def close_orphans(experiment: str, tags: Mapping[str, str]) -> int:
    """End KILLED `experiment`'s RUNNING runs tagged `tags` whose process is gone (and their
    nested runs); how many. `kill -9` leaves no chance to end a run, so the next invocation on the same
    output does it. Runs of live processes (seeds side by side) and of other hosts are left alone."""
    if tracking_off():
        return 0
    import mlflow

    client = mlflow.MlflowClient()
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return 0
    running = client.search_runs([found.experiment_id], "attributes.status = 'RUNNING'", max_results=5000)
    dead = {run.info.run_id for run in running
            if all(run.data.tags.get(key) == value for key, value in tags.items()) and _gone(run.data.tags)}
    orphans = [run for run in running
               if run.info.run_id in dead or run.data.tags.get("mlflow.parentRunId") in dead]
    for run in orphans:
        client.set_tag(run.info.run_id, "error", "its process ended without closing it (killed)")
        client.set_terminated(run.info.run_id, status="KILLED")
    return len(orphans)


def end_orphans(experiment: str, tags: Mapping[str, str], output_dir) -> None:
    """close_orphans, with a note naming what it ended."""
    closed = close_orphans(experiment, tags)
    if closed:
        print(f"note: {closed} MLflow run{'s' if closed > 1 else ''} of {output_dir} left RUNNING by a "
              "killed invocation now marked KILLED")


def _gone(tags: Mapping[str, str]) -> bool:
    """Whether the run's process has ended: on this host and no such process (a reaped one)."""
    if tags.get(HOST_TAG) != socket.gethostname() or not tags.get(PID_TAG, "").isdigit():
        return False
    pid = int(tags[PID_TAG])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # someone else's live process
        return False
    return False


def _param(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Log numeric metrics, skipping non-numbers (MLflow rejects them)."""
    if tracking_off():
        return
    import mlflow

    clean = {k.replace("@", "_"): float(v) for k, v in metrics.items() if isinstance(v, int | float)}
    if clean:
        mlflow.log_metrics(clean, step=step)


def set_tag(key: str, value: str) -> None:
    """A tag on the active run."""
    if not tracking_off():
        import mlflow

        mlflow.set_tag(key, value)

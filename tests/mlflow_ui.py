"""`mlflow ui` on loopback for the tests that need a real tracking server (the REST API, the browser view):
one way to start it, so every such test starts the same, lighter server.

One worker (`--workers 1`): mlflow's default is four uvicorn processes, each importing mlflow, which on
the two shared cores took most of a server test's set-up; a test sends one request at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.tracking import mlflow_view
from tests.conftest import free_port


@contextmanager
def mlflow_ui(store_uri: str, folder: Path) -> Iterator[str]:
    """`mlflow ui` over `store_uri` (artifacts under `folder`), healthy; its URL; stopped on leaving."""
    port = free_port()
    # no job runner: up in ~5 s in ~0.5 GiB (reports/results/library-choices.md)
    env = os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", store_uri, "--workers", "1",
         "--artifacts-destination", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port)],
        env=env, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        mlflow_view.wait_healthy(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

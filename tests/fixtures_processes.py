"""Set-up shared by the tests that start real processes: an initialised MLflow store to copy.

Creating a SQLite MLflow store (its tables and migrations) takes seconds, and a child process that
finds none creates one; the process tests copy one made once per pytest process instead, unless the
store's creation is what they check (tests/test_parallel_runs.py, runs started together).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

_TEMPLATE = "mlflow-template"


def mlflow_store_copy(tmp_path_factory: pytest.TempPathFactory, store: Path) -> str:
    """An empty, initialised MLflow store copied to `store` (made once per pytest process); its URI."""
    template = tmp_path_factory.getbasetemp() / _TEMPLATE / "mlflow.db"
    if not template.is_file():
        from tests.mlflow_store import client

        template.parent.mkdir(exist_ok=True)
        made = template.with_suffix(".making")
        client(made).search_experiments()  # creates and migrates the tables
        made.replace(template)
    store.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(template, store)
    return f"sqlite:///{store}"

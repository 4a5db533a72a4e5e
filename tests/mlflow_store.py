"""What a test's MLflow store holds, read through MlflowClient rather than SQL over MLflow's own tables."""

from __future__ import annotations

from pathlib import Path


def client(store: Path | str):
    """An MlflowClient on a SQLite file (a Path) or any tracking URI (a str)."""
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{store}" if isinstance(store, Path) else store)


def runs(store: Path | str, filter_string: str = "", experiment: str | None = None) -> list:
    """Every run (deleted ones too) matching `filter_string`, in one experiment or all of them."""
    from mlflow.entities import ViewType

    mlflow_client = client(store)
    experiments = mlflow_client.search_experiments(view_type=ViewType.ALL)
    ids = [e.experiment_id for e in experiments if experiment is None or e.name == experiment]
    found, token = [], None
    while True:
        page = mlflow_client.search_runs(ids, filter_string, run_view_type=ViewType.ALL, max_results=1000,
                                         page_token=token)
        found += page
        token = page.token
        if not token:
            return found


def statuses(store: Path | str, filter_string: str = "", experiment: str | None = None) -> dict[str, str]:
    """{run name: status} of the matching runs."""
    return {run.info.run_name: run.info.status for run in runs(store, filter_string, experiment)}

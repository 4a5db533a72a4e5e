"""The leaderboard as Markdown, CSV, HTML and a FLOPs-vs-GLUE plot, logged to MLflow."""

from __future__ import annotations

from pathlib import Path

from foundation.infra import atomic
from foundation.infra.errors import UserError
from foundation.infra.secrets import redact_uri
from harness.tracking import mlflow_leaderboard, mlflow_runs
from reports import plot, render
from reports.leaderboard import MEASURED, published_rows, rows_from_results

REPORTS_EXPERIMENT = mlflow_runs.REPORTS_EXPERIMENT
FILES = ("leaderboard.md", "leaderboard.csv", "leaderboard.html", "flops_vs_glue.png")


def write_report(runs: list[Path] | None, output: Path, tracking_uri: str | None = None) -> None:
    """The four report files in `output` from `runs` (default: the leaderboard experiment's rows).
    With tracking off, from `runs` alone, and nothing logged."""
    if mlflow_runs.is_off(tracking_uri):
        if not runs:
            raise UserError("harness report without --runs reads the MLflow leaderboard, and tracking is "
                            "off (--tracking-uri none): pass --runs RUN_DIR ... or a tracking URI")
        rows = rows_from_results(runs) + published_rows()
        write_files(rows, output)
        print(f"wrote {', '.join(str(output / name) for name in FILES)} (tracking off: nothing logged)")
        return
    chosen = mlflow_runs.chosen_uri(tracking_uri)
    store = Path(chosen.removeprefix("sqlite:///")).expanduser() if chosen.startswith("sqlite:///") else None
    if not runs and store is not None and not store.is_file():  # nothing to report: create no store for it
        raise UserError(f"nothing to report: no MLflow store at {str(store)!r} (no run was tracked there); "
                        "run `harness run glue` first, or pass --runs RUN_DIR ... (or --tracking-uri)")
    uri = mlflow_leaderboard.check_reachable(tracking_uri)
    if runs:
        rows = rows_from_results(runs) + published_rows()  # every file checked before any write
        mlflow_leaderboard.upsert(rows, uri)
    else:
        mlflow_leaderboard.upsert(published_rows(), uri)
        mlflow_leaderboard.rename_measured(uri)  # rows stored before rows were named get their names
        rows = mlflow_leaderboard.fetch(uri)
    write_files(rows, output)
    measured = sum(r.source == MEASURED for r in rows)
    run_id = _log_artifacts(output, uri, measured, len(rows) - measured)
    print(f"wrote {', '.join(str(output / name) for name in FILES)}")
    print(f"{measured} measured and {len(rows) - measured} published rows; artefacts in MLflow experiment "
          f"{REPORTS_EXPERIMENT!r}, run {run_id} ({redact_uri(uri)})")
    if not measured:
        print("no measured rows yet: run `harness run glue`, or pass --runs RUN_DIR")
    print(f"browse the leaderboard: {mlflow_leaderboard.browse_hint(uri)}")


def write_files(rows: list, output: Path) -> None:
    """The four files of `rows` in `output`."""
    # Render everything in memory first: a failure leaves the previous report untouched.
    png = plot.flops_vs_glue_png(rows)
    texts = {FILES[0]: render.markdown(rows), FILES[1]: render.to_csv(rows),
             FILES[2]: render.to_html(rows, png)}
    for name, text in texts.items():
        atomic.write_text(output / name, text)
    atomic.write_bytes(output / FILES[3], png)


def _log_artifacts(directory: Path, uri: str, measured: int, published: int) -> str:
    import mlflow

    with mlflow_leaderboard.tracking_errors(uri, f"logging the report files of {directory} as artefacts"):
        mlflow_runs.use_experiment(REPORTS_EXPERIMENT, uri)
        tags = {"measured_rows": str(measured), "published_rows": str(published)}
        with mlflow_runs.run("report", tags=tags) as active:
            for name in FILES:
                mlflow.log_artifact(str(directory / name))
        return active.info.run_id

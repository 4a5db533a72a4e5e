"""Screenshot the `leaderboard` experiment as a newcomer first sees it in the MLflow UI.

Fills a temporary SQLite store with the published rows and measured ones (a full-recipe run, a quick
run off the recipe, and with `--every-kind` a classification, a regression, a multi-label and a tagging
run on your own data and an evaluated checkpoint), starts `mlflow ui` on loopback, and has headless
Chromium save a PNG of the runs table.

    python scripts/leaderboard_screenshot.py runs/leaderboard.png [--view default|saved]

`--view saved` (the default) opens the link the harness prints, the saved view "Leaderboard";
`default` opens the runs table without it, as a browser that never chose columns shows it;
`experiment` opens `#/experiments/<id>`, where clicking the experiment's name leads.

    python scripts/leaderboard_screenshot.py leaderboard-html.png --html RUN_DIR ...

screenshots instead the leaderboard.html that `harness report --runs RUN_DIR ...` writes (tracking off), e.g.
over a run of each kind (reports/results/leaderboard-every-kind.png).
Needs chromium (or $CHROMIUM) and mlflow; nothing is left running or written besides the PNG.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.tracking import leaderboard_report, mlflow_leaderboard, mlflow_view  # noqa: E402
from reports import results_schema  # noqa: E402
from reports.leaderboard import published_rows, rows_from_results  # noqa: E402

WINDOW = "1600,900"


def stats(median: float) -> results_schema.MetricSummary:
    return results_schema.MetricSummary(median=median, mean=median, std=0.0, best=median, n=3)


def write_results(directory: Path, name: str, config: dict, tasks: dict[str, float], costs: dict) -> Path:
    """A results.json as `harness run glue` writes it, reduced to what the leaderboard reads."""
    directory.mkdir(parents=True)
    metric = {"cola": "mcc", "stsb": "spearman"}
    summary = {task: {"score": stats(score), metric.get(task, "accuracy"): stats(score)}
               for task, score in tasks.items()}
    body = results_schema.ResultsBody(format=results_schema.GLUE_FORMAT,
                                      model=results_schema.ModelBlock(name=name, path=str(directory)),
                                      config=config, tasks=list(tasks), runs=[], summary=summary, flops=costs)
    results_schema.write(directory / results_schema.FILE, body)
    return directory


def write_own(directory: Path, name: str, problem: str, scores: dict[str, float], costs: dict) -> Path:
    """A results.json of your own data (`harness run text|tagging`), reduced to what the leaderboard reads."""
    kind = "tagging" if problem == "tagging" else "text"
    summary = {name: {metric: stats(value) for metric, value in scores.items()}}
    body = results_schema.ResultsBody(format=f"electra-harness/{kind}-results/1",
                                      model=results_schema.ModelBlock(name="electra-small"), config={},
                                      tasks=[name], runs=[], flops=costs, summary=summary)
    task = {"name": name, "kind": problem, "metrics": list(scores), "headline": next(iter(scores))}
    body["data"] = {"task": task, "files": {"train": {"sha256": hashlib.sha256(name.encode()).hexdigest()}}}
    directory.mkdir(parents=True)
    results_schema.write(directory / results_schema.FILE, body)
    return directory


def every_kind(work: Path, costs: dict) -> list[Path]:
    """A run of each kind of your own data, and an evaluated checkpoint."""
    evaluated = write_results(work / "eval", "org/electra-small-rte", {}, {"rte": 0.66}, {})
    body = results_schema.load(evaluated / results_schema.FILE)
    results_schema.write(evaluated / results_schema.FILE, body | {"evaluated": True})
    own = [("intents", "classification", {"accuracy": 0.912, "macro_f1": 0.9}),
           ("rating", "regression", {"spearman": 0.71, "pearson": 0.69}),
           ("topics", "multilabel", {"micro_f1": 0.64, "macro_f1": 0.52}),
           ("phrases", "tagging", {"f1": 0.83, "precision": 0.82})]
    written = [write_own(work / name, name, problem, scores, costs) for name, problem, scores in own]
    return [*written, evaluated]


def fill(store: Path, work: Path, kinds: bool = False) -> str:
    """The leaderboard rows in a SQLite store (with `kinds`, a run of every kind); returns the experiment
    id."""
    costs = {"model_id": "runs/pretrain/electra-small", "num_params": 13548800, "pretrain_flops": 1.294e18,
             "inference_flops": 3.677e9, "pretrain_flops_basis": "pretrain_meta.json"}
    full = write_results(work / "full", "runs/pretrain/electra-small", {},
                         {"cola": 0.552, "sst2": 0.891, "mrpc": 0.838, "stsb": 0.861, "qqp": 0.873,
                          "mnli": 0.795, "qnli": 0.872, "rte": 0.632}, costs)
    quick = write_results(work / "quick", "runs/pretrain/electra-small",
                          {"max_train_examples": 100, "num_epochs": 1}, {"rte": 0.473}, costs)
    uri = f"sqlite:///{store}"
    runs = [full, quick, *(every_kind(work, costs) if kinds else [])]
    mlflow_leaderboard.upsert(rows_from_results(runs) + published_rows(), uri)
    from mlflow import MlflowClient

    return MlflowClient(uri).get_experiment_by_name(mlflow_leaderboard.EXPERIMENT).experiment_id


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(store: Path, work: Path, port: int) -> subprocess.Popen:
    """`mlflow ui` without its job runner (up in ~5 s in ~0.5 GiB: reports/results/library-choices.md)."""
    env = os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.Popen(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", f"sqlite:///{store}",
         "--artifacts-destination", str(work / "artifacts"), "--host", "127.0.0.1", "--port", str(port)],
        env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def screenshot(chromium: str, url: str, png: Path, profile: Path, budget_ms: int,
               window: str = WINDOW) -> None:
    """Headless Chromium; the UI is a JS app, so virtual time lets it fetch and render first."""
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--window-size={window}", f"--virtual-time-budget={budget_ms}",
               f"--screenshot={png}", url]
    subprocess.run(command, check=True, timeout=180, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("png", type=Path, help="where the screenshot goes")
    parser.add_argument("--view", choices=("saved", "default", "experiment"), default="saved")
    parser.add_argument("--budget-ms", type=int, default=20000, help="virtual time for the page to render")
    parser.add_argument("--html", nargs="+", type=Path, metavar="RUN_DIR",
                        help="screenshot leaderboard.html of these runs (harness report --runs), not MLflow")
    parser.add_argument("--every-kind", action="store_true",
                        help="add a run of each kind of your own data and an evaluated checkpoint")
    parser.add_argument("--window", default=WINDOW,
                        help="the browser window, WIDTH,HEIGHT (default: %(default)s)")
    args = parser.parse_args(argv)
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium not found: install it (apt-get install chromium) or set $CHROMIUM")
    if args.html:
        return html_page(chromium, args)
    with tempfile.TemporaryDirectory(prefix="leaderboard-screenshot-") as folder:
        work = Path(folder)
        experiment_id = fill(work / "mlflow.db", work, args.every_kind)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        process = serve(work / "mlflow.db", work, port)
        try:
            try:
                mlflow_view.wait_healthy(url, process)
            except RuntimeError as error:
                raise SystemExit(str(error)) from None
            page = mlflow_view.runs_url(url, experiment_id)
            if args.view == "default":
                page = page.partition("?")[0]
            elif args.view == "experiment":  # what clicking the experiment's name opens
                page = page.partition("/runs")[0]
            args.png.parent.mkdir(parents=True, exist_ok=True)
            screenshot(chromium, page, args.png.resolve(), work / "profile", args.budget_ms, args.window)
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"wrote {args.png} ({page.replace(url, 'http://127.0.0.1:PORT')})")
    return 0


def html_page(chromium: str, args: argparse.Namespace) -> int:
    """The report's leaderboard.html of the given runs, as a browser shows it."""
    with tempfile.TemporaryDirectory(prefix="leaderboard-screenshot-") as folder:
        work = Path(folder)
        leaderboard_report.write_report(args.html, work / "report", "none")
        args.png.parent.mkdir(parents=True, exist_ok=True)
        page = (work / "report" / "leaderboard.html").as_uri()
        screenshot(chromium, page, args.png.resolve(), work / "profile", args.budget_ms, args.window)
    print(f"wrote {args.png} (leaderboard.html of {len(args.html)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

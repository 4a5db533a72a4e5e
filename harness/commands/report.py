"""`harness report`: the leaderboard as Markdown, CSV, HTML and a FLOPs-vs-GLUE plot, logged to MLflow."""

from __future__ import annotations

import argparse
from pathlib import Path

# Not harness.tracking.mlflow_leaderboard: building the CLI must not import scipy and the rest
# (harness predict)
from harness.tracking.mlflow_runs import LEADERBOARD_EXPERIMENT, REPORTS_EXPERIMENT, TRACKING_HELP


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "report", help="leaderboard tables and FLOPs-vs-GLUE plot",
        description="Write the leaderboard (measured and published rows apart) as Markdown, CSV and a "
                    "self-contained HTML page, plus a plot of GLUE score against pre-training FLOPs; "
                    f"log them as artefacts of a run in the MLflow experiment {REPORTS_EXPERIMENT!r}. "
                    "Results passed with --runs are also folded into the leaderboard experiment.")
    parser.add_argument("--runs", nargs="+", type=Path, metavar="RUN_DIR",
                        help="run directories or results.json files (default: every row of the MLflow "
                             f"experiment {LEADERBOARD_EXPERIMENT!r})")
    parser.add_argument("--output", type=Path, default=Path("runs/report"),
                        help="directory for the four files (default: %(default)s)")
    parser.add_argument("--tracking-uri", help=TRACKING_HELP)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from harness.tracking.leaderboard_report import write_report

    write_report(args.runs, args.output, args.tracking_uri)
    return 0

"""`harness card`: a Hugging Face model card beside each model a run saved."""

from __future__ import annotations

import argparse

HELP = "write a Hugging Face model card beside each saved model of a run"
DESCRIPTION = ("Write README.md (YAML metadata with model-index: task, dataset, metric, value; then the "
               "run's seeds, 95%% interval, pre-training and fine-tuning FLOPs, recipe departures, base "
               "model and revision) into each RUN/models/<task>-seed<N>/ that `harness run` saved "
               "(save_models=true). The numbers are those in RUN/results.json.")


def add_parser(subparsers) -> None:
    from harness.publish.saved import add_run_parser

    add_run_parser(subparsers, "card", HELP, DESCRIPTION).set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from harness.publish.card import write_cards

    for path in write_cards(args.run):
        print(f"wrote {path}")
    return 0

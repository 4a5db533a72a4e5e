"""`harness card`: a Hugging Face model card beside each model a run saved."""

from __future__ import annotations

import argparse

HELP = "write a Hugging Face model card beside each saved model of a run"
DESCRIPTION = ("Write README.md into each RUN/models/<task>-seed<N>/ that a `harness run` of any kind "
               "saved (save_models=true): YAML metadata (pipeline_tag: the kind's Hub task; base model; the "
               "data set where it is a Hub id; model-index: task, dataset, metric, value), then the labels, "
               "how to use the model (transformers' pipeline, the ONNX bundle), the run's seeds and 95% "
               "interval, pre-training and fine-tuning FLOPs, recipe departures, base model and revision. "
               "The numbers are those in RUN/results.json, to 4 significant digits.")


def add_parser(subparsers) -> None:
    from harness.publish.saved import add_run_parser

    add_run_parser(subparsers, "card", HELP, DESCRIPTION).set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from harness.publish.card import write_cards

    for path in write_cards(args.run):
        print(f"wrote {path}")
    return 0

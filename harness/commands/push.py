"""`harness push`: a saved model of a run and its model card, uploaded to the Hugging Face Hub."""

from __future__ import annotations

import argparse

HELP = "upload a saved model of a run and its model card to the Hugging Face Hub"
DESCRIPTION = ("Create (or reuse) the Hub model repository ORG/NAME and upload one model folder that "
               "`harness run` saved, with its README.md model card (written first with `harness card`'s code "
               "when absent). Needs a token (`hf auth login` or HF_TOKEN) and HF_HUB_OFFLINE unset.")


def add_parser(subparsers) -> None:
    from harness.publish.saved import add_run_parser

    parser = add_run_parser(subparsers, "push", HELP, DESCRIPTION)
    parser.add_argument("--repo", required=True, metavar="ORG/NAME", help="the Hub model repository")
    parser.add_argument("--private", action="store_true", help="create the repository private")
    parser.add_argument("--task", help="which task's model (needed when the run saved several tasks)")
    parser.add_argument("--seed", type=int, help="which seed (default: the best dev score)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from harness.publish.push import push

    saved, url = push(args.run, args.repo, args.private, args.task, args.seed)
    print(f"uploaded {saved.folder} ({saved.task} seed {saved.seed}) to {url}")
    return 0

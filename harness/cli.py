"""`harness` command line: one module per subcommand, each with `add_parser`, which registers its
parser (`run` and `search`: one per kind of task; `experiment`: one per experiment) and sets each
parser's handler.

This is the only place that turns a UserError into a one-line message and exit status 2, and a run
stopped by a signal (foundation/training/stop.py) into one line saying how to resume it.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys

# Subcommand modules under harness/commands/; each defines add_parser(subparsers), whose parsers'
# handler(args) returns the exit status.
COMMANDS = ["run", "settings", "tasks", "models", "init", "flops", "pretrain", "search", "report", "export",
            "predict", "serve", "experiment", "compare", "demo", "eval", "card", "push"]


class Parser(argparse.ArgumentParser):
    """argparse's parser (its subcommands' too), its errors one line as every other error is: argparse
    printed the whole usage first, 9-17 lines for a mistyped choice."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="harness",
        description="Pre-train ELECTRA discriminators, fine-tune them on GLUE, SQuAD, your own text or "
                    "tagging, count their FLOPs.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"harness.commands.{name}").add_parser(subparsers)
    return parser


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line. key=value settings may stand on either side of a flag
    (`a=1 --tasks rte b=2`): argparse alone takes only the first run of them and rejects the rest, and its
    `parse_intermixed_args` refuses subcommands, so the stragglers are appended here, in order."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and all("=" in word and word[0] != "-" for word in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}{_did_you_mean(parser, args, extra)}")
    return args


def _did_you_mean(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> str:
    """The flag of the chosen (sub)command closest to the first unknown one, as argparse adds from 3.12."""
    chosen = parser
    while True:  # down the subcommands the command line chose (harness run text: run, then text)
        found = [action for action in chosen._actions if isinstance(action, argparse._SubParsersAction)]
        name = getattr(args, found[0].dest, None) if found else None
        if name not in (found[0].choices if found else {}):
            break
        chosen = found[0].choices[name]
    flags = [flag for action in chosen._actions for flag in action.option_strings if flag.startswith("--")]
    for word in (w.partition("=")[0] for w in extra if w.startswith("--")):
        close = difflib.get_close_matches(word, flags, n=1)
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


def main(argv: list[str] | None = None) -> int:
    from foundation.infra.errors import UserError
    from foundation.infra.secrets import echoed
    from foundation.training.stop import Stopped

    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    args.argv = list(argv)  # what a grid prints as the command that retries it
    try:
        return args.handler(args) or 0
    except UserError as error:
        print(f"harness: error: {error}", file=sys.stderr)
        return 2
    except Stopped as stopped:  # SIGTERM or Ctrl-C, the state saved: the same command goes on from it
        from foundation.training.distributed import launch_command

        launch = launch_command()  # under torchrun rank 0 speaks for every process
        if launch is not None:  # an echoed command line carries no password
            print(f"harness: {stopped}; resume with: {launch} {echoed(argv)}", file=sys.stderr)
        return stopped.exit_status
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

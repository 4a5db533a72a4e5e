"""`harness settings`: every setting of a command, a kind of task (its settings, then its task description)
or the search space, as its field declares it (foundation/infra/settings.py): role, default, allowed values,
whether a resume may change it, its value for results written before it existed, what it does and the flag
that also sets it."""

from __future__ import annotations

import dataclasses
import textwrap
import typing

from harness import kinds

# Beside the kinds of task (harness/kinds.py: their settings classes, then their task description)
CONFIGS = {"pretrain": "pretrain.config:PretrainConfig", "search": "harness.search.space:SearchSpace",
           "serve": "harness.deploy.serve_config:ServeConfig"}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "settings", help="explain every key=value setting of a command or the search space",
        description="Explain every setting of `harness run KIND` (its key=value settings, then the flags "
                    "and task-file keys that describe the task), `harness pretrain`, `harness serve` or the "
                    "search space of `harness search`: its role (recipe: what a run trains and measures, and "
                    "a recipe setting changed from ELECTRA's is a departure on the leaderboard; runtime: how "
                    "this machine computes it; output: what is written; budget: when a run stops), its "
                    "default, its allowed values, whether resuming a run may change it, what it does and the "
                    "flag that also sets it.")
    parser.add_argument("command", choices=sorted([*kinds.KINDS, *CONFIGS]),
                        help=f"whose settings: harness run {'|'.join(kinds.KINDS)}, pretrain, serve, or the "
                             "search space")
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these settings (default: all)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from foundation.infra import settings
    from foundation.infra.errors import UserError
    from harness.config import shown

    rows = []
    for cls in _classes(args.command):
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            meaning = settings.described(field)
            choices = settings.choices(hints[field.name])
            default = "none" if field.default is None else shown(field.default)
            facts = [meaning.role, f"default {default}"]
            facts += [f"one of {'|'.join(map(shown, choices))}"] if choices else []
            facts += ["a resume may change it"] if meaning.resumable else []
            if meaning.before != field.default:
                facts.append(f"results from before it: {shown(meaning.before)}")
            flag = f"; also {meaning.flag.name}" if meaning.flag else ""
            rows.append((field.name, "; ".join(facts), meaning.help + flag))
    unknown = [name for name in args.names if name not in {row[0] for row in rows}]
    if unknown:
        raise UserError(f"{args.command} has no setting {', '.join(map(repr, unknown))}; "
                        f"`harness settings {args.command}` lists them all")
    for name, facts, help_text in rows:
        if not args.names or name in args.names:
            print(f"{name}  ({facts})")
            if help_text:
                print(textwrap.fill(help_text, width=100, initial_indent="    ", subsequent_indent="    "))
    return 0


def _classes(command: str) -> list[type]:
    """A kind's settings classes and its task description; or a command's settings class."""
    if command in kinds.KINDS:
        kind = kinds.KINDS[command]
        return [*kinds.settings_classes(kind), kinds.load(kind.description)]
    return [kinds.load(CONFIGS[command])]

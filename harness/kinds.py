"""The one registry of kinds of task: GLUE, SQuAD, your own text, tagging.

A kind declares itself once, here, in one `Kind` row. run, search, eval, settings, tasks, export,
predict, serve and compare loop over `KINDS`; none of them, and no deploy module, names a kind or
imports a kind's modules. The heavy parts are named as "module:attribute" and loaded when used
(as harness/cli.py loads the commands), so that building the CLI parser, `harness predict` and
`harness serve` import neither torch nor transformers. A new kind is its own module(s) plus one row.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError


@dataclass(frozen=True)
class Kind:
    """One kind of task: what the commands need to know of it, and where its own code lives."""

    name: str  # the word after `harness run|eval|search`; results.json: "electra-harness/NAME-results/N"
    help: str  # one line in `harness run --help`
    # The task description: a config class whose fields make the kind's flags (harness/config.py's add_flags)
    # and which `harness settings NAME` explains. Torch-free.
    description: str
    # The fine-tuning side: the kind's runner (harness/finetuning/kind_runner.py's KindRunner), which builds
    # the kind's invocation and Finetuning (harness/finetuning/orchestration.py) for run, eval and search.
    runner: str
    # The deployment side: the bundle's predictor (torch-free: harness predict and serve) and its exporter.
    predictor: str
    exporter: str
    # Every module that is this kind's own (tests/test_imports.py: outside them only this registry may
    # import them). The metrics are not: pure functions of predictions and references (tasks/metrics.py,
    # squad_metrics.py, tagging_metrics.py, evaluate_metrics/) that reports/ resamples for its intervals.
    modules: tuple[str, ...] = ()
    # The settings classes a run of the kind takes as key=value or --config (harness settings NAME explains
    # them, then the description). Torch-free.
    settings: tuple[str, ...] = ("tasks.config:FinetuneConfig",)

    def results_format(self, found: str) -> bool:
        """Whether results.json's `format` string is this kind's."""
        return found.startswith(f"electra-harness/{self.name}-results/")


KINDS: dict[str, Kind] = {kind.name: kind for kind in [
    Kind("glue", "GLUE dev scores, test-server files and MLflow runs",
         description="tasks.glue_task:GlueDescription",
         runner="harness.finetuning.glue_finetuning:KIND_RUNNER",
         modules=("tasks.glue", "tasks.glue_data", "tasks.glue_task", "harness.finetuning.glue_finetuning",
                 "harness.deploy.glue_export"),
         predictor="harness.deploy.sequence_classification:Predictor",
         exporter="harness.deploy.glue_export:Exporter"),
    Kind("squad", "SQuAD 1.1 / 2.0 dev scores, predictions and MLflow runs",
         description="tasks.squad_task:SquadDescription",
         runner="harness.finetuning.squad_finetuning:KIND_RUNNER",
         modules=("tasks.squad", "tasks.squad_data", "tasks.squad_features", "tasks.squad_model",
                  "tasks.squad_spans", "tasks.squad_task", "harness.finetuning.squad_finetuning",
                 "harness.deploy.squad_export", "harness.deploy.question_answering"),
         settings=("tasks.config:FinetuneConfig", "tasks.config:SquadConfig"),
         predictor="harness.deploy.question_answering:Predictor",
         exporter="harness.deploy.squad_export:Exporter"),
    Kind("text", "your own labelled files: classification, regression or multi-label",
         description="tasks.text_task:TextDescription",
         runner="harness.finetuning.text_finetuning:KIND_RUNNER",
         modules=("tasks.text", "tasks.text_data", "tasks.text_task", "harness.finetuning.text_finetuning",
                 "harness.finetuning.text_predictions",
                 "harness.deploy.text_export"),
         predictor="harness.deploy.sequence_classification:Predictor",
         exporter="harness.deploy.text_export:Exporter"),
    Kind("tagging", "chunking, NER or your own tagged files (conlleval F1)",
         description="tasks.tagging_task:TaggingDescription",
         runner="harness.finetuning.tagging_finetuning:KIND_RUNNER",
         modules=("tasks.tagging", "tasks.tagging_data", "tasks.tagging_task",
                  "harness.finetuning.tagging_finetuning", "harness.deploy.tagging_export",
                 "harness.deploy.token_classification", "harness.deploy.tag_spans"),
         predictor="harness.deploy.token_classification:Predictor",
         exporter="harness.deploy.tagging_export:Exporter"),
]}


def kind(name: str) -> Kind:
    """The registered kind `name`, or a UserError naming the kinds there are."""
    if name not in KINDS:
        raise UserError(f"unknown kind of task {name!r}; choose one of {', '.join(KINDS)}")
    return KINDS[name]


def of_results(found: str) -> Kind:
    """The kind whose results.json `format` is `found`, or a UserError naming it."""
    for candidate in KINDS.values():
        if candidate.results_format(found):
            return candidate
    raise UserError(f"results format {found!r} is no kind of task this harness knows ({', '.join(KINDS)})")


def load(reference: str) -> Any:
    """The object a "module:attribute" reference names, its module imported now."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


# Where a description's flags land in the parsed arguments: apart from the command's own, so that a
# setting may share a name with a command's argument (`kind`, the subcommand).
DEST = "description."


def settings_classes(found: Kind) -> tuple[type, ...]:
    """The kind's settings classes, loaded (torch-free)."""
    return tuple(load(reference) for reference in found.settings)


def add_kind_parsers(parser: argparse.ArgumentParser, command: str,
                     epilog: Callable[[Kind, Any], str]) -> list[tuple[Kind, argparse.ArgumentParser]]:
    """`harness COMMAND KIND`: a subparser per kind, with the help its description declares for `command`
    (tasks/kind_text.py) and `epilog(kind, text)`; the command adds the flags."""
    by_kind = parser.add_subparsers(dest="kind", required=True, metavar="KIND")
    parsers = []
    for found in KINDS.values():
        text = load(found.description).commands[command]
        parsers.append((found, by_kind.add_parser(
            found.name, help=text.help or found.help, description=text.description,
            epilog=epilog(found, text), formatter_class=argparse.RawDescriptionHelpFormatter)))
    return parsers


def add_description_flags(parser: argparse.ArgumentParser, found: Kind, command: str) -> None:
    """--task-file, and a flag for each setting of the kind's description that declares one, as `command`
    offers it (the description's CommandText.flags: another name, required, other help)."""
    from harness.config import add_flags

    described = load(found.description)
    parser.add_argument("--task-file", help="TOML file describing the task (the same keys as the flags)")
    add_flags(parser, described, prefix=DEST, changes=described.commands[command].flags)


def load_description(found: Kind, args: argparse.Namespace) -> tuple[Any, Path | None]:
    """The kind's task description: the --task-file's keys, then the flags given; and the folder the task
    file's relative paths start from."""
    from harness.config import load_config, read_toml, shown

    described = load(found.description)
    values = {field.name: getattr(args, DEST + field.name) for field in dataclasses.fields(described)
              if getattr(args, DEST + field.name, None) is not None}
    given = [f"{key}={shown(tuple(value)) if isinstance(value, list | tuple) else value}"
             for key, value in values.items()]
    if args.task_file:  # named as what it is: a task file, not a --config
        read_toml(Path(args.task_file), "task file", "--task-file")
    description = load_config(described, args.task_file, given)
    return description, Path(args.task_file).resolve().parent if args.task_file else None


def pipelines() -> dict[str, Any]:
    """Each pipeline's name (a bundle manifest's "kind") and its Pipeline class (harness/deploy/pipeline.py),
    their modules imported now (torch-free)."""
    found = (load(row.predictor) for row in KINDS.values())
    return {pipeline.name: pipeline for pipeline in found}

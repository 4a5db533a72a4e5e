"""The one registry of kinds of task: GLUE, SQuAD, your own text, tagging.

A kind declares itself once, here, in one `Kind` row. run, search, eval, settings, tasks, export,
predict, serve and compare loop over `KINDS`; none of them, and no deploy module, names a kind or
imports a kind's modules. The heavy parts are named as "module:attribute" and loaded when used
(as harness/cli.py loads the commands), so that building the CLI parser, `harness predict` and
`harness serve` import neither torch nor transformers. A new kind is its own module(s) plus one row.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from foundation.infra.errors import UserError


@dataclass(frozen=True)
class Kind:
    """One kind of task: what the commands need to know of it, and where its own code lives."""

    name: str  # the word after `harness run|eval|search`, and results.json's format "harness/NAME-results"
    help: str  # one line in `harness run --help`
    # The task description: a config class whose fields make the kind's flags (harness/config.py's add_flags)
    # and which `harness settings NAME` explains. Torch-free.
    description: str
    # The fine-tuning side: the kind's Benchmark plugged into harness/finetuning/orchestration.py.
    runner: str
    # The deployment side: the bundle's predictor (torch-free: harness predict and serve) and its exporter.
    predictor: str
    exporter: str
    # Every module that is this kind's own (tests/test_imports.py: outside them only this registry may
    # import them).
    modules: tuple[str, ...] = ()


KINDS: dict[str, Kind] = {kind.name: kind for kind in [
    Kind("glue", "GLUE dev scores, test-server files and MLflow runs",
         description="tasks.glue_task:GlueTaskConfig",
         runner="harness.finetuning.glue_benchmark:KIND_RUNNER",

         predictor="harness.deploy.sequence_classification:Predictor",
         exporter="harness.deploy.glue_export:Exporter"),
    Kind("squad", "SQuAD 1.1 / 2.0 dev scores, predictions and MLflow runs",
         description="tasks.squad_task:SquadTaskConfig",
         runner="harness.finetuning.squad_benchmark:KIND_RUNNER",

         predictor="harness.deploy.question_answering:Predictor",
         exporter="harness.deploy.squad_export:Exporter"),
    Kind("text", "your own labelled files: classification, regression or multi-label",
         description="tasks.text_task:TextTaskConfig",
         runner="harness.finetuning.text_benchmark:KIND_RUNNER",

         predictor="harness.deploy.sequence_classification:Predictor",
         exporter="harness.deploy.text_export:Exporter"),
    Kind("tagging", "chunking, NER or your own tagged files (conlleval F1)",
         description="tasks.tagging_task:TaggingTaskConfig",
         runner="harness.finetuning.tagging_benchmark:KIND_RUNNER",

         predictor="harness.deploy.token_classification:Predictor",
         exporter="harness.deploy.tagging_export:Exporter"),
]}


def kind(name: str) -> Kind:
    """The registered kind `name`, or a UserError naming the kinds there are."""
    if name not in KINDS:
        raise UserError(f"unknown kind of task {name!r}; choose one of {', '.join(KINDS)}")
    return KINDS[name]


def load(reference: str) -> Any:
    """The object a "module:attribute" reference names, its module imported now."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def pipelines() -> dict[str, Any]:
    """Each bundle kind (a bundle manifest's "kind") and its Pipeline class (harness/deploy/pipeline.py),
    their modules imported now (torch-free)."""
    found = (load(row.predictor) for row in KINDS.values())
    return {pipeline.bundle_kind: pipeline for pipeline in found}

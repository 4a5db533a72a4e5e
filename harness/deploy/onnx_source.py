"""What `harness export onnx` exports: the checkpoint of a run's best seed (or a --model directory),
checked against the task, with what the bundle must know about how it was fine-tuned."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.infra.errors import UserError
from foundation.models.identity import model_identity
from foundation.models.resolve import resolve_model
from harness.deploy import onnx_export
from harness.deploy.exporting import Exporter, exporters
from harness.kinds import KINDS, load
from reports import results_schema

RESULTS_FORMAT = re.compile(r"electra-harness/(\w+)-results/")  # results.json's format names its kind


@dataclass(frozen=True)
class Source:
    """The checkpoint to export and what the bundle must know about how it was fine-tuned."""

    checkpoint: onnx_export.Checkpoint
    task: Any  # the kind's task description (a GLUE task, a SQuAD version, a run's own task)
    exporter: Exporter  # the task's kind's
    max_length: int
    model_name: str  # the --model of the fine-tuning run, for MLflow tags
    model_id: str = ""  # the discriminator's leaderboard key (foundation/models/identity.py), for --run
    seed: int | None = None
    run_dir: Path | None = None
    settings: dict = field(default_factory=dict)  # the kind's runtime settings (SQuAD: windows, answers)
    data: dict | None = None  # a run's own task's (text, tagging) data block (results.json): its dev split


def get_task(name: str) -> tuple[Exporter, Any]:
    """The task `--task NAME` picks, and its kind's exporter."""
    named = {task_name: (exporter, task) for exporter in exporters()
             for task_name, task in exporter.named_tasks().items()}
    if not name:
        raise UserError(f"pass --task: one of {', '.join(named)} (a `harness run text` or `run tagging` "
                        "folder needs none)")
    if name not in named:
        raise UserError(f"unknown task {name!r}; choose one of {', '.join(named)}")
    return named[name]


def resolve_source(task_name: str, run_dir: Path | None, model_dir: str | Path | None,
                   seed: int | None) -> Source:
    """The checkpoint of --run (its best-dev seed unless --seed) or --model, checked against --task."""
    if (run_dir is None) == (model_dir is None):
        raise UserError("pass exactly one of --run RUN_DIR (a `harness run` output) or --model DIR")
    if run_dir is not None:
        _require_run(run_dir)
        return _from_run(run_dir, *(_own_task(run_dir, task_name) or get_task(task_name)), seed)
    if seed is not None:
        raise UserError("--seed picks a model of a --run directory; with --model the directory is the model")
    checkpoint = onnx_export.inspect_checkpoint(Path(resolve_model(str(model_dir))))
    for exporter in exporters():
        if exporter.pipeline == checkpoint.pipeline:
            exporter.refuse_model(checkpoint, model_dir)
    return _source(checkpoint, *get_task(task_name), str(model_dir))


def _require_run(run_dir: Path) -> None:
    """Refuse a --run that is no run folder before asking which task it holds."""
    if not run_dir.is_dir():
        raise UserError(f"run folder {str(run_dir)!r} does not exist; pass the --output-dir of a "
                        "`harness run`")
    if not (run_dir / results_schema.FILE).is_file():
        raise UserError(f"{str(run_dir)!r} has no results.json; pass the --output-dir of a `harness run`")


def _own_task(run_dir: Path, task_name: str) -> tuple[Exporter, Any] | None:
    """The task of a run folder whose results.json describes it (your own text, tagging), and its kind's
    exporter; None for kinds whose tasks --task names."""
    results = results_schema.load(run_dir / results_schema.FILE)
    found = RESULTS_FORMAT.match(str(results.get("format", "")))
    if found is None or found[1] not in KINDS:
        return None
    exporter = load(KINDS[found[1]].exporter)()
    task = exporter.run_task(results, task_name, run_dir)
    return None if task is None else (exporter, task)


def _from_run(run_dir: Path, exporter: Exporter, task: Any, seed: int | None) -> Source:
    results = results_schema.load(run_dir / results_schema.FILE)
    mine = [r for r in results.get("runs", []) if r.get("task") == task.name]
    if not mine:
        done = sorted({r.get("task") for r in results.get("runs", [])})
        raise UserError(f"{str(run_dir)!r} has no fine-tuned {task.name!r}; it has "
                        f"{', '.join(done) or 'none'}")
    if seed is None:
        chosen = max(mine, key=lambda r: r["score"])  # the best dev score; ties go to the first seed
    else:
        chosen = next((r for r in mine if r["seed"] == seed), None)
        if chosen is None:
            raise UserError(f"{str(run_dir)!r} has no {task.name} seed {seed}; choose one of "
                            f"{', '.join(str(r['seed']) for r in mine)}")
    model_dir = run_dir / "models" / f"{task.name}-seed{chosen['seed']}"
    if not (model_dir / "config.json").is_file():
        raise UserError(f"{str(model_dir)!r} does not exist: that run saved no models (save_models=false?); "
                        "fine-tune again with save_models=true, or pass --model DIR")
    config = chosen.get("resolved_config") or results.get("config") or {}
    model = results.get("model", {})
    model_id = (results.get("flops") or {}).get("model_id") or \
        model_identity(model.get("name", ""), model.get("path", ""))
    source = _source(onnx_export.inspect_checkpoint(model_dir), exporter, exporter.for_seed(task, chosen),
                     model.get("name", ""), config.get("max_length"), results.get("settings"))
    data = results.get("data") if exporter.runs_describe_task else None
    return dataclasses.replace(source, model_id=model_id, seed=chosen["seed"], run_dir=run_dir, data=data)


def _source(checkpoint, exporter: Exporter, task, model_name, max_length=None, settings=None) -> Source:
    if checkpoint.pipeline != exporter.pipeline:
        raise UserError(f"task {task.name!r} needs {exporter.wanted}, but {str(checkpoint.path)!r} holds a "
                        f"{checkpoint.architecture}; pass the task it was fine-tuned on")
    if exporter.has_labels and checkpoint.num_labels != task.num_labels:
        raise UserError(f"{str(checkpoint.path)!r} has {checkpoint.num_labels} outputs but {task.name} has "
                        f"{task.num_labels}; pass the task it was fine-tuned on")
    max_length = min(max_length or task.max_length, checkpoint.max_position_embeddings)
    return Source(checkpoint, task, exporter, max_length, model_name,
                  settings=exporter.settings(task, max_length, settings, checkpoint.path))

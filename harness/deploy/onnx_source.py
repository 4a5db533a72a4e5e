"""What `harness export onnx` exports: the checkpoint of a run's best seed (or a --model directory),
checked against the task, with what the bundle must know about how it was fine-tuned."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from foundation.infra.errors import UserError
from foundation.models.identity import model_identity
from foundation.models.resolve import resolve_model
from harness.deploy import onnx_export
from reports import results_schema
from tasks.registry import GLUE_TASKS, SQUAD_TASKS, GlueTask, SquadTask
from tasks.tagging_task import TaggingTask
from tasks.text_task import TextTask

OwnTask = TextTask | TaggingTask  # described by a run's results.json, not by the registry

TASKS: dict[str, GlueTask | SquadTask] = {
    **{name: t for name, t in GLUE_TASKS.items() if t.predicted_by is None},
    **{t.name: t for t in SQUAD_TASKS.values()}}


@dataclass(frozen=True)
class Source:
    """The checkpoint to export and what the bundle must know about how it was fine-tuned."""

    checkpoint: onnx_export.Checkpoint
    task: GlueTask | SquadTask | OwnTask
    max_length: int
    model_name: str  # the --model of the fine-tuning run, for MLflow tags
    model_id: str = ""  # the discriminator's leaderboard key (foundation/models/identity.py), for --run
    seed: int | None = None
    run_dir: Path | None = None
    qa: dict = field(default_factory=dict)  # SQuAD windowing and post-processing settings
    data: dict | None = None  # your own task's (text, tagging) data block (results.json): its dev split


def get_task(name: str) -> GlueTask | SquadTask:
    if not name:
        raise UserError(f"pass --task: one of {', '.join(TASKS)} (a `harness run text` or `run tagging` "
                        "folder needs none)")
    if name not in TASKS:
        raise UserError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    return TASKS[name]


def resolve_source(task_name: str, run_dir: Path | None, model_dir: str | Path | None,
                   seed: int | None) -> Source:
    """The checkpoint of --run (its best-dev seed unless --seed) or --model, checked against --task."""
    if (run_dir is None) == (model_dir is None):
        raise UserError("pass exactly one of --run RUN_DIR (a `harness run` output) or --model DIR")
    if run_dir is not None:
        return _from_run(run_dir, _own_task(run_dir, task_name) or get_task(task_name), seed)
    if seed is not None:
        raise UserError("--seed picks a model of a --run directory; with --model the directory is the model")
    checkpoint = onnx_export.inspect_checkpoint(Path(resolve_model(str(model_dir))))
    if checkpoint.kind == onnx_export.TOKEN_CLASSIFICATION:
        # a tagger's tags, their scheme and its dev file (for the parity and F1 checks) are its run's
        raise UserError(f"{str(model_dir)!r} holds a tagger ({checkpoint.architecture}); a tagger exports "
                        "from the folder of the `harness run tagging` that trained it, which holds its tag "
                        "scheme and dev data: pass --run RUN_DIR instead of --model")
    return _source(checkpoint, get_task(task_name), str(model_dir))


def _own_task(run_dir: Path, task_name: str) -> OwnTask | None:
    """The task of a `harness run text` or `run tagging` folder, as its results.json describes it; None
    for benchmarks."""
    path = run_dir / results_schema.FILE
    if not path.is_file():
        return None
    results = results_schema.load(path)
    own = {results_schema.TEXT_FORMAT: TextTask, results_schema.TAGGING_FORMAT: TaggingTask}
    if results.get("format") not in own:
        return None
    described = (results.get("data") or {}).get("task")
    if task_name and task_name != described["name"]:
        raise UserError(f"{str(run_dir)!r} fine-tuned the task {described['name']!r}, not {task_name!r}; "
                        f"pass --task {described['name']}")
    return own[results["format"]].from_record(described)


def _from_run(run_dir: Path, task: GlueTask | SquadTask | OwnTask, seed: int | None) -> Source:
    path = run_dir / results_schema.FILE
    if not path.is_file():
        raise UserError(f"{str(run_dir)!r} has no results.json; pass the --output-dir of `harness run glue` "
                        "or `harness run squad`")
    results = results_schema.load(path)
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
    source = _source(onnx_export.inspect_checkpoint(model_dir), task, model.get("name", ""),
                     config.get("max_length"), results.get("settings"))
    data = results.get("data") if isinstance(task, OwnTask) else None
    return dataclasses.replace(source, model_id=model_id, seed=chosen["seed"], run_dir=run_dir, data=data)


def _source(checkpoint, task, model_name, max_length=None, settings=None) -> Source:
    if isinstance(task, SquadTask):
        kind, wanted = onnx_export.QUESTION_ANSWERING, "a span model from `harness run squad`"
    elif isinstance(task, TaggingTask):
        kind, wanted = onnx_export.TOKEN_CLASSIFICATION, "a tagger from `harness run tagging`"
    else:
        kind, wanted = onnx_export.CLASSIFICATION, "a classifier from `harness run glue`"
    if checkpoint.kind != kind:
        raise UserError(f"task {task.name!r} needs {wanted}, but {str(checkpoint.path)!r} holds a "
                        f"{checkpoint.architecture}; pass the task it was fine-tuned on")
    if not isinstance(task, SquadTask) and checkpoint.num_labels != task.num_labels:
        raise UserError(f"{str(checkpoint.path)!r} has {checkpoint.num_labels} outputs but {task.name} has "
                        f"{task.num_labels}; pass the task it was fine-tuned on")
    max_length = min(max_length or task.max_length, checkpoint.max_position_embeddings)
    qa = _qa_settings(task, max_length, settings, checkpoint.answerability_head) \
        if isinstance(task, SquadTask) else {}
    return Source(checkpoint, task, max_length, model_name, qa=qa)


def _qa_settings(task: SquadTask, max_length: int, settings: dict | None, head: bool) -> dict:
    from tasks.config import SquadConfig, default_null_threshold

    defaults = SquadConfig()
    if settings is None:
        # Short models (fewer positions than the 512-token window) keep ELECTRA's proportions.
        room = max_length // 4
        settings = {"doc_stride": min(defaults.doc_stride, room),
                    "max_query_length": min(defaults.max_query_length, room)}
    keys = ("doc_stride", "max_query_length", "n_best", "max_answer_length", "null_threshold")
    chosen = {key: settings.get(key, getattr(defaults, key)) for key in keys}
    if chosen["null_threshold"] is None:  # not from a run's results: the default for the bundle's head
        chosen["null_threshold"] = default_null_threshold(head)
    return chosen | {"version_2": task.has_unanswerable, "doc_stride_is_step": True}

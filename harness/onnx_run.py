"""`harness export onnx`: a fine-tuned checkpoint to a checked deployment bundle, logged to MLflow.

Order: resolve the checkpoint and read the dev data (bad input fails in seconds), export into a
staging directory, check parity against PyTorch (fail above PARITY_TOLERANCE), quantise, score fp32
and int8 on dev through the runtime, write the manifest, then move the bundle into place.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from datasets import Dataset

from harness import tracking
from pretrain.common import atomic
from pretrain.common.errors import UserError
from pretrain.common.models import resolve_model
from reports import accounting, bundle, onnx_check, onnx_export
from reports.onnx_predictor import Predictor
from tasks.registry import GLUE_TASKS, SQUAD_TASKS, GlueTask, SquadTask

PARITY_EXAMPLES = 64  # dev examples compared with PyTorch, in batches of PARITY_BATCH (several shapes)
PARITY_BATCH = 16
INT8_TARGET_POINTS = 1.0  # int8 may score at most this many points below fp32 on dev
TASKS: dict[str, GlueTask | SquadTask] = {
    **{name: t for name, t in GLUE_TASKS.items() if t.predicted_by is None},
    **{t.name: t for t in SQUAD_TASKS.values()}}


@dataclass(frozen=True)
class ExportJob:
    """What to export (a run's task and seed, or a checkpoint directory) and where."""

    task: str
    run_dir: Path | None = None
    model_dir: Path | None = None
    seed: int | None = None
    output: Path | None = None
    quantize: str | None = None
    data_dir: str | None = None
    max_eval_examples: int = 1000
    tracking_uri: str | None = None


@dataclass(frozen=True)
class Source:
    """The checkpoint to export and what the bundle must know about how it was fine-tuned."""

    checkpoint: onnx_export.Checkpoint
    task: GlueTask | SquadTask
    max_length: int
    model_name: str  # the --model of the fine-tuning run, for MLflow tags
    model_id: str = ""  # the discriminator's leaderboard key (reports/accounting.py), for --run
    seed: int | None = None
    run_dir: Path | None = None
    qa: dict = field(default_factory=dict)  # SQuAD windowing and post-processing settings


def get_task(name: str) -> GlueTask | SquadTask:
    if name not in TASKS:
        raise UserError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    return TASKS[name]


def export(job: ExportJob) -> dict:
    """Write the bundle and log it; returns its manifest."""
    started = time.perf_counter()
    source = resolve_source(job)
    output = job.output or _default_output(source)
    _check_output(output)
    examples = dev_examples(source.task, job.data_dir, job.max_eval_examples)
    tokenizer = _tokenizer(source.checkpoint.path)
    # model_id is the leaderboard row's key: a row's ONNX models are found by that tag.
    tags = {"model": source.model_name, "model_id": source.model_id, "task": source.task.name,
            "run_dir": str(source.run_dir or ""),
            "model_dir": str(source.checkpoint.path), "seed": "" if source.seed is None else str(source.seed)}
    tracking.setup("export", job.tracking_uri)
    name = f"{source.task.name} onnx export"
    with tracking.run(name, params=_params(job, source), tags=tags) as active:
        with atomic.atomic_dir(output) as staging:  # replaces an older bundle only once this one is whole
            manifest = _build(source, job, tokenizer, examples, staging)
            manifest["mlflow_run_id"] = active.info.run_id
            manifest["export_time_s"] = time.perf_counter() - started
            _write_manifest(staging, manifest)  # files and folder get the umask's modes, like any output
        _log_models(output, manifest, tags)
    return manifest | {"output": str(output)}


def resolve_source(job: ExportJob) -> Source:
    """The checkpoint of --run (its best-dev seed unless --seed) or --model, checked against --task."""
    task = get_task(job.task)
    if (job.run_dir is None) == (job.model_dir is None):
        raise UserError("pass exactly one of --run RUN_DIR (a `harness run` output) or --model DIR")
    if job.run_dir is not None:
        return _from_run(job.run_dir, task, job.seed)
    if job.seed is not None:
        raise UserError("--seed picks a model of a --run directory; with --model the directory is the model")
    checkpoint = onnx_export.inspect_checkpoint(Path(resolve_model(str(job.model_dir))))
    return _source(checkpoint, task, str(job.model_dir))


def _from_run(run_dir: Path, task: GlueTask | SquadTask, seed: int | None) -> Source:
    path = run_dir / "results.json"
    if not path.is_file():
        raise UserError(f"{str(run_dir)!r} has no results.json; pass the --output-dir of `harness run glue` "
                        "or `harness run squad`")
    results = json.loads(path.read_text())
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
        accounting.model_identity(model.get("name", ""), model.get("path", ""))
    source = _source(onnx_export.inspect_checkpoint(model_dir), task, model.get("name", ""),
                     config.get("max_length"), results.get("settings"))
    return dataclasses.replace(source, model_id=model_id, seed=chosen["seed"], run_dir=run_dir)


def _source(checkpoint, task, model_name, max_length=None, settings=None) -> Source:
    if isinstance(task, SquadTask) != (checkpoint.kind == onnx_export.QUESTION_ANSWERING):
        wanted = "a span model from `harness run squad`" if isinstance(task, SquadTask) else \
            "a classifier from `harness run glue`"
        raise UserError(f"task {task.name!r} needs {wanted}, but {str(checkpoint.path)!r} holds a "
                        f"{checkpoint.architecture}; pass the task it was fine-tuned on")
    if isinstance(task, GlueTask) and checkpoint.num_labels != task.num_labels:
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


def dev_examples(task: GlueTask | SquadTask, data_dir: str | None, limit: int) -> Dataset:
    """The first `limit` examples of the task's (first) dev split, in file order."""
    if limit < PARITY_EXAMPLES:
        raise UserError(f"--max-eval-examples {limit} is below the {PARITY_EXAMPLES} the parity check uses; "
                        f"pass {PARITY_EXAMPLES} or more")
    if isinstance(task, SquadTask):
        from tasks import squad_data

        chosen = data_dir or os.environ.get("SQUAD_DIR")
        examples = squad_data.load_squad_hub(task.version, "validation") if not chosen else \
            squad_data.load_squad_json(squad_data.squad_file(chosen, task.version, "dev"), task.version)[0]
    else:
        from tasks.glue_data import glue_dir, load_glue

        examples = load_glue(task, glue_dir(data_dir))[task.dev_splits[0]]
    return examples.select(range(min(limit, len(examples))))


def _build(source: Source, job: ExportJob, tokenizer, examples: Dataset, staging: Path) -> dict:
    """Export, parity, quantisation and dev scores into `staging`; returns the manifest."""
    model = onnx_export.load_model(source.checkpoint)
    onnx_export.export_onnx(model, staging / bundle.MODEL_FILES["fp32"])
    onnx_export.save_tokenizer(tokenizer, staging / bundle.TOKENIZER)
    manifest = _manifest(source, tokenizer, staging, [bundle.MODEL_FILES["fp32"], bundle.TOKENIZER])
    _write_manifest(staging, manifest)
    fp32 = Predictor(staging, "fp32", batch_size=PARITY_BATCH)
    encoded = fp32.encode(onnx_check.requests_for(source.task, examples.select(range(
        min(PARITY_EXAMPLES, len(examples))))))
    difference = onnx_export.parity(model, staging / bundle.MODEL_FILES["fp32"],
                                    [feed for _, feed in fp32.batches(encoded.encodings)])
    manifest["parity"] = {"examples": min(PARITY_EXAMPLES, len(examples)), "max_abs_diff": difference,
                          "tolerance": onnx_export.PARITY_TOLERANCE}
    tracking.log_metrics({"parity_max_abs_diff": difference})
    if not difference <= onnx_export.PARITY_TOLERANCE:  # NaN fails too
        raise UserError(f"parity check failed: max |Δlogit| {difference:.3g} between PyTorch and onnxruntime "
                        f"fp32 on {manifest['parity']['examples']} {source.task.name} dev examples exceeds "
                        f"{onnx_export.PARITY_TOLERANCE:g}; no bundle written (report this model and opset "
                        f"{onnx_export.OPSET} as a bug)")
    del model
    if job.quantize == "int8":
        onnx_export.quantize_int8(staging / bundle.MODEL_FILES["fp32"], staging / bundle.MODEL_FILES["int8"])
        manifest["files"] |= bundle.file_entries(staging, [bundle.MODEL_FILES["int8"]])
        _write_manifest(staging, manifest)
    manifest["quality"] = _quality(source.task, staging, examples, job.quantize == "int8",
                                   source.qa["null_threshold"] if source.qa else 0.0)
    return manifest


def _quality(task: GlueTask | SquadTask, staging: Path, examples: Dataset, int8: bool,
             null_threshold: float) -> dict:
    """Dev scores of each precision through the runtime; warns when int8 misses its target."""
    precisions = ["fp32", "int8"] if int8 else ["fp32"]
    results = {p: onnx_check.dev_predictions(Predictor(staging, p), task, examples) for p in precisions}
    scores = {p: onnx_check.dev_scores(task, examples, results[p], null_threshold) for p in precisions}
    quality = {"examples": len(examples), "metrics": list(task.metrics)} | scores
    for precision, values in scores.items():
        tracking.log_metrics({f"dev_{name}_{precision}": value for name, value in values.items()})
    if int8:
        quality["int8_vs_fp32"] = onnx_check.agreement(results["fp32"], results["int8"])
        tracking.log_metrics({f"int8_{k}": v for k, v in quality["int8_vs_fp32"].items()})
        fp32_points, int8_points = (onnx_check.points(task, scores[p]["score"]) for p in ("fp32", "int8"))
        delta = int8_points - fp32_points
        quality |= {"int8_delta_points": delta, "int8_target_points": -INT8_TARGET_POINTS,
                    "int8_target_met": delta >= -INT8_TARGET_POINTS}
        tracking.log_metrics({"int8_delta_points": delta})
        if not quality["int8_target_met"]:
            print(f"harness: warning: int8 scores {-delta:.2f} points below fp32 on {len(examples)} "
                  f"{task.name} dev examples (target: at most {INT8_TARGET_POINTS:g}); deploy model.onnx "
                  "(--precision fp32) if that matters", file=sys.stderr)
    return quality


def _write_manifest(staging: Path, manifest: dict) -> None:
    """manifest.json with its own checksum, taken over the JSON as it will be read back."""
    path = staging / bundle.MANIFEST
    atomic.write_json(path, manifest)
    written = json.loads(path.read_text(encoding="utf-8"))
    atomic.write_json(path, written | {bundle.SEAL: bundle.manifest_digest(written)})


def _manifest(source: Source, tokenizer, staging: Path, files: list[str]) -> dict:
    task = source.task
    labels = None if isinstance(task, SquadTask) or task.is_regression else list(task.label_names)
    return bundle.new_manifest(staging, files, {
        "task": task.name, "kind": source.checkpoint.kind, "labels": labels, "max_length": source.max_length,
        "pad_token_id": tokenizer.pad_token_id or 0, "inputs": list(bundle.INPUT_NAMES),  # masked anyway
        "outputs": list(source.checkpoint.output_names), **({"qa": source.qa} if source.qa else {}),
        "opset": onnx_export.OPSET,
        "source": {"model": source.model_name, "model_id": source.model_id,
                   "model_dir": str(source.checkpoint.path), "seed": source.seed,
                   "run_dir": str(source.run_dir) if source.run_dir else None,
                   "architecture": source.checkpoint.architecture}})


def _log_models(output: Path, manifest: dict, tags: dict[str, str]) -> None:
    """Each ONNX model as an MLflow onnx-flavour model, tagged like the fine-tuning runs."""
    import mlflow
    import onnx
    import onnxruntime

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bars in an export's output
    requirements = [f"onnxruntime=={onnxruntime.__version__}", f"onnx=={onnx.__version__}"]
    for precision, file_name in bundle.MODEL_FILES.items():
        if file_name in manifest["files"]:
            mlflow.onnx.log_model(onnx.load(str(output / file_name)), name=f"onnx-{precision}",
                                  pip_requirements=requirements, tags=tags | {"precision": precision},
                                  extra_files=[str(output / bundle.MANIFEST), str(output / bundle.TOKENIZER)])


def _params(job: ExportJob, source: Source) -> dict:
    return {"task": source.task.name, "quantize": job.quantize or "none", "opset": onnx_export.OPSET,
            "max_length": source.max_length, "max_eval_examples": job.max_eval_examples} | source.qa


def _tokenizer(path: Path):
    from harness.run_records import load_tokenizer

    return load_tokenizer(str(path))


def _default_output(source: Source) -> Path:
    if source.run_dir is not None:
        return source.run_dir / "onnx" / f"{source.task.name}-seed{source.seed}"
    return Path("runs/onnx") / f"{source.checkpoint.path.name}-{source.task.name}"


def _check_output(output: Path) -> None:
    if output.exists() and any(output.iterdir()) and not (output / bundle.MANIFEST).is_file():
        raise UserError(f"--output {str(output)!r} is not empty and holds no bundle; choose a new --output "
                        "or delete it")


def summary(manifest: dict) -> str:
    """What was exported, its parity and dev scores, and where it went."""
    source, parity, quality = manifest["source"], manifest["parity"], manifest["quality"]
    seed = "" if source["seed"] is None else f" seed {source['seed']}"
    lines = [f"exported {manifest['task']}{seed} ({source['architecture']}) from {source['model_dir']}",
             f"  parity, PyTorch vs onnxruntime fp32 on {parity['examples']} dev examples: "
             f"max |Δ| {parity['max_abs_diff']:.2e} (tolerance {parity['tolerance']:g})"]
    for precision in ("fp32", "int8"):
        if precision in quality:
            values = ", ".join(f"{name} {quality[precision][name]:.4f}" for name in quality["metrics"])
            lines.append(f"  dev {precision} on {quality['examples']} examples: {values}")
    if "int8_delta_points" in quality:
        verdict = "ok" if quality["int8_target_met"] else "MISSED"
        same = quality["int8_vs_fp32"].get("same_prediction")
        lines.append(f"  int8 - fp32: {quality['int8_delta_points']:+.2f} points (target >= "
                     f"{quality['int8_target_points']:+g}) {verdict}"
                     + (f"; same prediction on {100 * same:.1f}% of examples" if same is not None else ""))
    sizes = ", ".join(f"{name} {entry['bytes'] / 1e6:.1f} MB" for name, entry in manifest["files"].items())
    lines += [f"  files: {sizes}", f"bundle: {manifest['output']}  (MLflow run {manifest['mlflow_run_id']})"]
    return "\n".join(lines)

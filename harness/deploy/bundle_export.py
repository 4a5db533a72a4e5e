"""`harness export onnx`: a fine-tuned checkpoint to a checked deployment bundle, logged to MLflow.

Order: resolve the checkpoint and read the dev data (bad input fails in seconds), export into a
staging directory, check parity against PyTorch (fail above PARITY_TOLERANCE), quantise, score fp32
and int8 on dev through the runtime, write the manifest, then move the bundle into place.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets import Dataset

from foundation.infra import atomic
from foundation.infra.errors import UserError
from harness.deploy import bundle, onnx_check, onnx_export
from harness.deploy.exporting import exporter_of
from harness.deploy.onnx_predictor import Predictor
from harness.deploy.onnx_source import Source, resolve_source
from harness.tracking import mlflow_runs

PARITY_EXAMPLES = 64  # dev examples compared with PyTorch, in batches of PARITY_BATCH (several shapes)
PARITY_BATCH = 16
INT8_TARGET_POINTS = 1.0  # int8 may score at most this many points below fp32 on dev


@dataclass(frozen=True)
class ExportJob:
    """What to export (a run's task and seed, or a checkpoint directory) and where."""

    task: str
    run_dir: Path | None = None
    model_dir: str | Path | None = None  # a checkpoint directory or Hub id
    seed: int | None = None
    output: Path | None = None
    quantize: str | None = None
    data_dir: str | None = None
    max_eval_examples: int = 1000
    tracking_uri: str | None = None


def export(job: ExportJob) -> dict:
    """Write the bundle and log it; returns its manifest."""
    started = time.perf_counter()
    source = resolve_source(job.task, job.run_dir, job.model_dir, job.seed)
    output = job.output or _default_output(source)
    # Two exports into one --output would each replace the folder under the other (atomic_dir keeps one
    # whole, but both would log a bundle as theirs): the second is refused while the first holds it.
    with atomic.exclusive(output.parent / f".{output.name}.export.lock",
                          f"another `harness export onnx` is writing {str(output)!r}; wait for it to finish "
                          "or choose another --output"):
        return _export(job, source, output, started)


def _export(job: ExportJob, source: Source, output: Path, started: float) -> dict:
    _check_output(output)
    examples = dev_examples(source.task, job.data_dir, job.max_eval_examples, source.data)
    tokenizer = _tokenizer(source.checkpoint.path)
    # model_id is the leaderboard row's key: a row's ONNX models are found by that tag.
    tags = {"model": source.model_name, "model_id": source.model_id, "task": source.task.name,
            "run_dir": str(source.run_dir or ""),
            "model_dir": str(source.checkpoint.path), "seed": "" if source.seed is None else str(source.seed)}
    mlflow_runs.use_experiment("export", job.tracking_uri)
    name = f"{source.task.name} onnx export"
    with mlflow_runs.run(name, params=_params(job, source), tags=tags) as active:
        with atomic.atomic_dir(output) as staging:  # replaces an older bundle only once this one is whole
            manifest = _build(source, job, tokenizer, examples, staging)
            manifest["mlflow_run_id"] = active.info.run_id if active else None  # None: tracking off
            manifest["export_time_s"] = time.perf_counter() - started
            _write_manifest(staging, manifest)  # files and folder get the umask's modes, like any output
        _log_models(output, manifest, tags)
    return manifest | {"output": str(output)}


def dev_examples(task: Any, data_dir: str | None, limit: int, data: dict | None = None) -> Dataset:
    """The first `limit` examples of the task's (first) dev split, in file order (your own task: as its
    run read it, from the files results.json names, refused if they changed since; tagging: sentences,
    their words and gold tags)."""
    if limit < PARITY_EXAMPLES:
        raise UserError(f"--max-eval-examples {limit} is below the {PARITY_EXAMPLES} the parity check uses; "
                        f"pass {PARITY_EXAMPLES} or more")
    examples = exporter_of(task).dev_examples(task, data_dir, data)
    return examples.select(range(min(limit, len(examples))))


def _build(source: Source, job: ExportJob, tokenizer, examples: Dataset, staging: Path) -> dict:
    """Export, parity, quantisation and dev scores into `staging`; returns the manifest."""
    model = onnx_export.load_model(source.checkpoint, onnx_export.input_names(source.checkpoint, tokenizer))
    onnx_export.export_onnx(model, staging / bundle.MODEL_FILES["fp32"])
    onnx_export.save_tokenizer(tokenizer, staging / bundle.TOKENIZER)
    manifest = _manifest(source, tokenizer, staging, [bundle.MODEL_FILES["fp32"], bundle.TOKENIZER],
                         model.input_names)
    _write_manifest(staging, manifest)
    fp32 = Predictor(staging, "fp32", batch_size=PARITY_BATCH)
    encoded = fp32.encode(onnx_check.requests_for(source.task, examples.select(range(
        min(PARITY_EXAMPLES, len(examples))))))
    difference = onnx_export.parity(model, staging / bundle.MODEL_FILES["fp32"],
                                    [feed for _, feed in fp32.batches(encoded.encodings)])
    manifest["parity"] = {"examples": min(PARITY_EXAMPLES, len(examples)), "max_abs_diff": difference,
                          "tolerance": onnx_export.PARITY_TOLERANCE}
    mlflow_runs.log_metrics({"parity_max_abs_diff": difference})
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
    manifest["quality"] = _quality(source.task, staging, examples, job.quantize == "int8", source.settings)
    return manifest


def _quality(task: Any, staging: Path, examples: Dataset, int8: bool, settings: dict) -> dict:
    """Dev scores of each precision through the runtime; warns when int8 misses its target."""
    precisions = ["fp32", "int8"] if int8 else ["fp32"]
    results = {p: onnx_check.dev_predictions(Predictor(staging, p), task, examples) for p in precisions}
    scores = {p: onnx_check.dev_scores(task, examples, results[p], settings) for p in precisions}
    quality = {"examples": len(examples), "metrics": list(task.metrics)} | scores
    for precision, values in scores.items():
        mlflow_runs.log_metrics({f"dev_{name}_{precision}": value for name, value in values.items()})
    if int8:
        quality["int8_vs_fp32"] = onnx_check.agreement(task, results["fp32"], results["int8"])
        mlflow_runs.log_metrics({f"int8_{k}": v for k, v in quality["int8_vs_fp32"].items()})
        fp32_points, int8_points = (onnx_check.points(task, scores[p]["score"]) for p in ("fp32", "int8"))
        delta = int8_points - fp32_points
        quality |= {"int8_delta_points": delta, "int8_target_points": -INT8_TARGET_POINTS,
                    "int8_target_met": delta >= -INT8_TARGET_POINTS}
        mlflow_runs.log_metrics({"int8_delta_points": delta})
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


def _manifest(source: Source, tokenizer, staging: Path, files: list[str], inputs: Sequence[str]) -> dict:
    task, exporter = source.task, source.exporter
    return bundle.new_manifest(staging, files, exporter.own_fields(task) | {
        "task": task.name, "kind": source.checkpoint.pipeline, "labels": exporter.labels(task),
        "max_length": source.max_length, "pad_token_id": tokenizer.pad_token_id or 0,  # padding is masked
        "inputs": list(inputs), "outputs": list(source.checkpoint.output_names),
        **exporter.runtime_fields(source.settings), "opset": onnx_export.OPSET,
        "source": {"model": source.model_name, "model_id": source.model_id,
                   "model_dir": str(source.checkpoint.path), "seed": source.seed,
                   "run_dir": str(source.run_dir) if source.run_dir else None,
                   "architecture": source.checkpoint.architecture}})


def _log_models(output: Path, manifest: dict, tags: dict[str, str]) -> None:
    """Each ONNX model as an MLflow onnx-flavour model, tagged like the fine-tuning runs."""
    if mlflow_runs.tracking_off():
        return
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
            "max_length": source.max_length, "max_eval_examples": job.max_eval_examples} | source.settings


def _tokenizer(path: Path):
    from harness.finetuning.model_setup import load_tokenizer

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
                     + (f"; same prediction on {100 * same:.1f}% of examples" if same is not None else "")
                     + (f", same tag on {100 * quality['int8_vs_fp32']['same_tags']:.1f}% of words"
                        if "same_tags" in quality["int8_vs_fp32"] else ""))
    sizes = ", ".join(f"{name} {entry['bytes'] / 1e6:.1f} MB" for name, entry in manifest["files"].items())
    lines += [f"  files: {sizes}", f"bundle: {manifest['output']}  (MLflow run {manifest['mlflow_run_id']})"]
    return "\n".join(lines)

"""`harness run glue`: every task x seed through the one loop, recorded in results.json and MLflow."""

from __future__ import annotations

import dataclasses
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers

from harness import outputs, tracking
from harness.config import as_dict
from pretrain.errors import UserError
from pretrain.models import resolve_model, size_of
from tasks import batching, glue, metrics
from tasks.finetune import FinetuneConfig, finetune, use_bf16
from tasks.glue_data import glue_dir, load_glue
from tasks.registry import GLUE_TASKS, GlueTask

RESULTS_FORMAT = "electra-harness/glue-results/1"


@dataclass(frozen=True)
class GlueRun:
    """One invocation: which model, tasks and seeds, where the data and outputs live."""

    model: str
    tasks: tuple[GlueTask, ...]
    output_dir: Path
    config: FinetuneConfig = FinetuneConfig()
    seeds: int = 1
    data_dir: str | None = None
    tracking_uri: str | None = None


def run_glue(run: GlueRun, progress: bool | None = None) -> dict:
    """Fine-tune and evaluate; resumes (task, seed) pairs already in output_dir/results.json."""
    if run.seeds < 1:
        raise UserError(f"--seeds must be at least 1 (got {run.seeds})")
    started = time.perf_counter()
    model_path = resolve_model(run.model)
    tokenizer = _tokenizer(model_path)
    model_config = transformers.AutoConfig.from_pretrained(model_path)
    size = size_of(model_config.hidden_size)
    # Read and validate every task's data before any training: bad input fails in seconds.
    data_dir = glue_dir(run.data_dir)
    data = {task.name: load_glue(task, data_dir) for task in run.tasks}
    results = _resume(run, model_path)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # SDPA attention in bf16 is slow on CPUs; eager is faster there (STACK.md).
    attention = "eager" if device.type == "cpu" and use_bf16(run.config.precision, device) else "sdpa"
    results["precision"] = "bf16" if use_bf16(run.config.precision, device) else "fp32"
    tracking.setup("glue", run.tracking_uri)
    with tracking.run(f"{Path(run.model).name} glue", params=as_dict(run.config),
                      tags={"model": run.model, "tasks": ",".join(t.name for t in run.tasks)}):
        for task in (t for t in run.tasks if t.predicted_by is None):
            extra = {"ax": data["ax"]["test"]} if task.name == "mnli" and "ax" in data else None
            built = glue.build_task(task, data[task.name], tokenizer, run.config.max_length,
                                    run.config.max_train_examples, extra)
            config = run.config.resolved(size, task.num_epochs)
            for seed in range(run.config.seed, run.config.seed + run.seeds):
                if any(r["task"] == task.name and r["seed"] == seed for r in results["runs"]):
                    continue
                seeded = dataclasses.replace(config, seed=seed)
                record = _one(run, built, seeded, model_path, tokenizer, attention, device, progress)
                results["runs"].append(record)
                outputs.write_json(run.output_dir / "results.json", results)
    results["summary"] = summarize(results["runs"], run.tasks)
    results["glue_score"] = metrics.glue_score(
        {name: s["score"]["median"] for name, s in results["summary"].items()})
    results["wall_time_s"] = results.get("wall_time_s", 0.0) + time.perf_counter() - started
    _write_submission(run.output_dir, results)
    outputs.write_json(run.output_dir / "results.json", results)
    return results


def _tokenizer(model_path: str):
    try:
        return transformers.AutoTokenizer.from_pretrained(model_path)
    except (OSError, ValueError, TypeError) as error:
        raise UserError(f"no usable tokenizer in {model_path!r} ({type(error).__name__}); save one there "
                        "with tokenizer.save_pretrained()") from error


def _resume(run: GlueRun, model_path: str) -> dict:
    path = run.output_dir / "results.json"
    fresh = {"format": RESULTS_FORMAT, "model": {"name": run.model, "path": model_path},
             "config": as_dict(run.config), "tasks": [t.name for t in run.tasks], "seeds": run.seeds,
             "runs": [], "flops": None, "device": platform.processor() or platform.machine(),
             "versions": {"torch": torch.__version__, "transformers": transformers.__version__}}
    if not path.is_file():
        return fresh
    import json

    previous = json.loads(path.read_text())
    if previous.get("format") != RESULTS_FORMAT or previous.get("config") != fresh["config"] \
            or previous["model"]["path"] != model_path:
        raise UserError(f"{str(run.output_dir)!r} holds results of another model or config; pass a new "
                        "--output-dir or delete that one")
    return previous | {"tasks": fresh["tasks"], "seeds": run.seeds}


def _one(run: GlueRun, built: glue.GlueFinetuneTask, config: FinetuneConfig, model_path: str,
         tokenizer, attention: str, device: torch.device, progress: bool | None) -> dict:
    """Fine-tune one seed of one task inside its own nested MLflow run."""
    task = built.task
    transformers.set_seed(config.seed)
    model = glue.load_model(model_path, task, attention).to(device)
    tags = {"model": run.model, "task": task.name, "seed": str(config.seed)}
    with tracking.run(f"{task.name} seed {config.seed}", params=as_dict(config), tags=tags, nested=True):
        result = finetune(model, built, config, batching.collator(tokenizer),
                          on_epoch=lambda epoch, row: tracking.log_metrics(row, step=epoch),
                          progress=progress)
        final = {f"final_{split}_{name}": value for split, values in result.metrics.items()
                 for name, value in values.items()}
        final["final_score"] = task_score(result.metrics)
        tracking.log_metrics(final | {"train_examples_per_s": result.train_examples_per_s,
                                      "train_time_s": result.train_time_s})
    stem = run.output_dir / "predictions" / f"{task.name}-seed{config.seed}"
    for split, split_outputs in result.outputs.items():
        lines = [f"{index}\t{label}" for index, label in
                 zip(built.indices[split], built.label_strings(split_outputs), strict=True)]
        outputs.write_text(stem / f"{split}.tsv", "index\tprediction\n" + "\n".join(lines) + "\n")
    if config.save_models:
        model_dir = run.output_dir / "models" / f"{task.name}-seed{config.seed}"
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
    return {"task": task.name, "seed": config.seed, "metrics": result.metrics, "score": final["final_score"],
            "history": result.history, "num_train_steps": result.num_train_steps,
            "num_train_examples": len(built.train), "train_time_s": result.train_time_s,
            "train_examples_per_s": result.train_examples_per_s,
            "train_tokens_per_s": result.train_tokens_per_s, "resolved_config": as_dict(config)}


def task_score(split_metrics: dict[str, dict[str, float]]) -> float:
    """A task's score: mean over its dev splits (MNLI m/mm) of each split's metric mean."""
    return statistics.fmean(values["score"] for values in split_metrics.values())


def summarize(runs: list[dict], tasks: tuple[GlueTask, ...]) -> dict[str, dict]:
    """Per task: median/mean/std/best over seeds of the score and of each metric."""
    summary = {}
    for task in tasks:
        mine = [r for r in runs if r["task"] == task.name]
        if not mine:
            continue
        columns = {"score": [r["score"] for r in mine]}
        for split in mine[0]["metrics"]:
            for name in task.metrics:
                label = name if len(mine[0]["metrics"]) == 1 else f"{split}_{name}"
                columns[label] = [r["metrics"][split][name] for r in mine]
        summary[task.name] = {label: metrics.summarize(values) for label, values in columns.items()}
        summary[task.name]["train_examples_per_s"] = statistics.fmean(r["train_examples_per_s"] for r in mine)
        summary[task.name]["train_time_s"] = sum(r["train_time_s"] for r in mine)
    return summary


def _write_submission(output_dir: Path, results: dict) -> None:
    """GLUE server files from each task's best-dev seed, zipped; tasks without test data are skipped."""
    files = {}
    for task_name in results["summary"]:
        task = GLUE_TASKS[task_name]
        best = max((r for r in results["runs"] if r["task"] == task_name), key=lambda r: r["score"])
        targets = dict(task.submission)
        if task_name == "mnli":
            targets["ax"] = GLUE_TASKS["ax"].submission["test"]  # AX is predicted by the MNLI model
        for split, file_name in targets.items():
            path = output_dir / "predictions" / f"{task_name}-seed{best['seed']}" / f"{split}.tsv"
            if path.is_file():
                files[file_name] = path.read_text()
    if files:
        outputs.write_zip(output_dir / "glue_submission.zip", files)

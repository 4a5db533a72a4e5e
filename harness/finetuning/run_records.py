"""What `harness run glue` and `harness run squad` share: model and device set-up, a resumable
results.json, and the MLflow and results bookkeeping around each (task, seed) fine-tuning."""

from __future__ import annotations

import json
import platform
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import transformers

from harness.config import as_dict
from harness.tracking import mlflow_runs
from pretrain.common import atomic, placement
from pretrain.common.errors import UserError
from pretrain.common.models import resolve_model, size_of
from reports import dev_outputs, intervals, stats
from tasks import metrics
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult


@dataclass(frozen=True)
class Setup:
    """The resolved model and where it runs."""

    model_path: str
    tokenizer: transformers.PreTrainedTokenizerBase
    model_config: transformers.PretrainedConfig
    size: str  # recipe row: small, base or large
    device: torch.device
    attention: str  # attn_implementation
    precision: str  # "bf16" or "fp32", as used


def setup(model: str, precision: str) -> Setup:
    """Resolve --model, load its tokenizer and config, and pick the device, attention and precision."""
    model_path = resolve_model(model)
    model_config = load_model_config(model_path)  # first: the tokenizer reads config.json too
    tokenizer = load_tokenizer(model_path)
    device = placement.pick_device("auto")
    used = placement.resolve_precision(precision, device)
    attention = placement.resolve_attention("auto", device, used)
    return Setup(model_path, tokenizer, model_config, size_of(model_config.hidden_size), device, attention,
                 used)


def load_model_config(model_path: str) -> transformers.PretrainedConfig:
    """The checkpoint's config, or a UserError naming config.json and what is wrong with it."""
    from huggingface_hub.errors import StrictDataclassError  # a field of the wrong type

    path = _config_json(model_path)
    try:
        return transformers.AutoConfig.from_pretrained(model_path)
    except (OSError, ValueError, TypeError, StrictDataclassError) as error:
        reason = " ".join(str(error).split())
        raise UserError(f"{path!r} is not a usable model config ({reason}); restore it or save the model "
                        "again with save_pretrained()") from error


def _config_json(model_path: str) -> str:
    """Path of model_path's config.json, after checking it is JSON: a broken one breaks every loader."""
    path = Path(model_path) / "config.json"
    if not path.exists():
        return str(path)  # a tokenizer folder may lack one; AutoConfig says so itself
    try:
        json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{str(path)!r} is not valid JSON ({error}); restore it or save the model again "
                        "with save_pretrained()") from error
    return str(path)


def load_tokenizer(model_path: str):
    _config_json(model_path)
    try:
        return transformers.AutoTokenizer.from_pretrained(model_path)
    except (OSError, ValueError, TypeError) as error:
        raise UserError(f"no usable tokenizer in {model_path!r} ({type(error).__name__}); save one there "
                        "with tokenizer.save_pretrained()") from error


def fresh_results(results_format: str, model: str, model_path: str, config: FinetuneConfig,
                  tasks: Sequence[str], seeds: int, **extra) -> dict:
    """A new results.json body; `extra` keys (settings, data) sit beside config."""
    return {"format": results_format, "model": {"name": model, "path": model_path}, "config": as_dict(config),
            **extra, "tasks": list(tasks), "seeds": seeds, "runs": [], "flops": None,
            "device": platform.processor() or platform.machine(),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__}}


def train_seeds(results: dict, task: str, config: FinetuneConfig, seeds: range,
                train: Callable[[FinetuneConfig], dict], save: Callable[[], None]) -> None:
    """Each seed of `task` not done yet, trained by `train` (config with that seed -> its run record):
    the record goes to results["runs"], or to results["diverged"] when its loss went non-finite (its
    MLflow run ends FAILED; the other seeds go on). `save` is called after every seed."""
    kept = [seed for seed in seeds if is_done(results, task, seed)]
    if kept:  # a resume: say what it keeps, so the user knows what this invocation will (not) train
        left = [seed for seed in seeds if seed not in kept]
        rest = f"training {_seeds(left)}" if left else "nothing left to train"
        print(f"resume {task}: kept {_seeds(kept)} from results.json; {rest}")
    for seed in seeds:
        if is_done(results, task, seed):
            continue
        seed_config = replace(config, seed=seed)
        try:
            results["runs"].append(train(seed_config))
        except FloatingPointError as error:
            results.setdefault("diverged", []).append(diverged_record(task, seed_config, error))
        save()


def _seeds(seeds: list[int]) -> str:
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def is_done(results: dict, task: str, seed: int) -> bool:
    """Finished, or diverged: the same seed and settings diverge again, so a resume does not retry it."""
    return any(r["task"] == task and r["seed"] == seed for r in results["runs"] + results.get("diverged", []))


def diverged_record(task: str, config: FinetuneConfig, error: FloatingPointError) -> dict:
    """A (task, seed) whose training loss went non-finite: kept apart from `runs`, out of every summary."""
    return {"task": task, "seed": config.seed, "error": str(error), "resolved_config": as_dict(config)}


def diverged_error(diverged: Sequence[dict], recorded_in: str = "results.json",
                   left_out_of: str = "the summaries",
                   fix: str = "re-run with a lower learning_rate into a new --output-dir",
                   ) -> UserError | None:
    """One line naming the diverged tasks and seeds (diverged_record dicts) and the fix, or None when no
    seed diverged. An experiment passes its arms' records with the arm in `task` and its own wording."""
    if not diverged:
        return None
    by_task: dict[str, list[str]] = {}
    for record in diverged:
        by_task.setdefault(record["task"], []).append(str(record["seed"]))
    named = ", ".join(f"{task} seed{'s' if len(seeds) > 1 else ''} {'/'.join(seeds)}"
                      for task, seeds in by_task.items())
    return UserError(f"{len(diverged)} fine-tuning{'s' if len(diverged) > 1 else ''} diverged ({named}: "
                     f"{diverged[0]['error']}); they are recorded as diverged in {recorded_in} and left out "
                     f"of {left_out_of}; {fix}")


def accelerator(device: torch.device) -> str:
    """What computed a run, for results.json: the GPU's name, or "cpu" (`device` names the host CPU)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def as_run(setup: Setup, config: FinetuneConfig) -> dict[str, str]:
    """The device-dependent settings as this run resolves them: precision and compile, never "auto"."""
    return {"precision": setup.precision,
            "compile": "on" if placement.resolve_compile(config.compile, setup.device) else "off"}


def parent_params(config: FinetuneConfig, resolved: Mapping[str, FinetuneConfig],
                  used: Mapping[str, str]) -> dict:
    """The invocation's settings as used, for its parent MLflow run: a value all tasks share under its own
    key, one that differs per task (num_epochs: 3 or 10) as `{task}.{key}`; `used` (as_run) overrides."""
    per_task = {task: as_dict(found) for task, found in resolved.items()}
    params = {}
    for key, value in as_dict(config).items():
        values = {task: found[key] for task, found in per_task.items()} or {"": value}
        if len(set(map(repr, values.values()))) == 1:
            params[key] = next(iter(values.values()))
        else:
            params |= {f"{task}.{key}": found for task, found in values.items()}
    return params | dict(used)


def nested_run(task: str, config: FinetuneConfig, model: str, settings: Mapping[str, object] | None = None):
    """The MLflow run of one (task, seed), inside the invocation's parent run; `settings` adds params."""
    tags = {"model": model, "task": task, "seed": str(config.seed)}
    params = as_dict(config) | dict(settings or {})
    return mlflow_runs.run(f"{task} seed {config.seed}", params=params, tags=tags, nested=True)


def log_epoch(epoch: int, row: dict[str, float]) -> None:
    mlflow_runs.log_metrics(row, step=epoch)


def log_final(result: FinetuneResult) -> float:
    """Log the final dev metrics and speed; return the run's score."""
    final = {f"final_{split}_{name}": value for split, values in result.metrics.items()
             for name, value in values.items()}
    final["final_score"] = task_score(result.metrics)
    mlflow_runs.log_metrics(final | {"train_examples_per_s": result.train_examples_per_s,
                                  "train_time_s": result.train_time_s})
    return final["final_score"]


def run_record(task: str, config: FinetuneConfig, result: FinetuneResult, score: float,
               num_train_examples: int, **extra) -> dict:
    """One (task, seed) row of results.json."""
    return {"task": task, "seed": config.seed, "metrics": result.metrics, "score": score,
            "history": result.history, "num_train_steps": result.num_train_steps,
            "num_train_examples": num_train_examples, "train_time_s": result.train_time_s,
            "train_examples_per_s": result.train_examples_per_s,
            "train_examples_seen": result.train_examples_seen,
            "train_tokens_per_s": result.train_tokens_per_s, **extra, "resolved_config": as_dict(config)}


def save_model(model: torch.nn.Module, tokenizer, directory: Path) -> None:
    """A fine-tuned checkpoint, whole or not at all (a killed run leaves the previous one)."""
    atomic.save_pretrained(directory, model, tokenizer)


def task_score(split_metrics: dict[str, dict[str, float]]) -> float:
    """A task's score: mean over its dev splits (MNLI m/mm) of each split's `score`."""
    return statistics.fmean(values["score"] for values in split_metrics.values())


def summarize(runs: list[dict], task_metrics: Mapping[str, Sequence[str]],
              diverged: Sequence[dict] = ()) -> dict[str, dict]:
    """Per task: median/mean/std/best over the finished seeds of the score and of each named metric,
    and `diverged_seeds`, how many seeds diverged (those are in `diverged`, never in `runs`)."""
    summary = {}
    for task, names in task_metrics.items():
        mine = [r for r in runs if r["task"] == task]
        if not mine:
            continue
        columns = {"score": [r["score"] for r in mine]}
        for split in mine[0]["metrics"]:
            for name in names:
                label = name if len(mine[0]["metrics"]) == 1 else f"{split}_{name}"
                columns[label] = [r["metrics"][split][name] for r in mine]
        summary[task] = {label: metrics.summarize(values) for label, values in columns.items()}
        summary[task]["train_examples_per_s"] = statistics.fmean(r["train_examples_per_s"] for r in mine)
        summary[task]["train_time_s"] = sum(r["train_time_s"] for r in mine)
        summary[task]["diverged_seeds"] = sum(r["task"] == task for r in diverged)
    return summary


def add_intervals(output_dir: Path, results: dict) -> dict[str, dict[str, stats.Estimate]]:
    """Intervals beside the summary's medians from the runs' dev outputs (tasks without them: none)."""
    estimates = {}
    for task in results["summary"]:
        seeds = sorted(r["seed"] for r in results["runs"] if r["task"] == task)
        splits = dev_outputs.load_task(output_dir, task, seeds)
        if splits is not None:
            estimates[task] = intervals.task_estimates(task, splits)
    intervals.add_to_summary(results["summary"], estimates)
    return estimates


def log_intervals(summary: Mapping[str, dict], glue: Mapping | None = None) -> None:
    """Medians and interval bounds of the active (parent) run as MLflow metrics."""
    values = {}
    for task, labels in summary.items():
        for label, found in labels.items():
            if isinstance(found, dict) and "median" in found:
                values |= {f"{task}_{label}_{key}": found[key] for key in ("median", "ci_low", "ci_high")
                           if key in found}
    if glue:
        values |= {f"glue_score{suffix}": glue[key] for key, suffix in
                   (("score", ""), ("ci_low", "_ci_low"), ("ci_high", "_ci_high")) if key in glue}
    mlflow_runs.log_metrics(values)

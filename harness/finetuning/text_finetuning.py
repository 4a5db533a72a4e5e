"""Your own labelled files' part of `harness run|eval|search text`: seeds through the one orchestration."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import transformers
from datasets import Dataset

from foundation.infra import atomic
from foundation.infra.errors import UserError
from harness.finetuning import evaluation, model_setup, text_predictions
from harness.finetuning.kind_runner import Job, Searched
from harness.finetuning.model_setup import ModelSetup
from harness.finetuning.orchestration import FinetuningPlan, fresh_results, run_finetuning
from reports import dev_outputs, results_schema, seed_summary
from tasks import glue_head, sequence_features, text, text_data
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult

RESULTS_FORMAT = results_schema.TEXT_FORMAT
PREDICTIONS = "{split}.jsonl"
AGGREGATE = "mean_logits"  # long_text=windows: a text's answer is the mean of its windows' logits


def run_text(invocation: Job, progress: bool | None = None) -> results_schema.ResultsBody:
    """Fine-tune and evaluate; resumes seeds already in output_dir/results.json (on the same data)."""
    return run_finetuning(invocation, TextFinetuning(invocation), progress)


@dataclass(frozen=True, kw_only=True)
class TextPlan(FinetuningPlan):
    """The data read and validated, the task resolved from it."""

    data: text_data.TextData
    weights: tuple[float, ...] | None = None  # each label's loss weight (class_weights); None: unweighted


def load_model(built: text.TextAdapter, config: FinetuneConfig, setup: ModelSetup) -> torch.nn.Module:
    return text.load_model(setup.model_path, built.task, config.head, **setup.load_options)


class TextFinetuning:
    """Your own data's part of the one orchestration: read files, a classifier, named predictions."""

    experiment = "text"
    head_architecture = "ForSequenceClassification"
    results_format = RESULTS_FORMAT
    same = ("format", "config", "data")  # `data` holds each file's sha256: a changed file is refused
    leaderboard = True
    weighs_classes = True  # class_weights: its adapters train on a class-weighted loss (tasks/text.py)
    reads_windows = True  # long_text=windows: its adapters read a long text as windows (tasks/text.py)

    def __init__(self, invocation: Job):
        self.invocation = invocation
        self.leaderboard = invocation.leaderboard

    def prepare(self, setup: ModelSetup) -> TextPlan:
        model_setup.require(setup, transformers.AutoModelForSequenceClassification, "a text task")
        trained = _checkpoint_labels(setup.model_config) if self.invocation.evaluate_only else None
        data = text_data.read(self.invocation.description, self.invocation.task_file_dir, trained)
        task = data.task
        # the recipe's length, or fewer where the model has fewer positions
        config = model_setup.fitted(self.invocation.config, setup, task.num_epochs, task.max_length,
                                    setup.head)
        hidden = getattr(setup.model_config, "hidden_size", None)
        if config.head == "electra" and hidden is not None and 2 * task.num_labels > hidden:
            raise UserError(f"head=electra writes {task.num_labels} labels into a head of hidden size "
                            f"{hidden}, which holds at most {hidden // 2}; pass head=hf")
        drawn = data.record.get("dev")
        if drawn:
            print(f"note: no dev file, so {drawn['dev_rows']} of the training rows are the dev split "
                  f"(dev_fraction={drawn['fraction']}, dev_seed={drawn['seed']}); results.json records it",
                  file=sys.stderr)
        weights = text.loss_weights(task, text.training_rows(data.splits["train"], config.max_train_examples),
                                    config.class_weights)
        weighted = {"class_weights": {task.name: dict(zip(task.label_names, weights, strict=True))}} \
            if weights else {}
        searched = {"search": self.invocation.search} if self.invocation.search else {}
        config, windowed = _long_text(task, config, setup)
        return TextPlan(task.name, (task.name,), {task.name: config},
                        results={"data": data.record} | windowed | weighted | searched, data=data,
                        weights=weights)

    def build(self, plan: TextPlan, task: str, setup: ModelSetup) -> text.TextAdapter:
        config = plan.configs[task]
        splits: dict[str, Dataset] = {s: d for s, d in plan.data.splits.items()
                                      if config.predict_test or not s.startswith("test")}
        return text.build_task(plan.data.task, splits, setup.tokenizer, config.max_length,
                               config.max_train_examples, plan.weights, config.window_overlap)

    load_model = staticmethod(load_model)
    load_checkpoint = staticmethod(evaluation.classifier_checkpoint)

    def write_predictions(self, plan: TextPlan, built: text.TextAdapter, config: FinetuneConfig,
                          result: FinetuneResult, stem: Path) -> dict:
        """Per split, one JSON line per row (text_predictions.lines: its row, text, gold label and prediction
        by name); and the dev outputs."""
        for split, outputs in result.outputs.items():
            rows = text_predictions.lines(built.task, plan.data.splits[split], built.named(outputs),
                                          split in plan.data.labelled)
            atomic.write_text(stem / PREDICTIONS.format(split=split),
                              "".join(json.dumps(line) + "\n" for line in rows))
        task = built.task
        atomic.write_json(stem / dev_outputs.FILE, dev_outputs.record(task.name, config.seed, {
            split: dev_outputs.text_split(built.indices[split], built.references[split],
                                          built.predictions(result.outputs[split]).tolist(),
                                          dev_outputs.token_fingerprint(built.evals[split]["input_ids"]),
                                          task.metrics, task.headline)
            for split in task.dev_splits}))
        return {"num_train_examples": len(built.train)}

    def saved_model(self, model: torch.nn.Module, built: text.TextAdapter) -> torch.nn.Module:
        return glue_head.to_standard_head(model)  # ELECTRA's head as transformers' own: a plain checkpoint

    def summarize(self, results: results_schema.ResultsBody) -> None:
        task = results["data"]["task"]
        results["summary"] = seed_summary.summarize(results["runs"], {task["name"]: task["metrics"]},
                                                    results.get("diverged", ()))
        seed_summary.add_intervals(self.invocation.output_dir, results)


def _long_text(task: text.TextTask, config: FinetuneConfig,
               setup: ModelSetup) -> tuple[FinetuneConfig, dict]:
    """long_text=windows: the config with its window_overlap resolved, and results.json's `settings` block
    (which `harness export onnx` hands the bundle); truncate: as it is, no block."""
    if config.long_text == "truncate":
        return config, {}
    text.check_windows(task)
    overlap = sequence_features.window_overlap(config.window_overlap, config.max_length, setup.tokenizer)
    return replace(config, window_overlap=overlap), {"settings": {
        "long_text": "windows", "window_overlap": overlap, "aggregate": AGGREGATE}}


def _checkpoint_labels(model_config) -> text_data.CheckpointLabels:
    """A fine-tuned checkpoint's problem and label names (placeholder LABEL_k names are none)."""
    problems = {"single_label_classification": "classification", "regression": "regression",
                "multi_label_classification": "multilabel"}
    names = tuple(str(name) for _, name in sorted((getattr(model_config, "id2label", None) or {}).items()))
    placeholder = all(name == f"LABEL_{i}" for i, name in enumerate(names))
    return text_data.CheckpointLabels(problems.get(getattr(model_config, "problem_type", None) or ""),
                                      () if placeholder else names)


class TextRunner:
    """Your own text for the commands (harness/finetuning/kind_runner.py): its invocation, its table."""

    def run(self, job: Job) -> results_schema.ResultsBody:
        return run_text(with_task_weights(job), job.progress)

    def summary(self, results: results_schema.ResultsBody) -> str:
        from harness.finetuning.table import read_task_table

        return read_task_table(results)

    def search(self, job: Job) -> Searched:
        described = job.description
        return Searched(described.name or Path(described.train or described.dataset).stem,
                        TextFinetuning(with_task_weights(job)))

    def fresh_results(self, job: Job) -> tuple[dict, tuple[str, ...]]:
        job = with_task_weights(job)
        return fresh_results(job, TextFinetuning(job))

    def check_data(self, job: Job) -> None:
        """The described files (or dataset), read and validated as TextFinetuning.prepare reads them."""
        text_data.read(job.description, job.task_file_dir)



def with_task_weights(job: Job) -> Job:
    """The job with its task file's class weights as its class_weights setting, unless that was set: then
    results.json, tables and cards name the weights used as any other setting's departure."""
    config = job.config
    if not job.description.class_weights or config.class_weights != "none":
        return job
    weighted = replace(config, class_weights=job.description.class_weights)
    return replace(job, settings=(weighted, *job.settings[1:]))


KIND_RUNNER = TextRunner()

"""Tagging's part of `harness run|eval|search tagging`: CoNLL chunking, NER or your own tagged files x seeds
through the one orchestration."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers

from foundation.infra import atomic
from harness.finetuning import evaluation, model_setup
from harness.finetuning.kind_runner import Job, Searched
from harness.finetuning.model_setup import ModelSetup
from harness.finetuning.orchestration import FinetuningPlan, fresh_results, run_finetuning
from reports import dev_outputs, results_schema, seed_summary
from tasks import tagging, tagging_data, tagging_metrics
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult

RESULTS_FORMAT = results_schema.TAGGING_FORMAT
PREDICTIONS = "{split}.jsonl"


def run_tagging(invocation: Job, progress: bool | None = None) -> results_schema.ResultsBody:
    """Fine-tune and evaluate; resumes seeds already in output_dir/results.json (on the same data)."""
    return run_finetuning(invocation, TaggingFinetuning(invocation), progress)


@dataclass(frozen=True, kw_only=True)
class TaggingPlan(FinetuningPlan):
    """The data read and validated, the task resolved from it."""

    data: tagging_data.TaggingData


def load_model(built: tagging.TaggingAdapter, config: FinetuneConfig,
               setup: ModelSetup) -> torch.nn.Module:
    return tagging.load_model(setup.model_path, built.task, **setup.load_options)


class TaggingFinetuning:
    """Tagging's part of the one orchestration: read CoNLL/JSON Lines files, a token classifier, tags."""

    experiment = "tagging"
    head_architecture = "ForTokenClassification"
    results_format = RESULTS_FORMAT
    same = ("format", "config", "data")  # `data` holds each file's sha256: a changed file is refused
    leaderboard = True

    def __init__(self, invocation: Job):
        self.invocation = invocation
        self.leaderboard = invocation.leaderboard

    def prepare(self, setup: ModelSetup) -> TaggingPlan:
        model_setup.require(setup, transformers.AutoModelForTokenClassification, "a tagging task")
        data = tagging_data.read(self.invocation.description, self.invocation.task_file_dir)
        task = data.task
        # the recipe's length, or fewer where the model has fewer positions
        config = model_setup.fitted(self.invocation.config, setup, task.num_epochs, task.max_length, "hf")
        searched = {"search": self.invocation.search} if self.invocation.search else {}
        return TaggingPlan(task.name, (task.name,), {task.name: config},
                           results={"data": data.record} | searched, data=data)

    def build(self, plan: TaggingPlan, task: str, setup: ModelSetup) -> tagging.TaggingAdapter:
        config = plan.configs[task]
        splits = ("train", "validation", "test") if config.predict_test else ("train", "validation")
        return tagging.build_task(plan.data, setup.tokenizer, config.max_length,
                                  self.invocation.description.long_sentences, config.max_train_examples,
                                  splits)

    load_model = staticmethod(load_model)
    load_checkpoint = staticmethod(evaluation.token_classifier_checkpoint)

    def write_predictions(self, plan: TaggingPlan, built: tagging.TaggingAdapter, config: FinetuneConfig,
                          result: FinetuneResult, stem: Path) -> dict:
        """Per split, one JSON line per sentence: its file line, words and predicted tags (the files'
        scheme); and the dev outputs (conlleval's counts per sentence)."""
        for split, outputs in result.outputs.items():
            sentences = built.sentences[split]
            lines = [json.dumps({"line": s.line, "tokens": list(s.words), "tags": tags})
                     for s, tags in zip(sentences, built.predicted_tags(split, outputs), strict=True)]
            atomic.write_text(stem / PREDICTIONS.format(split=split), "\n".join(lines) + "\n")
        task = built.task
        blocks = {}
        for split in task.dev_splits:
            sentences = built.sentences[split]
            counts = built.counts(split, result.outputs[split])
            blocks[split] = dev_outputs.tagging_split(
                [s.line for s in sentences], tagging_metrics.flat_rows(counts), task.types,
                [s.tags for s in sentences], dev_outputs.token_fingerprint(built.evals[split]["input_ids"]),
                task.all_metrics, task.headline)
        atomic.write_json(stem / dev_outputs.FILE, dev_outputs.record(task.name, config.seed, blocks))
        return {"num_train_examples": len(built.train)}

    def saved_model(self, model: torch.nn.Module, built: tagging.TaggingAdapter) -> torch.nn.Module:
        return model

    def summarize(self, results: results_schema.ResultsBody) -> None:
        task = results["data"]["task"]
        results["summary"] = seed_summary.summarize(results["runs"], {task["name"]: task["metrics"]},
                                                    results.get("diverged", ()))
        seed_summary.add_intervals(self.invocation.output_dir, results)


class TaggingRunner:
    """Tagging for the commands (harness/finetuning/kind_runner.py): its invocation, its table."""

    def run(self, job: Job) -> results_schema.ResultsBody:
        return run_tagging(job, job.progress)

    def summary(self, results: results_schema.ResultsBody) -> str:
        """conlleval's figures over seeds (x100), F1 first, with intervals; what was scored."""
        from harness.finetuning.table import read_task_table

        scored = results["data"].get("scored")
        return read_task_table(results) + (f"\nscored: {scored['file']} ({scored['note']})" if scored else "")

    def search(self, job: Job) -> Searched:
        described = job.description
        return Searched(described.name or described.task or Path(described.train).stem,
                        TaggingFinetuning(job))

    def fresh_results(self, job: Job) -> tuple[dict, tuple[str, ...]]:
        job = job
        return fresh_results(job, TaggingFinetuning(job))

    def check_data(self, job: Job) -> None:
        """The described files, read and validated as TaggingFinetuning.prepare reads them."""
        tagging_data.read(job.description, job.task_file_dir)



KIND_RUNNER = TaggingRunner()

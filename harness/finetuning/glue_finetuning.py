"""GLUE's part of `harness run|eval|search glue`: every task x seed through the one orchestration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from datasets import Dataset

from foundation.infra import atomic
from foundation.infra.errors import UserError
from harness.finetuning import evaluation, mlflow_logging, model_setup
from harness.finetuning.kind_runner import Job, Searched
from harness.finetuning.model_setup import ModelSetup
from harness.finetuning.orchestration import FinetuningPlan, run_finetuning
from harness.tracking import mlflow_runs
from pretrain.vocab import shared_dir
from reports import dev_outputs, intervals, results_schema, seed_summary
from tasks import glue, glue_head, metrics
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult
from tasks.glue_data import glue_dir, load_glue
from tasks.registry import GLUE_CONVENTION, GLUE_TASKS, SERVER_FILES, GlueTask, predicted_with

RESULTS_FORMAT = results_schema.GLUE_FORMAT


@dataclass(frozen=True)
class GlueInvocation:
    """One `harness run glue`: which model, tasks and seeds, where the data and outputs live."""

    model: str
    tasks: tuple[GlueTask, ...]
    output_dir: Path
    config: FinetuneConfig = FinetuneConfig()
    seeds: int = 1
    data_dir: str | None = None
    tracking_uri: str | None = None
    # False where the caller adds the run to the leaderboard itself (an experiment's report stage)
    leaderboard: bool = True
    search: dict | None = None  # --params-from: the search that chose the settings (results.json `search`)
    evaluate_only: bool = False  # harness eval: score the fine-tuned checkpoint, train nothing


def run_glue(invocation: GlueInvocation, progress: bool | None = None) -> results_schema.ResultsBody:
    """Fine-tune and evaluate; resumes (task, seed) pairs already in output_dir/results.json."""
    return run_finetuning(invocation, GlueFinetuning(invocation), progress)


@dataclass(frozen=True, kw_only=True)
class GluePlan(FinetuningPlan):
    """GLUE's plan: beside the resolved settings, every task's splits, read and validated."""

    data: dict[str, dict[str, Dataset]]  # task -> split -> rows


def load_model(built: glue.GlueAdapter, config: FinetuneConfig, setup: ModelSetup) -> torch.nn.Module:
    """A fresh classifier with the task's head (a run's seed or a search trial's)."""
    return glue.load_model(setup.model_path, built.task, config.head, **setup.load_options)


class GlueFinetuning:
    """GLUE's part of the one orchestration: its tasks' data, classifiers, prediction files and summary."""

    experiment = "glue"
    head_architecture = "ForSequenceClassification"
    results_format = RESULTS_FORMAT
    same = ("format", "config")

    def __init__(self, invocation: GlueInvocation):
        self.invocation = invocation
        self.leaderboard = invocation.leaderboard
        self.tasks = {task.name: task for task in invocation.tasks}

    def prepare(self, setup: ModelSetup) -> GluePlan:
        model_setup.require(setup, transformers.AutoModelForSequenceClassification, "GLUE")
        invocation = self.invocation
        # Read and validate every task's data before any training: bad input fails in seconds.
        data_dir = glue_dir(invocation.data_dir, shared_glue())
        data = {task.name: load_glue(task, data_dir) for task in invocation.tasks}
        configs = {t.name: model_setup.fitted(invocation.config, setup, t.num_epochs, t.max_length,
                                              setup.head)
                   for t in invocation.tasks if t.predicted_by is None}
        return GluePlan("glue", tuple(t.name for t in invocation.tasks), configs,
                        results={"search": invocation.search} if invocation.search else {}, data=data)

    def build(self, plan: GluePlan, task: str, setup: ModelSetup) -> glue.GlueAdapter:
        config, data = plan.configs[task], plan.data
        splits = {s: d for s, d in data[task].items() if config.predict_test or not s.startswith("test")}
        riders = {t.name: data[t.name]["test"] for t in predicted_with(task)
                  if t.name in data and config.predict_test}
        return glue.build_task(self.tasks[task], splits, setup.tokenizer, config.max_length,
                               config.max_train_examples, riders or None, config.double_unordered,
                               config.head)

    load_model = staticmethod(load_model)
    load_checkpoint = staticmethod(evaluation.classifier_checkpoint)

    def write_predictions(self, plan: GluePlan, built: glue.GlueAdapter, config: FinetuneConfig,
                          result: FinetuneResult, stem: Path) -> dict:
        """Per split, index<TAB>prediction as the GLUE server reads it, and the dev outputs."""
        for split, split_outputs in result.outputs.items():
            lines = [f"{index}\t{label}" for index, label in
                     zip(built.indices[split], built.label_strings(split_outputs), strict=True)]
            atomic.write_text(stem / f"{split}.tsv", "index\tprediction\n" + "\n".join(lines) + "\n")
        atomic.write_json(stem / dev_outputs.FILE, dev_outputs.record(built.task.name, config.seed, {
            split: dev_outputs.glue_split(built.indices[split], built.references[split],
                                          built.predictions(result.outputs[split]).tolist(),
                                          dev_outputs.token_fingerprint(built.evals[split]["input_ids"]))
            for split in built.task.dev_splits}))
        return {"num_train_examples": len(built.train), "double_unordered": built.double_unordered}

    def saved_model(self, model: torch.nn.Module, built: glue.GlueAdapter) -> torch.nn.Module:
        # ELECTRA's head is written into transformers' own: a plain checkpoint, same predictions
        return glue_head.to_standard_head(model, built.target_scale)

    def summarize(self, results: results_schema.ResultsBody) -> None:
        """Summary with intervals, the GLUE average in the paper's convention (logged), the server zip."""
        output_dir = self.invocation.output_dir
        trained = {t: GLUE_TASKS[t].metrics for t in results["tasks"] if GLUE_TASKS[t].predicted_by is None}
        results["summary"] = seed_summary.summarize(results["runs"], trained, results.get("diverged", ()))
        estimates = seed_summary.add_intervals(output_dir, results)
        medians = {t: s[GLUE_TASKS[t].paper_label]["median"] for t, s in results["summary"].items()}
        results["glue_score"] = metrics.glue_average(medians)  # the paper's convention (registry)
        found = intervals.glue_estimate(list(medians), estimates)
        results["glue"] = results_schema.glue_section(results["glue_score"], found, list(medians))
        mlflow_logging.log_intervals(results["summary"], results["glue"])
        mlflow_runs.set_tag("glue_convention", GLUE_CONVENTION)
        results["submission"] = _write_submission(output_dir, results, self.invocation.config.predict_test)


def _write_submission(output_dir: Path, results: results_schema.ResultsBody,
                      predict_test: bool = True) -> results_schema.Submission:
    """GLUE server files from each task's best-dev seed, zipped; which of the server's files it lacks."""
    files = {}
    for task_name in results["summary"]:
        task = GLUE_TASKS[task_name]
        best = max((r for r in results["runs"] if r["task"] == task_name), key=lambda r: r["score"])
        targets = dict(task.submission)
        for rider in predicted_with(task_name):  # AX's file comes from the MNLI model's predictions
            targets[rider.name] = rider.submission["test"]
        for split, file_name in targets.items():
            path = output_dir / "predictions" / f"{task_name}-seed{best['seed']}" / f"{split}.tsv"
            if path.is_file():
                files[file_name] = path.read_text()
    if files:
        atomic.write_zip(output_dir / "glue_submission.zip", files)
    missing = [name for name in SERVER_FILES if name not in files]
    note = None
    fix = "run --tasks all (AX comes with MNLI) with test files in --data-dir for a complete one"
    if missing and files:  # the server rejects a zip without all of its files
        note = (f"glue_submission.zip lacks {len(missing)} of the {len(SERVER_FILES)} GLUE server files "
                f"({', '.join(missing)}) and cannot be submitted as it is; {fix}")
    elif missing and not predict_test:
        note = "no glue_submission.zip: test prediction was off (predict_test=false)"
    elif missing:
        note = (f"no glue_submission.zip: none of the {len(SERVER_FILES)} GLUE server files has test "
                f"predictions; {fix}")
    return results_schema.Submission(file="glue_submission.zip" if files else None, files=sorted(files),
                                     missing=missing, note=note)


class GlueRunner:
    """GLUE for the commands (harness/finetuning/kind_runner.py): its invocation from a Job, its table."""

    def run(self, job: Job) -> results_schema.ResultsBody:
        return run_glue(_invocation(job, job.description.glue_tasks()), job.progress)

    def summary(self, results: results_schema.ResultsBody) -> str:
        from harness.finetuning.table import glue_table

        note = (results.get("submission") or {}).get("note")  # an incomplete server zip, say so
        return glue_table(results) + (f"\n\nnote: {note}" if note else "")

    def search(self, job: Job) -> Searched:
        """One trained task (AX has no training data)."""
        name = job.description.tasks
        task = GLUE_TASKS.get(name)
        if task is None or task.predicted_by is not None:
            choices = ", ".join(n for n, t in GLUE_TASKS.items() if t.predicted_by is None)
            raise UserError(f"cannot search task {name!r}; choose one of {choices}")
        return Searched(task.name, GlueFinetuning(_invocation(job, (task,))))

    def check_data(self, job: Job) -> None:
        """Every described task's splits, read and validated as GlueFinetuning.prepare reads them."""
        data_dir = glue_dir(job.description.data_dir or None, shared_glue())
        for task in job.description.glue_tasks():
            load_glue(task, data_dir)


def shared_glue() -> Path:
    """The shared data folder's GLUE copy, read where neither --data-dir nor GLUE_DIR names one (before
    the Hub, as pre-training's `glue:` corpus and the demo read it)."""
    return shared_dir() / "data" / "glue"


def _invocation(job: Job, tasks: tuple[GlueTask, ...]) -> GlueInvocation:
    return GlueInvocation(model=job.model, tasks=tasks, output_dir=job.output_dir, config=job.config,
                          seeds=job.seeds, data_dir=job.description.data_dir or None,
                          tracking_uri=job.tracking_uri, leaderboard=job.leaderboard,
                          search=job.search, evaluate_only=job.evaluate_only)


KIND_RUNNER = GlueRunner()

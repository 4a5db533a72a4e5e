"""SQuAD's part of `harness run|eval|search squad`: a version x seeds through the one orchestration."""

from __future__ import annotations

import dataclasses
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers

from foundation.infra import atomic
from foundation.training.quiet import quiet_transformers
from harness.config import as_dict
from harness.finetuning import model_setup
from harness.finetuning.kind_runner import Job, Searched
from harness.finetuning.model_setup import ModelSetup
from harness.finetuning.orchestration import FinetuningPlan, fresh_results, run_finetuning
from harness.finetuning.table import interval_note
from reports import dev_outputs, recipe, results_schema, seed_summary
from tasks import squad, squad_metrics
from tasks.config import FinetuneConfig, SquadConfig
from tasks.finetune import FinetuneResult
from tasks.registry import SquadTask
from tasks.squad import SquadAdapter, SquadSource
from tasks.squad_model import HEAD_FILE, JOINT_FILE, SquadModel

RESULTS_FORMAT = results_schema.SQUAD_FORMAT
SPLIT = "validation"


@dataclass(frozen=True)
class SquadInvocation:
    """One `harness run squad`: which model, version and seeds, where the data and outputs live."""

    model: str
    task: SquadTask
    output_dir: Path
    config: FinetuneConfig = FinetuneConfig()
    squad_config: SquadConfig = SquadConfig()
    source: SquadSource = SquadSource()
    seeds: int = 1
    tracking_uri: str | None = None
    search: dict | None = None  # --params-from: the search that chose the settings (results.json `search`)
    evaluate_only: bool = False  # harness eval: score the fine-tuned checkpoint, train nothing


def run_squad(invocation: SquadInvocation, progress: bool | None = None) -> results_schema.ResultsBody:
    """Fine-tune and evaluate; resumes seeds already in output_dir/results.json."""
    return run_finetuning(invocation, SquadFinetuning(invocation), progress)


@dataclass(frozen=True, kw_only=True)
class SquadPlan(FinetuningPlan):
    """SQuAD's plan: beside the resolved settings, the task's windows, built before any output."""

    squad_config: SquadConfig  # head and null threshold resolved for the version
    built: SquadAdapter


def load_model(built: SquadAdapter, config: FinetuneConfig, setup: ModelSetup) -> torch.nn.Module:
    """A fresh span model (with the answerability head where the settings use it)."""
    return squad.load_model(setup.model_path, built, **setup.load_options)


def span_checkpoint(setup: ModelSetup, built: SquadAdapter) -> tuple[torch.nn.Module, None]:
    """harness eval: the checkpoint's span model with the heads it saved (harness eval squad sets the
    settings from span_heads, so none is fresh)."""
    with quiet_transformers():
        model = SquadModel.from_pretrained(setup.model_path, answerability=built.uses_head, joint=built.joint,
                                           **setup.load_options)
    return model, None


def span_heads(model_path: str) -> tuple[bool, bool]:
    """(answerability classifier, joint end head): whether a SQuAD checkpoint saved ELECTRA's heads."""
    return (Path(model_path) / HEAD_FILE).is_file(), (Path(model_path) / JOINT_FILE).is_file()


class SquadFinetuning:
    """SQuAD's part of the one orchestration: its windows, span model, answer files and summary."""

    experiment = "squad"
    head_architecture = "ForQuestionAnswering"
    results_format = RESULTS_FORMAT
    same = ("format", "config", "settings", "data", "tasks")
    leaderboard = True

    def __init__(self, invocation: SquadInvocation):
        self.invocation = invocation

    def prepare(self, setup: ModelSetup) -> SquadPlan:
        model_setup.require(setup, transformers.AutoModelForQuestionAnswering, "SQuAD")
        invocation, task = self.invocation, self.invocation.task
        config = model_setup.fitted(invocation.config, setup, task.num_epochs, task.max_length, setup.head,
                                    longer="refuse")
        # Head and null threshold decided (and a bad combination refused) before the data is read.
        squad_config = invocation.squad_config.resolved(task)
        # Read, validate and window all data before any training or output: bad input fails in seconds.
        built, data = _build(invocation, squad_config, setup, config)
        settings = as_dict(squad_config)
        searched = {"search": invocation.search} if invocation.search else {}
        return SquadPlan(task.name, (task.name,), {task.name: config},
                         results={"settings": settings, "data": data} | searched, params=settings,
                         squad_config=squad_config, built=built)

    def build(self, plan: SquadPlan, task: str, setup: ModelSetup) -> SquadAdapter:
        return plan.built  # windowed in prepare, before any output

    load_model = staticmethod(load_model)
    load_checkpoint = staticmethod(span_checkpoint)

    def write_predictions(self, plan: SquadPlan, built: SquadAdapter, config: FinetuneConfig,
                          result: FinetuneResult, stem: Path) -> dict:
        """predictions.json (and null_odds.json for 2.0) as the official scripts read them; dev outputs."""
        answers, null_odds = built.predictions(SPLIT, result.outputs[SPLIT])
        atomic.write_json(stem / "predictions.json", answers)
        dev = _dev_outputs(self.invocation.task, plan.squad_config, built, answers, null_odds, config.seed)
        atomic.write_json(stem / dev_outputs.FILE, dev)
        if self.invocation.task.has_unanswerable:
            atomic.write_json(stem / "null_odds.json", null_odds)
        return {"num_train_examples": built.num_train_examples}

    def saved_model(self, model: torch.nn.Module, built: SquadAdapter) -> torch.nn.Module:
        return model

    def summarize(self, results: results_schema.ResultsBody) -> None:
        task = self.invocation.task
        results["summary"] = seed_summary.summarize(results["runs"], {task.name: task.metrics},
                                                    results.get("diverged", ()))
        seed_summary.add_intervals(self.invocation.output_dir, results)


def _build(invocation: SquadInvocation, squad_config: SquadConfig, setup: ModelSetup,
           config: FinetuneConfig) -> tuple[SquadAdapter, results_schema.SquadData]:
    """The task's windows, and the data block of results.json; prints what the user should know."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        splits = squad.load_splits(invocation.task, invocation.source, squad_config)
    for warning in caught:  # squad_data's counted answer problems: one line each, not a stack of them
        print(f"harness: warning: {warning.message}", file=sys.stderr)
    holdout = splits.info["holdout"]
    if holdout is not None:
        print(f"note: no train file, so training uses {holdout['train_articles']} articles of "
              f"{splits.info['dev_file']} and evaluation the {holdout['dev_articles']} held out "
              f"(holdout_fraction={holdout['fraction']}, holdout_seed={holdout['seed']})")
    built = squad.build_task(invocation.task, splits, setup.tokenizer, config.max_length, squad_config,
                             config.max_train_examples)
    data = results_schema.SquadData(
        **splits.info, num_train_examples_used=built.num_train_examples, num_train_windows=len(built.train),
        num_dev_examples_used=len(built.examples[SPLIT]), num_dev_windows=len(built.evals[SPLIT]),
        misaligned_answers=built.num_misaligned, answerability_head=built.uses_head)
    print(f"data: {data['num_train_examples_used']} training questions "
          f"({data['num_train_windows']} windows), {data['num_dev_examples_used']} dev questions "
          f"({data['num_dev_windows']} windows); "
          f"{data['misaligned_answers']} training answers off token boundaries, "
          f"{data['answer_problems'] if data['answer_problems'] is not None else 'unchecked'} answers "
          "disagreeing with their context")
    return built, data


def _dev_outputs(task: SquadTask, squad_config: SquadConfig, built: SquadAdapter, answers: dict,
                 null_odds: dict, seed: int) -> dict:
    """Per-question EM/F1 (what intervals and `harness compare` resample), with pairing fingerprints."""
    examples = built.examples[SPLIT]
    scores = squad_metrics.question_scores(task.version, answers, examples,
                                           null_odds if task.has_unanswerable else None,
                                           squad_config.null_threshold)
    ids = list(examples["id"])
    split = dev_outputs.squad_split(ids, {name: [found[q] for q in ids] for name, found in scores.items()},
                                    [a["text"] for a in examples["answers"]],
                                    dev_outputs.token_fingerprint(built.evals[SPLIT]["input_ids"]))
    return dev_outputs.record(task.name, seed, {SPLIT: split})


def summary_table(results: results_schema.ResultsBody) -> str:
    """Dev metrics over seeds, in percent as the official scripts print them."""
    lines = [f"{'metric':12} {'median':>7} {'mean':>7} {'95% CI of mean':>16} {'std':>6} {'best':>7} seeds"]
    for task, summary in results["summary"].items():
        lines.append(f"{task}:")
        for metric, stats in summary.items():
            if isinstance(stats, dict) and metric != "score":
                interval = f"[{stats['ci_low']:.2f}, {stats['ci_high']:.2f}]" if "ci_low" in stats else "[–]"
                lines.append(f"{metric:12} {stats['median']:7.2f} {stats['mean']:7.2f} {interval:>16} "
                             f"{stats['std']:6.2f} {stats['best']:7.2f} {stats['n']}")
    thresholds = [f"seed {r['seed']}: best_exact_thresh {r['metrics'][SPLIT]['best_exact_thresh']:.3f}, "
                  f"best_f1_thresh {r['metrics'][SPLIT]['best_f1_thresh']:.3f}"
                  for r in results["runs"] if "best_f1_thresh" in r["metrics"][SPLIT]]
    note = interval_note(results)
    notes = [note] if note else []
    notes += [f"seed {r['seed']}: diverged ({r['error']}), left out" for r in results.get("diverged", [])]
    best = recipe.best_epoch_note(results)
    return "\n".join(lines + thresholds + notes + ([best] if best else []))


class SquadRunner:
    """SQuAD for the commands (harness/finetuning/kind_runner.py): its invocation from a Job, its table."""

    def run(self, job: Job) -> results_schema.ResultsBody:
        config, squad_config = job.settings
        if job.evaluate_only:  # the checkpoint's own heads: ELECTRA's where it saved their files
            from foundation.models.resolve import resolve_model

            config = dataclasses.replace(config, head="hf")
            answerability, joint = span_heads(resolve_model(job.model, config.trust_remote_code))
            squad_config = dataclasses.replace(squad_config, answerability_head=answerability,
                                               joint_prediction=joint)
        return run_squad(_invocation(job, config, squad_config), job.progress)

    def summary(self, results: results_schema.ResultsBody) -> str:
        return summary_table(results)

    def search(self, job: Job) -> Searched:
        """The described version; the study records the SQuAD settings changed from their defaults."""
        config, squad_config = job.settings
        defaults = as_dict(SquadConfig())
        fixed = {key: value for key, value in as_dict(squad_config).items() if value != defaults[key]}
        return Searched(job.description.task.name, SquadFinetuning(_invocation(job, config, squad_config)),
                        lambda plan: fixed)

    def fresh_results(self, job: Job) -> tuple[dict, tuple[str, ...]]:
        invocation = _invocation(job, *job.settings)
        return fresh_results(invocation, SquadFinetuning(invocation))

    def check_data(self, job: Job) -> None:
        """The described files (or the Hub's), read and validated as SquadFinetuning.prepare reads them;
        windowing them needs the model's tokenizer, so a run does that."""
        config, squad_config = job.settings
        invocation = _invocation(job, config, squad_config)
        with warnings.catch_warnings():  # the answer problems a run counts and prints when it reads them
            warnings.simplefilter("ignore", UserWarning)
            squad.load_splits(invocation.task, invocation.source, squad_config.resolved(invocation.task))


def _invocation(job: Job, config: FinetuneConfig, squad_config: SquadConfig) -> SquadInvocation:
    described = job.description
    source = SquadSource(data_dir=described.data_dir or None, train_file=described.train_file or None,
                         dev_file=described.dev_file or None)
    return SquadInvocation(model=job.model, task=described.task, output_dir=job.output_dir, config=config,
                           squad_config=squad_config, source=source, seeds=job.seeds,
                           tracking_uri=job.tracking_uri, search=job.search, evaluate_only=job.evaluate_only)


KIND_RUNNER = SquadRunner()

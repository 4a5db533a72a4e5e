"""`harness run squad`: a SQuAD version x seeds through the one loop, recorded in results.json and MLflow."""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import transformers

from harness.config import as_dict
from harness.finetuning import preflight, results_file, run_records
from harness.finetuning.run_records import Setup
from harness.tracking import mlflow_leaderboard, mlflow_runs
from pretrain.common import atomic
from pretrain.common.errors import UserError
from pretrain.common.quiet import quiet_libraries
from reports import accounting, dev_outputs
from tasks import batching, squad, squad_metrics
from tasks.config import FinetuneConfig, SquadConfig
from tasks.finetune import finetune
from tasks.registry import SquadTask
from tasks.squad import SquadFinetuneTask, SquadSource

RESULTS_FORMAT = "electra-harness/squad-results/1"
SPLIT = "validation"


@dataclass(frozen=True)
class SquadRun:
    """One invocation: which model, version and seeds, where the data and outputs live."""

    model: str
    task: SquadTask
    output_dir: Path
    config: FinetuneConfig = FinetuneConfig()
    settings: SquadConfig = SquadConfig()
    source: SquadSource = SquadSource()
    seeds: int = 1
    tracking_uri: str | None = None


@quiet_libraries()  # the loop's own bar or lines cover tokenising, loading and saving
def run_squad(run: SquadRun, progress: bool | None = None) -> dict:
    """Fine-tune and evaluate; resumes seeds already in output_dir/results.json."""
    if run.seeds < 1:
        raise UserError(f"--seeds must be at least 1 (got {run.seeds})")
    started = time.perf_counter()
    setup = run_records.setup(run.model, run.config.precision)
    config = run.config.resolved(setup.size, run.task.num_epochs, run.task.max_length)
    positions = setup.model_config.max_position_embeddings
    if config.max_length > positions:
        raise UserError(f"max_length {config.max_length} exceeds the model's {positions} positions; "
                        f"pass max_length={positions} or less")
    # Head and null threshold decided (and a bad combination refused) before the data is read.
    run = dataclasses.replace(run, settings=run.settings.resolved(run.task))
    # Read, validate and window all data before any training or output: bad input fails in seconds.
    built, data = _build(run, setup, config)
    fresh = run_records.fresh_results(RESULTS_FORMAT, run.model, setup.model_path, run.config,
                                      [run.task.name], run.seeds, settings=as_dict(run.settings), data=data)
    same = ("format", "config", "settings", "data", "tasks")
    results = results_file.resume(run.output_dir, fresh, same)
    store = results_file.ResultsFile(run.output_dir, started, same)
    results |= run_records.as_run(setup, run.config) | {"accelerator": run_records.accelerator(setup.device)}
    preflight.check_run_outputs(run.output_dir, mlflow_runs.chosen_uri(run.tracking_uri))  # before training
    mlflow_runs.setup("squad", run.tracking_uri)
    mlflow_runs.end_orphans("squad", {"output_dir": str(run.output_dir.resolve())}, run.output_dir)
    params = run_records.parent_params(run.config, {run.task.name: config},
                                       run_records.as_run(setup, run.config)) \
        | as_dict(run.settings)
    with mlflow_runs.run(f"{Path(run.model).name} {run.task.name}", params=params,
                      tags={"model": run.model, "tasks": run.task.name,
                            "output_dir": str(run.output_dir.resolve())}):
        run_records.train_seeds(
            results, run.task.name, config, range(run.config.seed, run.config.seed + run.seeds),
            functools.partial(_run_task_seed, run, built, setup=setup, progress=progress),
            lambda: store.save(results))
        with store.merged(results):  # seeds run side by side into this folder are summarised too
            results["flops"] = accounting.run_flops(run.model, setup.model_path, results["runs"])
            mlflow_leaderboard.log_flops(results["flops"])
            results["summary"] = run_records.summarize(results["runs"], {run.task.name: run.task.metrics},
                                                       results.get("diverged", ()))
            run_records.add_intervals(run.output_dir, results)
    mlflow_leaderboard.record([run.output_dir / "results.json"], run.tracking_uri)
    return results


def _build(run: SquadRun, setup: Setup, config: FinetuneConfig) -> tuple[SquadFinetuneTask, dict]:
    """The task's windows, and the data block of results.json; prints what the user should know."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        splits = squad.load_splits(run.task, run.source, run.settings)
    for warning in caught:  # squad_data's counted answer problems: one line each, not a stack of them
        print(f"harness: warning: {warning.message}", file=sys.stderr)
    holdout = splits.info["holdout"]
    if holdout is not None:
        print(f"note: no train file, so training uses {holdout['train_articles']} articles of "
              f"{splits.info['dev_file']} and evaluation the {holdout['dev_articles']} held out "
              f"(holdout_fraction={holdout['fraction']}, holdout_seed={holdout['seed']})")
    built = squad.build_task(run.task, splits, setup.tokenizer, config.max_length, run.settings,
                             config.max_train_examples)
    data = splits.info | {
        "num_train_examples_used": built.num_train_examples, "num_train_windows": len(built.train),
        "num_dev_examples_used": len(built.examples[SPLIT]), "num_dev_windows": len(built.evals[SPLIT]),
        "misaligned_answers": built.num_misaligned, "answerability_head": built.uses_head}
    print(f"data: {data['num_train_examples_used']} training questions "
          f"({data['num_train_windows']} windows), {data['num_dev_examples_used']} dev questions "
          f"({data['num_dev_windows']} windows); "
          f"{data['misaligned_answers']} training answers off token boundaries, "
          f"{data['answer_problems'] if data['answer_problems'] is not None else 'unchecked'} answers "
          "disagreeing with their context")
    return built, data


def _run_task_seed(run: SquadRun, built: SquadFinetuneTask, config: FinetuneConfig, setup: Setup,
                   progress: bool | None) -> dict:
    """Fine-tune one seed inside its own nested MLflow run; write its predictions (and null odds)."""
    transformers.set_seed(config.seed)
    model = squad.load_model(setup.model_path, built, setup.attention).to(setup.device)
    with run_records.nested_run(run.task.name, config, run.model,
                                as_dict(run.settings) | run_records.as_run(setup, config)):
        result = finetune(model, built, config, batching.collator(setup.tokenizer),
                          on_epoch=run_records.log_epoch, progress=progress,
                          label=f"fine-tune {run.task.name} seed {config.seed}")
        score = run_records.log_final(result)
    answers, null_odds = built.predictions(SPLIT, result.outputs[SPLIT])
    stem = run.output_dir / "predictions" / f"{run.task.name}-seed{config.seed}"
    atomic.write_json(stem / "predictions.json", answers)
    atomic.write_json(stem / dev_outputs.FILE, _dev_outputs(run, built, answers, null_odds, config.seed))
    if run.task.has_unanswerable:
        atomic.write_json(stem / "null_odds.json", null_odds)
    if config.save_models:
        model_dir = run.output_dir / "models" / f"{run.task.name}-seed{config.seed}"
        run_records.save_model(model, setup.tokenizer, model_dir)
    return run_records.run_record(run.task.name, config, result, score, built.num_train_examples)


def _dev_outputs(run: SquadRun, built: SquadFinetuneTask, answers: dict, null_odds: dict, seed: int) -> dict:
    """Per-question EM/F1 (what intervals and `harness compare` resample), with pairing fingerprints."""
    examples = built.examples[SPLIT]
    scores = squad_metrics.question_scores(run.task.version, answers, examples,
                                           null_odds if run.task.has_unanswerable else None,
                                           run.settings.null_threshold)
    ids = list(examples["id"])
    split = dev_outputs.squad_split(ids, {name: [found[q] for q in ids] for name, found in scores.items()},
                                    [a["text"] for a in examples["answers"]],
                                    dev_outputs.token_fingerprint(built.evals[SPLIT]["input_ids"]))
    return dev_outputs.record(run.task.name, seed, {SPLIT: split})


def summary_table(results: dict) -> str:
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
    covers = sorted({found["ci_covers"] for summary in results["summary"].values()
                     for found in summary.values() if isinstance(found, dict) and "ci_covers" in found})
    notes = [f"95% CI of the seed mean, covering {' / '.join(covers)}"] if covers else []
    notes += [f"seed {r['seed']}: diverged ({r['error']}), left out" for r in results.get("diverged", [])]
    return "\n".join(lines + thresholds + notes)

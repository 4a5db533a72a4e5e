"""`harness run glue`: every task x seed through the one loop, recorded in results.json and MLflow."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path

import transformers

from harness.finetuning import preflight, results_file, run_records
from harness.finetuning.run_records import Setup
from harness.tracking import mlflow_leaderboard, mlflow_runs
from pretrain.common import atomic
from pretrain.common.errors import UserError
from pretrain.common.quiet import quiet_libraries
from reports import accounting, dev_outputs, intervals
from tasks import batching, glue, glue_head, metrics
from tasks.config import FinetuneConfig
from tasks.finetune import finetune
from tasks.glue_data import glue_dir, load_glue
from tasks.registry import GLUE_CONVENTION, GLUE_TASKS, SERVER_FILES, GlueTask, predicted_with

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
    # False where the caller adds the run to the leaderboard itself (an experiment's report stage)
    leaderboard: bool = True


@quiet_libraries()  # the loop's own bar or lines cover tokenising, loading and saving
def run_glue(run: GlueRun, progress: bool | None = None) -> dict:
    """Fine-tune and evaluate; resumes (task, seed) pairs already in output_dir/results.json."""
    if run.seeds < 1:
        raise UserError(f"--seeds must be at least 1 (got {run.seeds})")
    started = time.perf_counter()
    setup = run_records.setup(run.model, run.config.precision)
    # Read and validate every task's data before any training: bad input fails in seconds.
    data_dir = glue_dir(run.data_dir)
    data = {task.name: load_glue(task, data_dir) for task in run.tasks}
    fresh = run_records.fresh_results(RESULTS_FORMAT, run.model, setup.model_path, run.config,
                                      [t.name for t in run.tasks], run.seeds)
    results = results_file.resume(run.output_dir, fresh)
    store = results_file.ResultsFile(run.output_dir, started)
    results |= run_records.as_run(setup, run.config) | {"accelerator": run_records.accelerator(setup.device)}
    resolved = {t.name: run.config.resolved(setup.size, t.num_epochs, t.max_length)
                for t in run.tasks if t.predicted_by is None}
    preflight.check_run_outputs(run.output_dir, mlflow_runs.chosen_uri(run.tracking_uri))  # before training
    mlflow_runs.setup("glue", run.tracking_uri)
    mlflow_runs.end_orphans("glue", {"output_dir": str(run.output_dir.resolve())}, run.output_dir)
    with mlflow_runs.run(f"{Path(run.model).name} glue",
                      params=run_records.parent_params(run.config, resolved,
                                                       run_records.as_run(setup, run.config)),
                      tags={"model": run.model, "tasks": ",".join(t.name for t in run.tasks),
                            "output_dir": str(run.output_dir.resolve())}):
        for task in (t for t in run.tasks if t.predicted_by is None):
            config = resolved[task.name]
            splits = {s: d for s, d in data[task.name].items()
                      if config.predict_test or not s.startswith("test")}
            riders = {t.name: data[t.name]["test"] for t in predicted_with(task.name)
                      if t.name in data and config.predict_test}
            built = glue.build_task(task, splits, setup.tokenizer, config.max_length,
                                    config.max_train_examples, riders or None, config.double_unordered,
                                    config.head)
            run_records.train_seeds(
                results, task.name, config, range(run.config.seed, run.config.seed + run.seeds),
                functools.partial(_run_task_seed, run, built, setup=setup, progress=progress),
                lambda: store.save(results))
        # Seeds run side by side into this folder are merged in first: the summary covers them all.
        with store.merged(results):
            results["flops"] = accounting.run_flops(run.model, setup.model_path, results["runs"])
            mlflow_leaderboard.log_flops(results["flops"])
            _summarize(run.output_dir, results)
            results["submission"] = _write_submission(run.output_dir, results, run.config.predict_test)
    if run.leaderboard:
        mlflow_leaderboard.record([run.output_dir / "results.json"], run.tracking_uri)
    return results


def _summarize(output_dir: Path, results: dict) -> None:
    """Summary with intervals, and the GLUE average in the paper's convention; logged to MLflow."""
    import mlflow

    trained = {t: GLUE_TASKS[t].metrics for t in results["tasks"] if GLUE_TASKS[t].predicted_by is None}
    results["summary"] = run_records.summarize(results["runs"], trained, results.get("diverged", ()))
    estimates = run_records.add_intervals(output_dir, results)
    medians = {t: s[GLUE_TASKS[t].paper_label]["median"] for t, s in results["summary"].items()}
    results["glue_score"] = metrics.glue_average(medians)  # the paper's convention (registry)
    found = intervals.glue_estimate(list(medians), estimates)
    results["glue"] = intervals.glue_block(results["glue_score"], found, list(medians))
    run_records.log_intervals(results["summary"], results["glue"])
    mlflow.set_tag("glue_convention", GLUE_CONVENTION)


def _run_task_seed(run: GlueRun, built: glue.GlueFinetuneTask, config: FinetuneConfig, setup: Setup,
                   progress: bool | None) -> dict:
    """Fine-tune one seed of one task inside its own nested MLflow run."""
    task = built.task
    transformers.set_seed(config.seed)
    model = glue.load_model(setup.model_path, task, setup.attention, config.head).to(setup.device)
    with run_records.nested_run(task.name, config, run.model, run_records.as_run(setup, config)):
        result = finetune(model, built, config, batching.collator(setup.tokenizer),
                          on_epoch=run_records.log_epoch, progress=progress,
                          label=f"fine-tune {task.name} seed {config.seed}")
        score = run_records.log_final(result)
    stem = run.output_dir / "predictions" / f"{task.name}-seed{config.seed}"
    for split, split_outputs in result.outputs.items():
        lines = [f"{index}\t{label}" for index, label in
                 zip(built.indices[split], built.label_strings(split_outputs), strict=True)]
        atomic.write_text(stem / f"{split}.tsv", "index\tprediction\n" + "\n".join(lines) + "\n")
    atomic.write_json(stem / dev_outputs.FILE, dev_outputs.record(task.name, config.seed, {
        split: dev_outputs.glue_split(built.indices[split], built.references[split],
                                      built.predictions(result.outputs[split]).tolist(),
                                      dev_outputs.token_fingerprint(built.evals[split]["input_ids"]))
        for split in task.dev_splits}))
    if config.save_models:
        model_dir = run.output_dir / "models" / f"{task.name}-seed{config.seed}"
        # ELECTRA's head is written into transformers' own: a plain checkpoint, same predictions
        standard = glue_head.to_standard_head(model, built.target_scale)
        run_records.save_model(standard, setup.tokenizer, model_dir)
    return run_records.run_record(task.name, config, result, score, len(built.train),
                                  double_unordered=built.double_unordered)


def _write_submission(output_dir: Path, results: dict, predict_test: bool = True) -> dict:
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
    return {"file": "glue_submission.zip" if files else None, "files": sorted(files), "missing": missing,
            "note": note}

"""The one fine-tuning orchestration: what `harness run KIND` and `harness eval KIND` do, in order.

Set up the model and device; let the kind's Finetuning read and validate its data into a plan (bad input fails
here, in seconds); start or resume results.json; check every output is writable; open the MLflow run;
train each task's missing seeds through the one loop (tasks/finetune.py); then, with the records of
seeds run side by side merged in, count FLOPs, summarise, and record the run on the leaderboard. What
differs between kinds of task is a `Finetuning` (harness/finetuning/<kind>_finetuning.py), which keeps
nothing between calls: what `prepare` reads and resolves is the `FinetuningPlan` every later call takes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
import transformers

from foundation.infra.errors import UserError
from foundation.training import distributed, stop
from foundation.training.quiet import quiet_libraries
from harness.config import as_dict
from harness.finetuning import evaluation, mlflow_logging, model_setup, preflight, records, results_file
from harness.finetuning.model_setup import ModelSetup
from harness.tracking import mlflow_leaderboard, mlflow_runs
from reports import accounting, results_schema
from tasks import batching, finetune_state
from tasks.config import FinetuneConfig
from tasks.finetune import (
    FinetuneResult,
    LoopIO,
    TaskAdapter,
    class_weights_refused,
    finetune,
    long_text_refused,
)


class Invocation(Protocol):
    """What every `harness run` invocation names (GlueInvocation, SquadInvocation)."""

    model: str
    output_dir: Path
    config: FinetuneConfig
    seeds: int
    tracking_uri: str | None
    evaluate_only: bool  # harness eval: the checkpoint is fine-tuned already; score it, train nothing


@dataclass(frozen=True)
class FinetuningPlan:
    """A kind's data read and checked, and its tasks' settings resolved, before anything is written.

    A kind's own plan (glue_finetuning.GluePlan, squad_finetuning.SquadPlan, ...) adds the data it read."""

    name: str  # the parent MLflow run is "{model} {name}"
    tasks: tuple[str, ...]  # results.json's tasks (GLUE: AX rides with MNLI)
    configs: dict[str, FinetuneConfig]  # each task to train, with its resolved settings
    results: results_schema.ResultsBody = field(default_factory=dict)  # settings, data, search: beside config
    params: dict[str, Any] = field(default_factory=dict)  # MLflow params beside the config's (SQuAD's)


P = TypeVar("P", bound=FinetuningPlan)
LoadModel = Callable[[TaskAdapter, FinetuneConfig, ModelSetup], torch.nn.Module]


class Finetuning(Protocol[P]):
    """What differs between GLUE and SQuAD: data, task building, model, outputs, summary."""

    experiment: str  # the MLflow experiment
    results_format: str
    same: tuple[str, ...]  # results.json keys an earlier invocation must share to be resumed
    leaderboard: bool  # record the run on the leaderboard at the end
    head_architecture: str  # how a fine-tuned checkpoint's class name ends (harness eval checks it)

    def prepare(self, setup: ModelSetup) -> P:
        """Read and validate all data, resolve each task's settings."""

    def build(self, plan: P, task: str, setup: ModelSetup) -> TaskAdapter:
        """A task's tokenised features and scoring, for the loop, with its settings in plan.configs."""

    def load_checkpoint(self, setup: ModelSetup, built: TaskAdapter) -> tuple[torch.nn.Module, Any]:
        """harness eval: the fine-tuned checkpoint with its own head, and what takes its outputs into the
        task's label order (harness/finetuning/evaluation.py's Remap)."""

    def load_model(self, built: TaskAdapter, config: FinetuneConfig, setup: ModelSetup) -> torch.nn.Module:
        """A fresh model with the task's head, from the discriminator checkpoint."""

    def write_predictions(self, plan: P, built: TaskAdapter, config: FinetuneConfig, result: FinetuneResult,
                          stem: Path) -> dict[str, Any]:
        """Prediction files under `stem`; returns the seed record's fields (num_train_examples, ...)."""

    def saved_model(self, model: torch.nn.Module, built: TaskAdapter) -> torch.nn.Module:
        """What save_models writes for a fine-tuned model."""

    def summarize(self, results: results_schema.ResultsBody) -> None:
        """Fill results.json's summary (and the kind's own blocks) from its runs."""


@quiet_libraries()  # the loop's own bar or lines cover tokenising, loading and saving
@stop.handled()  # SIGTERM or Ctrl-C: the seed's state saved at the next step, then Stopped
def run_finetuning(invocation: Invocation, finetuning: Finetuning[Any],
                   progress: bool | None = None) -> results_schema.ResultsBody | None:
    """Fine-tune and evaluate; resumes (task, seed) pairs already in output_dir/results.json.

    Under `torchrun` every process trains each seed with DDP (tasks/data_parallel.py) and rank 0 alone
    evaluates, writes and reports; the others return None."""
    if invocation.seeds < 1:
        raise UserError(f"--seeds must be at least 1 (got {invocation.seeds})")
    if invocation.config.class_weights != "none" and not getattr(finetuning, "weighs_classes", False):
        class_weights_refused(invocation.config)  # before anything is loaded or written
    if invocation.config.long_text != "truncate" and not getattr(finetuning, "reads_windows", False):
        long_text_refused(invocation.config)
    processes = distributed.world_size()
    if invocation.config.batch_size % processes:
        raise UserError(f"batch_size={invocation.config.batch_size} does not split over torchrun's "
                        f"{processes} processes, each of which takes batch_size/{processes} of every step's "
                        f"examples; choose a multiple of {processes}")
    with distributed.process_group("auto") as replicas:
        # rank 0's output folder everywhere: a default one is named for the time each process read
        output_dir = Path(distributed.gather(replicas, str(invocation.output_dir))[0])
        if replicas.is_main:
            return _run(invocation, finetuning, replicas, progress)
        _follow(replace(invocation, output_dir=output_dir), finetuning, replicas)
        return None


def _plan(invocation: Invocation, finetuning: Finetuning[Any]
          ) -> tuple[ModelSetup, FinetuneConfig, Invocation, FinetuningPlan]:
    """The model and device, the config as recorded, and the kind's plan: what every process reads."""
    setup = model_setup.load(invocation.model, invocation.config.precision,
                             invocation.config.trust_remote_code)
    config = model_setup.for_model(invocation.config, setup)  # head=auto recorded as the head it stands for
    if invocation.evaluate_only:  # one pass of the checkpoint as it is (harness eval sets head=hf: its own)
        evaluation.require_head(setup, finetuning.head_architecture)
        invocation = replace(invocation, seeds=1)
    return setup, config, invocation, finetuning.prepare(setup)


def _follow(invocation: Invocation, finetuning: Finetuning[Any], replicas: distributed.Context) -> None:
    """A torchrun process but rank 0: the seeds rank 0 trains, trained in step with it; nothing written."""
    setup, _, invocation, plan = _plan(invocation, finetuning)
    for task, config in plan.configs.items():
        built = finetuning.build(plan, task, setup)
        for seed in _seeds(invocation, task, None, replicas):
            if invocation.evaluate_only:  # rank 0 scores the checkpoint alone
                continue
            seed_config = replace(config, seed=seed)
            state = _seed_state(invocation, task, seed_config, setup)
            with contextlib.suppress(FloatingPointError):  # all diverge at one step (one global loss)
                train_seed(finetuning.load_model, built, seed_config, setup,
                           LoopIO(progress=False, state=state))


def _seeds(invocation: Invocation, task: str, results: results_schema.ResultsBody | None,
           replicas: distributed.Context) -> Iterator[int]:
    """The task's seeds to train, the same in every process: rank 0 reads them from results.json
    (`results`, None elsewhere) and says; a signal to any process stops them all before the next seed."""
    for seed in range(invocation.config.seed, invocation.config.seed + invocation.seeds):
        done = results is not None and results_schema.is_done(results, task, seed)
        if distributed.from_main(replicas, float(done)):
            continue
        if distributed.any_process(replicas, stop.requested() is not None):
            raise stop.stopped(f"before {task} seed {seed} (the seeds done are in results.json)")
        yield seed


def _run(invocation: Invocation, finetuning: Finetuning[Any], replicas: distributed.Context,
         progress: bool | None) -> results_schema.ResultsBody:
    """Rank 0's (or the one process's) run: results.json, MLflow, each seed, the summary."""
    started = time.perf_counter()
    setup, config, invocation, plan = _plan(invocation, finetuning)
    model = results_schema.ModelBlock(name=invocation.model, path=setup.model_path, family=setup.family,
                                      recipe=setup.recipe, source=setup.identity.source,
                                      license=setup.identity.license)
    fresh = records.fresh_results(finetuning.results_format, model, config, plan.tasks, invocation.seeds,
                                  **plan.results)
    if invocation.evaluate_only:
        fresh["evaluated"] = True  # scored as it is, not fine-tuned here (harness eval)
    results = results_file.resume(invocation.output_dir, fresh, finetuning.same)
    store = results_file.ResultsFile(invocation.output_dir, started, finetuning.same)
    used = model_setup.resolved_device_settings(setup, invocation.config)
    results |= results_schema.Compute(precision=used["precision"], compile=used["compile"],
                                      accelerator=model_setup.accelerator(setup.device))
    # every output writable, checked before any training
    preflight.check_run_outputs(invocation.output_dir, mlflow_runs.chosen_uri(invocation.tracking_uri))
    output_dir = {"output_dir": str(invocation.output_dir.resolve())}
    mlflow_runs.use_experiment(finetuning.experiment, invocation.tracking_uri)
    mlflow_runs.end_orphans(finetuning.experiment, output_dir, invocation.output_dir)
    with mlflow_runs.run(f"{Path(invocation.model).name} {plan.name}",
                         params=mlflow_logging.parent_params(config, plan.configs, used) | plan.params,
                         tags={"model": invocation.model, "tasks": ",".join(plan.tasks),
                               "family": setup.family, "recipe": setup.recipe,
                               "model_source": setup.identity.source,
                               "evaluated": str(invocation.evaluate_only).lower()} | output_dir):
        for task, config in plan.configs.items():
            built = finetuning.build(plan, task, setup)
            records.say_resumed(results, task, range(invocation.config.seed,
                                                     invocation.config.seed + invocation.seeds))
            for seed in _seeds(invocation, task, results, replicas):
                seed_config = replace(config, seed=seed)
                try:
                    results["runs"].append(_run_seed(invocation, finetuning, plan, built, task, seed_config,
                                                       setup, progress))
                except FloatingPointError as error:  # its MLflow run ended FAILED; the other seeds go on
                    diverged = records.diverged_record(task, seed_config, error)
                    results.setdefault("diverged", []).append(diverged)
                store.save(results)
                # the seed's record is in results.json now: its saved state can go
                finetune_state.discard(finetune_state.seed_path(invocation.output_dir, task, seed))
        with store.merged(results):  # seeds run side by side into this folder are summarised too
            results["flops"] = accounting.run_flops(setup.identity, results["runs"])
            mlflow_leaderboard.log_flops(results["flops"])
            finetuning.summarize(results)
    if finetuning.leaderboard and not results["runs"]:  # every seed diverged: no score to rank
        print("leaderboard: not added, every seed diverged")
    elif finetuning.leaderboard:
        mlflow_leaderboard.record([invocation.output_dir / results_schema.FILE], invocation.tracking_uri)
    return results


def _run_seed(invocation: Invocation, finetuning: Finetuning[Any], plan: FinetuningPlan, built: TaskAdapter,
                task: str, config: FinetuneConfig, setup: ModelSetup, progress: bool | None
                ) -> results_schema.SeedRecord:
    """One seed in its own nested MLflow run: its outputs written, its results.json record returned.

    A seed killed or stopped mid-way goes on from its saved state (tasks/finetune_state.py); its record
    and MLflow run say from where."""
    state = _seed_state(invocation, task, config, setup)
    if state.resumes:
        point = state.resumes[-1]
        print(f"resume {task} seed {config.seed}: from epoch {point['epoch'] + 1} step {point['step']} "
              f"({state.path})")
    params = plan.params | model_setup.resolved_device_settings(setup, config)
    with mlflow_logging.nested_run(task, config, invocation.model, params, state.resumes):
        for row in state.point.history:  # the epochs trained before a stop, in this seed's new run
            mlflow_logging.log_epoch(int(row["epoch"]), row)
        if invocation.evaluate_only:
            model, result = evaluation.evaluate_seed(finetuning.load_checkpoint, built, config, setup)
        else:
            model, result = train_seed(finetuning.load_model, built, config, setup,
                                       LoopIO(mlflow_logging.log_epoch, progress,
                                              f"fine-tune {task} seed {config.seed}", state))
        score = mlflow_logging.log_final(result)
    fields = finetuning.write_predictions(plan, built, config, result,
                                         invocation.output_dir / "predictions" / f"{task}-seed{config.seed}")
    if config.save_models:
        records.save_model(finetuning.saved_model(model, built), setup.tokenizer,
                           invocation.output_dir / "models" / f"{task}-seed{config.seed}")
    resumed = {"resumed": state.resumes} if state.resumes else {}
    return records.seed_record(task, config, result, score, **fields, **resumed)


def _seed_state(invocation: Invocation, task: str, config: FinetuneConfig,
                setup: ModelSetup) -> finetune_state.SeedState:
    """The seed's saved state, resumed only by a run with the same model and settings."""
    return finetune_state.SeedState(finetune_state.seed_path(invocation.output_dir, task, config.seed),
                                    {"model": setup.model_path} | as_dict(config))


def train_seed(load_model: LoadModel, built: TaskAdapter, config: FinetuneConfig, setup: ModelSetup,
               io: LoopIO) -> tuple[torch.nn.Module, FinetuneResult]:
    """A fresh model for config.seed through the one loop: what a run's seed and a search trial's seed do.

    Seeded first: the new head is drawn from the global RNG as the model is built."""
    transformers.set_seed(config.seed)
    model = load_model(built, config, setup).to(setup.device)
    collate = batching.collator(setup.tokenizer, built.pad_to_multiple_of)
    return model, finetune(model, built, config, collate, io=io)

"""`harness search`: an Optuna study over fine-tuning hyperparameters, one worker per invocation.

Each trial fine-tunes a fresh model through the one loop once per seed of the space's trial_seeds
(the same seeds for every trial; the seed is never a parameter) and scores its configuration by the
mean of their dev scores. The pruner sees that mean per epoch, which exists once the last seed reaches
the epoch: with one trial seed it may stop a trial after any epoch, with k seeds only within the last.
A trial that raises (NaN loss, out of memory, anything) is recorded as failed and the search goes
on. Re-running the command resumes the study: a worker starts trials until COMPLETE + PRUNED +
RUNNING trials reach --trials, so concurrent workers share that total (two that finish in the same
instant may overshoot it by one trial each).

MLflow: one experiment per study, one parent run per worker invocation, one nested run per trial
holding its parameters, per-epoch and final metrics, and its state as the tag `optuna_state` and as
the run status (COMPLETE: FINISHED, PRUNED: KILLED, FAIL: FAILED). A trial whose worker died
(FAIL) has its run ended KILLED by the worker that fails it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import os
import socket
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from foundation.infra.errors import UserError
from harness.config import as_dict
from harness.search import study as studies
from harness.search.space import SEARCHED, SearchSpace
from harness.tracking import mlflow_runs
from tasks.config import FinetuneConfig
from tasks.finetune import FinetuneResult

MAX_FAILURES_IN_A_ROW = 5  # a worker whose trials keep failing stops instead of spinning


@dataclass
class SearchTarget:
    """One task of a kind on one model, loaded once; `train` fine-tunes a fresh model per trial."""

    kind: str
    task: str
    model: str
    size: str  # the model's size class, for the recipe-relative ranges
    task_epochs: float
    train: Callable[[FinetuneConfig, Callable[[int, dict[str, float]], None]], FinetuneResult]
    objective: Callable[[dict[str, float]], float]  # the dev score of one history row
    fixed: dict[str, Any] = dataclasses.field(default_factory=dict)  # the kind's settings (SQuAD's), recorded


@dataclass(frozen=True)
class SearchInvocation:
    """One worker invocation: which study, how many trials in total, where things are recorded."""

    kind: str  # the kind of task (the study's attribute "benchmark", as studies have always recorded it)
    task: str
    model: str
    trials: int
    output_dir: Path
    space: SearchSpace = SearchSpace()
    config: FinetuneConfig = FinetuneConfig()  # fixed settings every trial shares
    storage: str = studies.DEFAULT_STORAGE
    study_name: str | None = None
    pruner: str = "median"
    seed: int = 0
    heartbeat_s: int = 60
    tracking_uri: str | None = None


def default_study_name(kind: str, task: str, model: str) -> str:
    return f"{kind}-{task}-{Path(model).name}"


def run_search(invocation: SearchInvocation, make_target: Callable[[], SearchTarget]) -> dict[str, Any]:
    """Run trials of the study until it holds invocation.trials finished ones; returns best_params.json's
    record.

    The storage is opened before `make_target` loads the model and data, so a bad URL fails at once.
    """
    settings = fixed_settings(invocation.config)
    both = [name for name in invocation.space.departures() if name in settings]
    if both:
        raise UserError(f"{both[0]} is both a fixed setting and searched; drop {both[0]}="
                        f"{settings[both[0]]} or its choices in the --space file")
    name = invocation.study_name or default_study_name(invocation.kind, invocation.task,
                                                       invocation.model)
    storage = studies.open_storage(invocation.storage, invocation.heartbeat_s, on_stale=_close_stale_run)
    target = make_target()
    space = invocation.space.resolved(target.size, target.task_epochs)
    attrs = {"benchmark": invocation.kind, "task": target.task, "model": Path(invocation.model).name,
             "space": space.ranges(), "trial_seeds": list(space.trial_seeds),
             "settings": settings | target.fixed}
    study = studies.open_study(
        storage, name, attrs,
        studies.TrialSeededTPE(invocation.seed, n_startup_trials=max(3, min(10, invocation.trials // 3))),
        studies.make_pruner(invocation.pruner, space.num_epochs[1]))
    best_path = invocation.output_dir / "best_params.json"
    stopper = _Stopper(invocation.trials)
    _setup_tracking(f"search {name}", invocation.tracking_uri)
    worker = f"{socket.gethostname()}:{os.getpid()}"
    params = {"trials": invocation.trials, "pruner": invocation.pruner, "seed": invocation.seed,
              "space": attrs["space"], "trial_seeds": attrs["trial_seeds"], "settings": attrs["settings"]}
    with mlflow_runs.run(f"{name} worker {worker}", params=params,
                      tags={"optuna_study": name, "optuna_storage": studies.redact(invocation.storage),
                            "task": invocation.task, "model": invocation.model, "worker": worker}):
        if not stopper.done(study):
            objective = _objective(target, space, invocation.config, name, worker)
            study.optimize(objective, catch=(Exception,),
                           callbacks=[_free_memory, stopper, _best_writer(best_path, invocation)])
        record = studies.best_record(study, invocation.storage)
        if record is not None:
            studies.write_best(best_path, record)
            mlflow_runs.log_metrics({"best_value": record["value"]})
    record = record or {"trials": studies.count_states(study), "pruning": studies.pruning_savings(study)}
    if stopper.failures_in_a_row >= MAX_FAILURES_IN_A_ROW:
        record = record | {"gave_up": f"{stopper.failures_in_a_row} trials failed in a row, the last with "
                                      f"{stopper.last_error}"}
    return record


def fixed_settings(config: FinetuneConfig) -> dict[str, Any]:
    """The settings every trial shares that differ from the defaults; a searched one (or seed) is an error."""
    defaults = as_dict(FinetuneConfig())
    fixed = {key: value for key, value in as_dict(config).items() if value != defaults[key]}
    if "seed" in fixed:
        raise UserError(f"seed cannot be a fixed setting of harness search: each trial trains on the "
                        f"same trial_seeds and is scored by their mean; pass --trial-seeds {fixed['seed']}")
    searched = sorted(set(fixed) & set(SEARCHED))
    if searched:
        key, value = searched[0], fixed[searched[0]]
        example = f"{key} = [{value}]" if key == "batch_size" else f"{key} = [{value}, {value}]"
        raise UserError(f"{', '.join(searched)} cannot be a fixed setting: the search sets it; fix it "
                        f"in the --space file instead ({example})")
    return fixed


class _Stopper:
    """Stops this worker once finished plus in-flight trials reach the target, or trials keep failing."""

    def __init__(self, trials: int):
        self.trials = trials
        self.failures_in_a_row = 0
        self.last_error: str | None = None

    def done(self, study: optuna.Study) -> bool:
        with warnings.catch_warnings():  # fail_stale_trials is "experimental" since optuna 2.9
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)  # a dead worker's trial must not count as in flight
        counts = studies.count_states(study)
        return counts["COMPLETE"] + counts["PRUNED"] + counts["RUNNING"] >= self.trials

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        failed = trial.state == optuna.trial.TrialState.FAIL
        self.failures_in_a_row = self.failures_in_a_row + 1 if failed else 0
        self.last_error = trial.user_attrs.get("error") if failed else None
        if self.failures_in_a_row >= MAX_FAILURES_IN_A_ROW or self.done(study):
            study.stop()


def _best_writer(path: Path, invocation: SearchInvocation) -> Callable:
    def write(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if trial.state == optuna.trial.TrialState.COMPLETE:
            studies.write_best(path, studies.best_record(study, invocation.storage))
    return write


def _objective(target: SearchTarget, space: SearchSpace, config: FinetuneConfig, study_name: str,
               worker: str) -> Callable[[optuna.Trial], float]:
    def objective(trial: optuna.Trial) -> float:
        import mlflow

        tags = {"optuna_study": study_name, "optuna_trial": str(trial.number), "task": target.task,
                "model": target.model, "worker": worker}
        # The run opens before the first parameter is drawn, so a worker killed at any point from
        # here leaves a run for the worker that fails the trial to end (_close_stale_run).
        with _trial_run(trial, tags):
            params = space.suggest(trial)
            trial_config = dataclasses.replace(config, **params).resolved(target.size, target.task_epochs)
            logged = {key: value for key, value in as_dict(trial_config).items() if key != "seed"}
            mlflow.log_params({key: str(value) for key, value in logged.items()}
                              | {"trial_seeds": str(list(space.trial_seeds))})
            return _train_trial(trial, target, trial_config, space.trial_seeds, worker)

    return objective


def _train_trial(trial: optuna.Trial, target: SearchTarget, config: FinetuneConfig, seeds: tuple[int, ...],
                 worker: str) -> float:
    """Fine-tune one trial's config once per seed; its score, the mean of the seeds' final dev scores.

    Each epoch's mean over the seeds goes to the pruner as soon as it exists: during the last seed.
    """
    planned = math.ceil(config.num_epochs)
    started, epochs_run = time.perf_counter(), 0
    curves: list[list[float]] = []  # per seed, its dev score after each epoch

    def on_epoch(epoch: int, row: dict[str, float]) -> None:
        nonlocal epochs_run
        epochs_run += 1
        value = target.objective(row)
        curves[-1].append(value)
        if len(seeds) > 1:  # each seed's curve under its own name; their mean below is `objective`
            mlflow_runs.log_metrics({f"seed{seeds[len(curves) - 1]}/{key}": v
                                     for key, v in (row | {"objective": value}).items()}, step=epoch)
        if len(curves) < len(seeds):
            return
        mean = statistics.fmean(curve[epoch - 1] for curve in curves)
        mlflow_runs.log_metrics((row if len(seeds) == 1 else {}) | {"objective": mean}, step=epoch)
        trial.report(mean, epoch)
        # Pruning after the last epoch would save nothing and lose a finished trial.
        if epoch < planned and trial.should_prune():
            raise optuna.TrialPruned(f"mean dev score {mean:.4f} of seeds {_listed(seeds)} after epoch "
                                     f"{epoch} of {planned}")

    results = []
    try:
        for seed in seeds:
            curves.append([])
            results.append(target.train(dataclasses.replace(config, seed=seed), on_epoch))
    finally:  # what pruning_savings() needs: epochs over all the trial's seeds
        for key, value in {"worker": worker, "epochs_planned": planned * len(seeds), "epochs_run": epochs_run,
                           "wall_time_s": time.perf_counter() - started}.items():
            trial.set_user_attr(key, value)
    scores = [target.objective(result.history[-1]) for result in results]
    trial.set_user_attr("seed_scores", dict(zip(map(str, seeds), scores, strict=True)))
    value = statistics.fmean(scores)
    if not math.isfinite(value):  # optuna would fail it anyway; say so in MLflow too
        raise FloatingPointError(f"final dev score is {value} (seed scores {scores})")
    speed = statistics.fmean(result.train_examples_per_s for result in results)
    mlflow_runs.log_metrics({"final_objective": value, "train_time_s": sum(r.train_time_s for r in results),
                             "train_examples_per_s": speed})
    return value


def _listed(seeds: tuple[int, ...]) -> str:
    return ", ".join(map(str, seeds))


@contextlib.contextmanager
def _trial_run(trial: optuna.Trial, tags: dict[str, str]):
    """A nested MLflow run whose tag and status say how the trial ended."""
    import mlflow

    run = mlflow.start_run(run_name=f"trial {trial.number}", nested=True, tags=tags)
    trial.set_user_attr("mlflow_run_id", run.info.run_id)
    state, status = "COMPLETE", "FINISHED"
    try:
        yield run
    except optuna.TrialPruned:
        state, status = "PRUNED", "KILLED"
        raise
    except BaseException as error:
        state, status = "FAIL", "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED"
        message = f"{type(error).__name__}: {error}".splitlines()[0][:500]
        trial.set_user_attr("error", message)
        mlflow.set_tag("error", message)
        raise
    finally:
        mlflow.set_tag("optuna_state", state)
        mlflow.end_run(status=status)


def _close_stale_run(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """End the MLflow run of a trial whose worker died, so every trial has one run that says how it ended.

    The run is found by its tags, not the trial's `mlflow_run_id`: a retried trial inherits its
    original's attrs, and a worker killed between opening the run and recording its id leaves none.
    A worker killed before it opened the run (Optuna starts the heartbeat just before the objective)
    leaves none at all; then this worker records one, ended KILLED, with what parameters were drawn.
    A run kept in another worker's tracking store is out of reach and stays RUNNING there.
    """
    import mlflow

    active = mlflow.active_run()
    if active is None:  # not inside run_search's worker run: no store to look in
        return
    client = mlflow.MlflowClient()
    query = f"tags.optuna_study = '{study.study_name}' and tags.optuna_trial = '{trial.number}'"
    try:
        runs = client.search_runs([active.info.experiment_id], query)
        if not runs:
            runs = [client.create_run(active.info.experiment_id, run_name=f"trial {trial.number}",
                                      tags={"optuna_study": study.study_name,
                                            "optuna_trial": str(trial.number)})]
        for run in runs:
            if not run.data.params:  # killed before logging them: the ones it had drawn
                for key, value in trial.params.items():
                    client.log_param(run.info.run_id, key, str(value))
            client.set_tag(run.info.run_id, "optuna_state", "FAIL")
            client.set_tag(run.info.run_id, "error", "worker stopped sending heartbeats")
            client.set_terminated(run.info.run_id, status="KILLED")
    except mlflow.exceptions.MlflowException:
        pass


def _free_memory(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """Release a finished trial's model and optimizer before the next (an OOM trial's above all).

    A callback, so it runs once optuna has dropped the trial's exception and the frames it holds.
    On CPU, reference counting frees them; a full collection there costs a second for nothing.
    """
    import torch

    if torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()


def _setup_tracking(experiment: str, uri: str | None) -> None:
    # Workers that start together race to create the experiment; the loser finds it on a retry. A
    # server that is down is said at once, not retried.
    if not mlflow_runs.is_off(uri):
        mlflow_runs.check_server(mlflow_runs.tracking_uri(uri))
    for attempt in range(3):
        try:
            mlflow_runs.use_experiment(experiment, uri)
            return
        except Exception:
            if attempt == 2:
                raise
            time.sleep(0.5 + attempt)


"""A pre-training run as the CLI and experiments start it: progress, MLflow run, rank-0 reporting."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from tqdm.auto import tqdm

from foundation.infra import atomic
from foundation.models.pretrain_meta import PretrainMeta
from foundation.training import console, stop
from foundation.training.quiet import quiet_libraries
from harness.config import as_dict
from harness.pretraining.task_corpus import corpus_source
from harness.tracking import mlflow_runs
from pretrain import checkpoint, planning, train
from pretrain.config import PretrainConfig
from pretrain.planning import Plan

BAR_FORMAT = "{desc}: {percentage:3.0f}% of budget |{bar}| [{elapsed}<{remaining}{postfix}]"


@quiet_libraries()  # the run's own bar or lines cover tokenising and saving
@stop.handled()  # SIGTERM or Ctrl-C: a checkpoint at the next step, then Stopped (every process)
def run_pretrain(config: PretrainConfig, experiment: str = "pretrain", tracking_uri: str | None = None,
                 progress: bool | None = None, data_dir: str | None = None,
                 pace: Callable[[float, float], None] | None = None) -> PretrainMeta | None:
    """Pre-train with progress (console.progress_mode) and an MLflow run; pretrain_meta.json's dict
    (None off rank 0). `data_dir`: the GLUE folder a `glue:` corpus is read from (task_corpus); `pace`
    hears each logged step's share of the budget spent and the seconds elapsed (a caller's own ETA)."""
    corpus = corpus_source(config.corpus, data_dir, config.cache_dir)  # None: files and folders only
    inputs = planning.check(config, corpus)  # bad settings fail before the lock creates OUT
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun only rank 0 reports (and locks)
        train.train(planning.find_resume_point(inputs))
        return None
    with output_lock(config.output_dir):  # the plan is OUT as it stands while no other run can change it
        return _run_pretrain(config, planning.find_resume_point(inputs), experiment, tracking_uri, progress,
                             pace)


@contextlib.contextmanager
def output_lock(output_dir: str | None) -> Iterator[None]:
    """Held while a run writes OUT; a second `harness pretrain` into it is refused in one line.

    Two runs writing one folder's checkpoints would resume from and overwrite each other's steps.
    """
    if not output_dir:
        yield
        return
    out = Path(output_dir)
    with atomic.exclusive(out / ".pretrain.lock",
                          f"another `harness pretrain` is writing to {str(out)!r}; wait for it to finish "
                          "(then rerun to resume or extend it) or choose another --output"):
        yield


def _run_pretrain(config: PretrainConfig, plan: Plan, experiment: str, tracking_uri: str | None,
                  progress: bool | None, pace: Callable[[float, float], None] | None = None) -> dict:
    """`plan` trained under an MLflow run that records `config`, the settings as given."""
    for line in resume_lines(plan):
        print(line)
    mlflow_runs.use_experiment(experiment, tracking_uri)
    mlflow_runs.end_orphans(experiment, {"output_dir": str(config.output_dir)}, config.output_dir)
    name = Path(config.output_dir).name if config.output_dir else "pretrain"
    tags = {"command": "pretrain", "objective": config.objective, "preset": config.preset,
            "output_dir": str(config.output_dir)}
    mode = console.progress_mode(progress)
    clock = console.LineClock()
    # The bar counts thousandths of the budget (FLOPs, steps or time, whichever ends the run first), so
    # its own rate would read "‰/s": show the percentage and ETA, and steps/s and tokens/s beside them.
    with mlflow_runs.run(name, params=as_dict(config), tags=tags), \
            tqdm(total=1000, desc=name, mininterval=2.0, bar_format=BAR_FORMAT, disable=mode != "bar") as bar:
        def on_log(step: int, metrics: dict[str, float]) -> None:
            mlflow_runs.log_metrics(metrics, step=step)
            bar.update(min(1000, round(metrics["progress"] * 1000)) - bar.n)
            bar.set_postfix_str(summary(step, metrics) + _steps_per_s(step, metrics), refresh=False)
            if mode == "lines" and (clock.due() or metrics["progress"] >= 1.0):
                console.line(f"pretrain {name}: {progress_line(step, metrics)}")
            if pace is not None:
                pace(metrics["progress"], metrics.get("elapsed_s", 0.0))

        meta = train.train(plan, on_log)
        mlflow_runs.log_metrics({f"final_{k}": v for k, v in meta["metrics"].items()}, step=meta["steps"])
        if meta.get("schedule_completed") is not None:
            mlflow_runs.log_metrics({"schedule_completed": meta["schedule_completed"]}, step=meta["steps"])
    note = time_stop_note(meta, config.output_dir)
    if note:
        print(note)
    return meta


def time_stop_note(meta: PretrainMeta, out) -> str | None:
    """A line saying that max_time_s ended the run before its steps, tokens or FLOPs budget, else None."""
    done = meta.get("schedule_completed")
    if meta.get("stopped_by") != "max_time_s" or done is None or done >= 1.0:
        return None
    limit = checkpoint.budget_value(meta["config"]["max_time_s"])
    return (f"note: max_time_s={limit} stopped {out} at step {meta['steps']}, {100 * done:.0f}% of the way "
            "through its budget: its learning rate had not decayed to 0 and it is not the model that "
            "budget gives (pretrain_meta.json: stopped_by, schedule_completed); run it again with a larger "
            "max_time_s to finish it")


def summary(step: int, metrics: dict[str, float]) -> str:
    """One line of the latest metrics, for the progress bar and the closing line."""
    shown = {"generator_loss": "gen", "mlm_loss": "mlm", "discriminator_loss": "disc",
             "disc_accuracy_replaced": "acc_repl", "disc_accuracy_original": "acc_orig",
             "tokens_per_s": "tok/s"}
    parts = [f"{short} {metrics[key]:.3g}" for key, short in shown.items() if key in metrics]
    return f"step {step} " + " ".join(parts)


def resume_lines(plan: Plan) -> list[str]:
    """A line per damaged checkpoint passed over, then one naming the checkpoint the run goes on from (and
    its new budgets, if any); none for a fresh run."""
    resume = plan.resume
    if resume is None:
        return []
    notes = [f"note: {line}; going on from the previous one kept, step-{resume.step}"
             for line in resume.skipped]
    # Continued to other budgets, the extension note names the step it goes on from.
    return [*notes, extension_note(plan) or
            f"resume {plan.config.output_dir}: from step {resume.step} ({resume.folder})"]


def extension_note(plan: Plan) -> str | None:
    """A line saying that OUT's run goes on to other budgets and what that does to its schedule."""
    change = plan.resume.budget_change if plan.resume is not None else None
    if change is None:
        return None
    shown = checkpoint.budget_value
    budgets = "; ".join(f"{key}: {shown(old)} -> {shown(change['to'][key])}"
                        for key, old in change["from"].items())
    before, after = change["learning_rate_before"], change["learning_rate_after"]
    return (f"note: continuing {plan.config.output_dir} from step {change['at_step']} ({budgets}); the "
            f"learning rate follows the schedule over the new budget, so it goes from {before:.3g} to "
            f"{after:.3g} there, unlike a run started with this budget (recorded under `extended` in "
            "pretrain_meta.json)")


def progress_line(step: int, metrics: dict[str, float]) -> str:
    """summary() with the share of the budget spent and the time left, for a log file's progress lines."""
    fraction = min(1.0, metrics["progress"])
    return (f"{summary(step, metrics)}{_steps_per_s(step, metrics)} budget {100 * fraction:.0f}% "
            f"eta {console.eta(fraction, 1.0, metrics.get('elapsed_s', 0.0))}")


def _steps_per_s(step: int, metrics: dict[str, float]) -> str:
    return f" steps/s {step / metrics['elapsed_s']:.3g}" if metrics.get("elapsed_s") else ""

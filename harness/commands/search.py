"""`harness search KIND`: Optuna search on one task of a kind; one worker per invocation, one study shared by
many."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import kinds

EPILOG = """
semantics:
  --trials is the study's total: a worker starts trials until COMPLETE + PRUNED + RUNNING ones reach
  it, so re-running the command resumes the study and concurrent workers share the total (two that
  finish in the same instant may each add one more). Failed trials (NaN loss, out of memory, any
  error) are recorded and do not count; a worker stops after 5 failures in a row. A worker killed
  mid-trial stops sending heartbeats; after 2 x --heartbeat-s the next worker marks its trial FAIL and
  queues it once more with the same parameters.

search space (--space TOML; [low, high] ranges, low == high fixes a value; defaults follow ELECTRA):
  learning_rate = [lr/3, 3*lr] (log; lr = the recipe's for the model size)
  layerwise_lr_decay = [0.6, 1.0]    num_epochs = [epochs/2, 1.5*epochs] (the task's recipe epochs)
  batch_size = [16, 32] (choices)    warmup_fraction = [0.0, 0.2]    weight_decay = [0.0, 0.1]
  trial_seeds = [0] (or --trial-seeds): not searched; every trial trains on these seeds and scores
  their mean, pruned on that mean per epoch (known once the last seed reaches the epoch). The seed is
  never a parameter: searching it picks a lucky seed and an optimistic score; a space naming it is refused.
fixed settings (key=value or --config, as for harness run) apply to every trial, e.g.
  max_train_examples=500 precision=fp32 max_length=128

outputs: OUTPUT_DIR/best_params.json (rewritten whenever the best trial changes); MLflow experiment
  "search STUDY": a parent run per worker, a nested run per trial tagged optuna_state."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("search", help="Optuna hyperparameter search over fine-tuning settings",
                                   description="Search fine-tuning hyperparameters with Optuna.")
    for kind, sub in kinds.add_kind_parsers(parser, "search", lambda kind, text: text.epilog + EPILOG):
        kinds.add_description_flags(sub, kind, "search")
        _common(sub)
        sub.set_defaults(handler=handle)


def handle(args) -> int:
    from foundation.infra.errors import UserError
    from harness.config import load_settings
    from harness.search.space import load_space

    kind = kinds.kind(args.kind)
    description, base = kinds.load_description(kind, args)
    settings = load_settings(kinds.settings_classes(kind), args.config, args.overrides)
    if args.trials < 1:
        raise UserError(f"--trials must be at least 1 (got {args.trials})")
    if args.heartbeat_s < 1:
        raise UserError(f"--heartbeat-s must be at least 1 (got {args.heartbeat_s})")
    space = load_space(args.space, [f"trial_seeds={args.trial_seeds}"] if args.trial_seeds else [])
    from harness.finetuning.kind_runner import Job
    from harness.search.targets import search_config

    job = Job(model=args.model, description=description, settings=(search_config(settings[0]), *settings[1:]),
              task_file_dir=base, leaderboard=False)
    searched = kinds.load(kind.runner).search(job)

    def target():
        from harness.search.targets import search_target

        return search_target(searched.finetuning, args.model, searched.fixed)

    return _search(args, searched.task, settings[0], space, target)


def _common(parser: argparse.ArgumentParser) -> None:
    """The flags every kind's search takes."""
    from harness.config import add_flags
    from harness.search.space import SearchSpace

    parser.add_argument("--model", required=True,
                        help="Hub id (org/name[@revision]), checkpoint directory, harness pretrain output "
                             "or registry name")
    parser.add_argument("--trials", type=int, default=30,
                        help="COMPLETE + PRUNED trials the study should hold (default: %(default)s)")
    parser.add_argument("--storage", default="sqlite:///runs/optuna.db",
                        help="Optuna RDB URL; workers share a postgresql:// one (default: %(default)s)")
    parser.add_argument("--study-name", help="default: KIND-TASK-MODEL_DIR_NAME")
    parser.add_argument("--space", help="TOML file of search ranges (see below)")
    add_flags(parser, SearchSpace)  # --trial-seeds
    parser.add_argument("--pruner", choices=("median", "hyperband", "none"), default="median",
                        help="stops trials whose per-epoch dev score lags (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="TPE sampler seed (default: %(default)s)")
    parser.add_argument("--heartbeat-s", type=int, default=60,
                        help="seconds between a worker's heartbeats (default: %(default)s)")
    parser.add_argument("--config", help="TOML file of fixed fine-tuning settings")
    parser.add_argument("--output-dir", type=Path,
                        help="where best_params.json goes (default: runs/search/STUDY)")
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite:///runs/mlflow.db)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="fixed setting overrides")


def _search(args, task: str, config, space, make_target) -> int:
    from harness.search.trials import SearchInvocation, default_study_name, run_search

    study_name = args.study_name or default_study_name(args.kind, task, args.model)
    invocation = SearchInvocation(kind=args.kind, task=task, model=args.model, trials=args.trials,
                                  output_dir=args.output_dir or Path("runs/search") / study_name,
                                  space=space, config=config, storage=args.storage, study_name=study_name,
                                  pruner=args.pruner, seed=args.seed, heartbeat_s=args.heartbeat_s,
                                  tracking_uri=args.tracking_uri)
    record = run_search(invocation, make_target)
    print(summary(record, invocation))
    if "gave_up" in record:
        print(f"harness search: this worker stopped: {record['gave_up']}", file=sys.stderr)
        return 1
    return 0


def summary(record: dict, invocation) -> str:
    """A few lines on the study: trials by state, pruning savings, the best trial."""
    counts, pruning = record["trials"], record["pruning"]
    lines = [f"study {invocation.study_name}: {counts['COMPLETE']} complete, {counts['PRUNED']} pruned, "
             f"{counts['FAIL']} failed, {counts['RUNNING']} running",
             f"pruning skipped {pruning['epochs_skipped']:.0f} epochs, about "
             f"{pruning['time_saved_s'] / 60:.1f} min at the pruned trials' own speed"]
    if "params" in record:
        params = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in record["params"].items())
        seeds = ", ".join(map(str, record["trial_seeds"]))
        lines += [f"best: trial {record['trial']}, dev score {record['value']:.4f} (mean of seeds {seeds}; "
                  f"the highest of {counts['COMPLETE']} complete trials, so likely optimistic): {params}",
                  f"best parameters: {invocation.output_dir / 'best_params.json'}",
                  f"re-measure it on fresh seeds: harness run {invocation.kind} --params-from "
                  f"{invocation.output_dir / 'best_params.json'} --seeds 5 (with the same --model and data "
                  "flags)"]
    return "\n".join(lines)

"""`harness search glue|squad`: Optuna search; one worker per invocation, one study shared by many."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tasks.registry import GLUE_TASKS

GLUE_EXAMPLES = """examples:
  harness search glue --task rte --model runs/models/small --trials 30 --data-dir ../shared/data/glue
  # more workers, here or on other machines, on one PostgreSQL study:
  harness search glue --task rte --model M --trials 60 --storage postgresql://USER:PASS@HOST/optuna
  # small dev sets: score each trial by the mean of three seeds
  harness search glue --task rte --model M --trials 30 --trial-seeds 0,1,2
  # then re-measure the best configuration on seeds the search never used (here 3..7):
  harness run glue --model M --tasks rte --params-from runs/search/glue-rte-M/best_params.json --seeds 5
"""
SQUAD_EXAMPLES = """examples:
  harness search squad --version 1.1 --model M --trials 20 --data-dir ../shared/data/squad \\
      max_train_examples=2000
  harness run squad --version 1.1 --model M --params-from runs/search/squad-squad-M/best_params.json \\
      --seeds 3 --data-dir ../shared/data/squad
"""
TEXT_EXAMPLES = """examples:
  harness search text --model M --train train.csv --dev dev.csv --text question --label coarse_label \\
      --trials 20
  harness run text --model M --train train.csv --dev dev.csv --text question --label coarse_label \\
      --params-from runs/search/text-train-M/best_params.json --seeds 5
"""
TAGGING_EXAMPLES = """examples:
  harness search tagging --model M --task chunk --trials 20 max_train_examples=2000
  harness run tagging --model M --task chunk --params-from runs/search/tagging-chunk-M/best_params.json
"""
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
    benchmarks = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    glue = benchmarks.add_parser(
        "glue", help="search one GLUE task's hyperparameters", epilog=GLUE_EXAMPLES + EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run trials of an Optuna study on one GLUE task; each trial fine-tunes its configuration "
                    "once per trial seed, is scored by their mean dev score and pruned when that lags.")
    glue.add_argument("--task", required=True,
                      help=f"one of {', '.join(n for n, t in GLUE_TASKS.items() if t.predicted_by is None)}")
    glue.add_argument("--data-dir", help="classic glue_data directory (default: $GLUE_DIR, else the Hub)")
    _common(glue)
    glue.set_defaults(handler=handle_glue)
    squad = benchmarks.add_parser(
        "squad", help="search SQuAD hyperparameters (dev F1)", epilog=SQUAD_EXAMPLES + EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run trials of an Optuna study on SQuAD; each trial fine-tunes its configuration once "
                    "per trial seed, is scored by their mean dev F1 and pruned when that lags. SQuAD "
                    "settings (doc_stride, ...) are fixed key=value settings, as for harness run squad.")
    squad.add_argument("--version", default="1.1", help="SQuAD version: 1.1 or 2.0 (default: %(default)s)")
    squad.add_argument("--data-dir",
                       help="folder of train-vX.json/dev-vX.json (default: $SQUAD_DIR, else the Hub)")
    squad.add_argument("--train-file", help="official-format training JSON (with --dev-file)")
    squad.add_argument("--dev-file", help="official-format dev JSON; alone, its articles are split")
    _common(squad)
    squad.set_defaults(handler=handle_squad)
    text = benchmarks.add_parser(
        "text", help="search your own data's hyperparameters (its headline metric)",
        epilog=TEXT_EXAMPLES + EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run trials of an Optuna study on your own labelled files, described as for harness "
                    "run text; each trial is scored by the mean headline metric over its trial seeds.")
    from harness.config import add_flags
    from tasks.text_task import TextTaskConfig

    text.add_argument("--task-file", help="TOML file describing the task (the same keys as the flags)")
    add_flags(text, TextTaskConfig)
    _common(text)
    text.set_defaults(handler=handle_text)
    add_tagging_parser(benchmarks)


def add_tagging_parser(benchmarks) -> None:
    from harness.config import add_flags
    from tasks.tagging_task import TaggingTaskConfig

    tagging = benchmarks.add_parser(
        "tagging", help="search a tagging task's hyperparameters (conlleval F1)",
        epilog=TAGGING_EXAMPLES + EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run trials of an Optuna study on a tagging task, described as for harness run "
                    "tagging; each trial is scored by the mean dev F1 over its trial seeds.")
    tagging.add_argument("--task-file", help="TOML file describing the task (the same keys as the flags)")
    add_flags(tagging, TaggingTaskConfig)
    _common(tagging)
    tagging.set_defaults(handler=handle_tagging)


def handle_tagging(args) -> int:
    from harness.commands.run import tagging_task_config
    from harness.config import load_config
    from tasks.config import FinetuneConfig

    description, base = tagging_task_config(args)
    config = load_config(FinetuneConfig, args.config, args.overrides)
    name = description.name or description.task or Path(description.train).stem

    def target():
        from harness.finetuning.tagging_benchmark import TaggingBenchmark, TaggingInvocation
        from harness.search.targets import benchmark_target, search_config

        benchmark = TaggingBenchmark(TaggingInvocation(
            model=args.model, task=description, output_dir=Path("."), config=search_config(config),
            task_file_dir=base, leaderboard=False))
        return benchmark_target(benchmark, args.model)

    return _search(args, name, config, target)


def _common(parser: argparse.ArgumentParser) -> None:
    """The flags every benchmark's search takes."""
    from harness.config import add_flags
    from harness.search.space import SearchSpace

    parser.add_argument("--model", required=True,
                        help="Hub id (org/name[@revision]), checkpoint directory, harness pretrain output "
                             "or registry name")
    parser.add_argument("--trials", type=int, default=30,
                        help="COMPLETE + PRUNED trials the study should hold (default: %(default)s)")
    parser.add_argument("--storage", default="sqlite:///runs/optuna.db",
                        help="Optuna RDB URL; workers share a postgresql:// one (default: %(default)s)")
    parser.add_argument("--study-name", help="default: BENCHMARK-TASK-MODEL_DIR_NAME")
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


def handle_glue(args) -> int:
    from foundation.infra.errors import UserError
    from harness.config import load_config
    from tasks.config import FinetuneConfig

    task = GLUE_TASKS.get(args.task)
    if task is None or task.predicted_by is not None:
        choices = ", ".join(name for name, t in GLUE_TASKS.items() if t.predicted_by is None)
        raise UserError(f"cannot search task {args.task!r}; choose one of {choices}")
    config = load_config(FinetuneConfig, args.config, args.overrides)

    def target():
        from harness.finetuning.glue_benchmark import GlueBenchmark, GlueInvocation
        from harness.search.targets import benchmark_target, search_config

        return benchmark_target(GlueBenchmark(GlueInvocation(
            model=args.model, tasks=(task,), output_dir=Path("."), config=search_config(config),
            data_dir=args.data_dir, leaderboard=False)), args.model)

    return _search(args, task.name, config, target)


def handle_squad(args) -> int:
    from harness.config import as_dict, load_squad_settings
    from tasks.config import SquadConfig
    from tasks.registry import squad_task
    from tasks.squad import SquadSource

    task = squad_task(args.version)
    config, squad_config = load_squad_settings(args.config, args.overrides)
    source = SquadSource(data_dir=args.data_dir, train_file=args.train_file, dev_file=args.dev_file)
    defaults = as_dict(SquadConfig())
    fixed = {key: value for key, value in as_dict(squad_config).items() if value != defaults[key]}

    def target():
        from harness.finetuning.squad_benchmark import SquadBenchmark, SquadInvocation
        from harness.search.targets import benchmark_target, search_config

        return benchmark_target(SquadBenchmark(SquadInvocation(
            model=args.model, task=task, output_dir=Path("."), config=search_config(config),
            squad_config=squad_config, source=source)), args.model, lambda plan: fixed)

    return _search(args, task.name, config, target)


def handle_text(args) -> int:
    from harness.commands.run import text_task_config
    from harness.config import load_config
    from tasks.config import FinetuneConfig

    description, base = text_task_config(args)
    config = load_config(FinetuneConfig, args.config, args.overrides)
    name = description.name or Path(description.train or description.dataset).stem

    def target():
        from harness.finetuning.text_benchmark import TextBenchmark, TextInvocation
        from harness.search.targets import benchmark_target, search_config

        benchmark = TextBenchmark(TextInvocation(model=args.model, task=description, output_dir=Path("."),
                                                 config=search_config(config), task_file_dir=base,
                                                 leaderboard=False))
        return benchmark_target(benchmark, args.model)

    return _search(args, name, config, target)


def _search(args, task: str, config, make_target) -> int:
    from foundation.infra.errors import UserError
    from harness.search.space import load_space
    from harness.search.trials import SearchInvocation, default_study_name, run_search

    if args.trials < 1:
        raise UserError(f"--trials must be at least 1 (got {args.trials})")
    if args.heartbeat_s < 1:
        raise UserError(f"--heartbeat-s must be at least 1 (got {args.heartbeat_s})")
    space = load_space(args.space, [f"trial_seeds={args.trial_seeds}"] if args.trial_seeds else [])
    study_name = args.study_name or default_study_name(args.benchmark, task, args.model)
    invocation = SearchInvocation(benchmark=args.benchmark, task=task, model=args.model, trials=args.trials,
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
                  f"re-measure it on fresh seeds: harness run {invocation.benchmark} --params-from "
                  f"{invocation.output_dir / 'best_params.json'} --seeds 5 (with the same --model and data "
                  "flags)"]
    return "\n".join(lines)

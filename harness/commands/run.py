"""`harness run glue` and `harness run squad`: fine-tune a discriminator and report dev scores."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from harness.config import settings_help
from harness.tracking import mlflow_runs
from tasks.config import FinetuneConfig, SquadConfig
from tasks.registry import GLUE_TASKS, SQUAD_TASKS

EPILOG = """examples:
  harness run glue --model electra-small --tasks rte,mrpc --seeds 3
  harness run glue --model runs/pretrain/tiny --data-dir ../shared/data/glue num_epochs=1 batch_size=16

""" + settings_help(FinetuneConfig, "settings (key=value or a TOML --config file; unset ones follow "
                                  "ELECTRA's recipe for the model size and task):")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="fine-tune and evaluate on a benchmark",
                                   description="Fine-tune a discriminator on a benchmark.")
    benchmarks = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    glue = benchmarks.add_parser(
        "glue", help="GLUE dev scores, test-server files and MLflow runs", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fine-tune on GLUE tasks with ELECTRA's recipe; writes results.json, dev/test "
                    "predictions and glue_submission.zip, logs to MLflow, prints a results table.")
    common_arguments(glue, "glue")
    glue.add_argument("--tasks", default="rte,mrpc,stsb,cola",
                      help=f"comma list of {', '.join(GLUE_TASKS)} or all (every task, AX with MNLI: the "
                           "full server zip) (default: %(default)s)")
    glue.add_argument("--data-dir", help="classic glue_data directory (default: $GLUE_DIR, else the Hub)")
    params_from_argument(glue)
    glue.set_defaults(handler=handle_glue)
    add_squad_parser(benchmarks)
    add_text_parser(benchmarks)
    add_tagging_parser(benchmarks)


def params_from_argument(parser) -> None:
    parser.add_argument("--params-from", metavar="STUDY_OR_FILE",
                        help="the best trial of a harness search: its best_params.json, STORAGE_URL#STUDY or "
                             "a study in runs/optuna.db; key=value overrides still win. Re-measures it on "
                             "seeds the search never used, printed beside its search score")


def common_arguments(parser, benchmark: str, seeds: bool = True) -> None:
    """The arguments every benchmark run takes: model, seeds (not harness eval's), settings, outputs,
    tracking."""
    parser.add_argument("--model", required=True, help="Hugging Face Hub id (org/name[@revision]; offline, "
                        "from the Hub cache), checkpoint directory, harness pretrain output, or registry "
                        "name (harness models)")
    if seeds:
        parser.add_argument("--seeds", type=int, default=1,
                            help="fine-tunings per task; the table reports median, mean, std, best")
    parser.add_argument("--config", help="TOML file of settings (see below)")
    parser.add_argument("--output-dir", type=Path,
                        help=f"where results go (default: runs/{benchmark}/MODEL-TIME); an existing one "
                        "is resumed")
    parser.add_argument("--tracking-uri", help=mlflow_runs.TRACKING_HELP)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="setting overrides")


def handle_glue(args) -> int:
    from harness.config import load_config
    from tasks.registry import parse_tasks

    params, origin = _searched(args, "glue")
    config = _fresh_seeds(load_config(FinetuneConfig, args.config, params + args.overrides), args, origin)
    tasks = tuple(parse_tasks(args.tasks))
    # torch and transformers load only now: a typo in the settings is reported in well under a second
    from harness.finetuning.glue_benchmark import GlueInvocation, run_glue
    from harness.finetuning.table import glue_table

    output_dir = args.output_dir or Path("runs/glue") / (
        f"{Path(args.model).name}-{datetime.now():%Y%m%d-%H%M%S}")
    results = run_glue(GlueInvocation(model=args.model, tasks=tasks, output_dir=output_dir,
                                      config=config, seeds=args.seeds, data_dir=args.data_dir,
                                      tracking_uri=args.tracking_uri, search=origin))
    print(glue_table(results))
    _remeasured(results, origin)
    note = (results.get("submission") or {}).get("note")  # an incomplete server zip, say so
    if note:
        print(f"\nnote: {note}")
    print(f"\nresults: {output_dir / 'results.json'}")
    return _diverged(results)


def _searched(args, benchmark: str) -> tuple[list[str], dict | None]:
    """--params-from's key=value settings (a search's best trial) and results.json's `search` block."""
    if not args.params_from:
        return [], None
    from harness.search.study import params_from

    params, source, origin = params_from(args.params_from, benchmark)
    print(f"settings from {source}: {' '.join(params)}")
    if "note" in origin:
        print(f"note: {origin['note']}")
    return params, origin


def _fresh_seeds(config: FinetuneConfig, args, origin: dict | None) -> FinetuneConfig:
    if origin is None:
        return config
    from harness.search.remeasure import fresh_config

    return fresh_config(config, args.seeds, origin)


def _remeasured(results: dict, origin: dict | None) -> None:
    if origin is not None:
        from harness.search.remeasure import report

        print("\n" + report(results, origin))


def _diverged(results: dict) -> int:
    """0, or the diverged seeds as one UserError line and a non-zero exit, after every output is written."""
    from harness.finetuning.records import diverged_error

    error = diverged_error(results.get("diverged") or [])
    if error is not None:
        raise error
    return 0


SQUAD_EPILOG = """examples:
  harness run squad --model electra-small --version 2.0 --data-dir ../shared/data/squad
  harness run squad --model runs/models/tiny --version 1.1 --dev-file dev-v1.1.json max_train_examples=2000

Without a train file (only the dev files exist here), training uses a by-article split of the dev
file: holdout_fraction of its articles are held out for evaluation; a note says so and results.json
records it.

""" + settings_help(FinetuneConfig, "settings (key=value or a TOML --config file; max_length defaults "
                                  f"to {SQUAD_TASKS['1.1'].max_length}):") \
    + "\n" + settings_help(SquadConfig, "SQuAD settings:")


def add_squad_parser(benchmarks) -> None:
    squad = benchmarks.add_parser(
        "squad", help="SQuAD 1.1 / 2.0 dev scores, predictions and MLflow runs", epilog=SQUAD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fine-tune on SQuAD with ELECTRA's recipe; writes results.json, predictions.json "
                    "(and null_odds.json for 2.0), logs to MLflow, prints EM/F1.")
    common_arguments(squad, "squad")
    params_from_argument(squad)
    squad.add_argument("--version", default="1.1",
                       help=f"SQuAD version: {' or '.join(SQUAD_TASKS)} (default: %(default)s)")
    squad.add_argument("--data-dir",
                       help="folder of train-vX.json/dev-vX.json (default: $SQUAD_DIR, else the Hub)")
    squad.add_argument("--train-file", help="official-format training JSON (with --dev-file)")
    squad.add_argument("--dev-file", help="official-format dev JSON; alone, its articles are split")
    squad.set_defaults(handler=handle_squad)


def handle_squad(args) -> int:
    from harness.config import load_squad_settings
    from tasks.registry import squad_task

    task = squad_task(args.version)
    params, origin = _searched(args, "squad")
    config, squad_config = load_squad_settings(args.config, params + args.overrides)
    config = _fresh_seeds(config, args, origin)
    from harness.finetuning.squad_benchmark import (  # torch: after the settings check
        SquadInvocation,
        run_squad,
        summary_table,
    )
    from tasks.squad import SquadSource

    output_dir = args.output_dir or Path("runs/squad") / (
        f"{Path(args.model).name}-{task.name}-{datetime.now():%Y%m%d-%H%M%S}")
    source = SquadSource(data_dir=args.data_dir, train_file=args.train_file, dev_file=args.dev_file)
    results = run_squad(SquadInvocation(model=args.model, task=task, output_dir=output_dir, config=config,
                                        squad_config=squad_config, source=source, seeds=args.seeds,
                                        tracking_uri=args.tracking_uri, search=origin))
    print(summary_table(results))
    _remeasured(results, origin)
    print(f"\nresults: {output_dir / 'results.json'}")
    return _diverged(results)


TEXT_EPILOG = """examples:
  harness run text --model electra-small --train train.csv --dev dev.csv --text question \\
      --label coarse_label --seeds 3
  harness run text --model M --train reviews.jsonl --text title,body --label stars --kind regression
  harness run text --model M --task-file tickets.toml num_epochs=5

The task is described once, by flags or a TOML --task-file with the same keys (train, dev, test, text,
label, kind, metric, ...; a task file's paths are relative to it; flags win over it). results.json
records it with each file's sha256: a resume refuses a changed file, `harness compare` runs on other
data. Without a dev file, dev_fraction of train is drawn with dev_seed, and recorded.

""" + settings_help(FinetuneConfig, "settings (key=value or a TOML --config file; unset ones follow "
                                  "ELECTRA's GLUE recipe for the model size):")


def add_text_parser(benchmarks) -> None:
    from harness.config import add_flags
    from tasks.text_task import TextTaskConfig

    parser = benchmarks.add_parser(
        "text", help="your own labelled files: classification, regression or multi-label",
        epilog=TEXT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fine-tune on your own CSV, TSV, JSON Lines or Parquet files (or a datasets Hub id) "
                    "with ELECTRA's recipe; writes results.json, named predictions per split, the models "
                    "with their label names, logs to MLflow, prints the scores with intervals.")
    common_arguments(parser, "text")
    params_from_argument(parser)
    parser.add_argument("--task-file", help="TOML file describing the task (the same keys as the flags)")
    add_flags(parser, TextTaskConfig)
    parser.set_defaults(handler=handle_text)


def task_description(args, cls):
    """A task description of type `cls` (TextTaskConfig, TaggingTaskConfig): the --task-file's keys, then the
    flags given; and the folder its relative paths start from."""
    from harness.config import flag_values, load_config, shown

    given = [f"{key}={shown(value) if isinstance(value, tuple) else value}"
             for key, value in flag_values(args, cls).items()]
    task = load_config(cls, args.task_file, given)
    return task, Path(args.task_file).resolve().parent if args.task_file else None


def text_task_config(args):
    from tasks.text_task import TextTaskConfig

    return task_description(args, TextTaskConfig)


def handle_text(args) -> int:
    from harness.config import load_config

    task, base = text_task_config(args)
    params, origin = _searched(args, "text")
    config = _fresh_seeds(load_config(FinetuneConfig, args.config, params + args.overrides), args, origin)
    from harness.finetuning.text_benchmark import TextInvocation, run_text, summary_table

    stem = task.name or Path(task.train or task.dataset or "data").stem
    output_dir = args.output_dir or Path("runs/text") / (
        f"{Path(args.model).name}-{stem}-{datetime.now():%Y%m%d-%H%M%S}")
    results = run_text(TextInvocation(model=args.model, task=task, output_dir=output_dir, config=config,
                                      seeds=args.seeds, task_file_dir=base, tracking_uri=args.tracking_uri,
                                      search=origin))
    print(summary_table(results))
    _remeasured(results, origin)
    print(f"\nresults: {output_dir / 'results.json'}")
    return _diverged(results)


TAGGING_EPILOG = """examples:
  harness run tagging --model electra-small --task chunk --seeds 3   # CoNLL-2000 in ../shared/data
  harness run tagging --model M --train ner/train.txt --dev ner/dev.txt --test ner/test.txt
  harness run tagging --model M --train train.jsonl --dev dev.jsonl max_train_examples=2000

CoNLL column files (word first, the tag in --tag-column, by default the last; a blank line between
sentences; -DOCSTART- lines are boundaries) or JSON Lines ({"tokens": [...], "tags": [...]}); tags in
IOB1, IOB2 or BIOES. As ELECTRA: trained on BIOES tags, each word's first sub-token labelled; scored by
conlleval's phrase-level F1 (precision, recall, token accuracy, F1 per type beside it). A sentence
longer than max_length is split into windows of whole words (long_sentences=refuse: refused).

""" + settings_help(FinetuneConfig, "settings (key=value or a TOML --config file; unset ones follow "
                                  "ELECTRA's tagging recipe: 3 epochs, 128 tokens, 256 for chunk):")


def add_tagging_parser(benchmarks) -> None:
    from harness.config import add_flags
    from tasks.tagging_task import TaggingTaskConfig

    parser = benchmarks.add_parser(
        "tagging", help="chunking, NER or your own tagged files (conlleval F1)", epilog=TAGGING_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fine-tune a token classifier on CoNLL column or JSON Lines files (or --task chunk) "
                    "with ELECTRA's recipe; writes results.json, predicted tags per split, the models, "
                    "logs to MLflow, prints conlleval's F1 with intervals.")
    common_arguments(parser, "tagging")
    params_from_argument(parser)
    parser.add_argument("--task-file", help="TOML file describing the task (the same keys as the flags)")
    add_flags(parser, TaggingTaskConfig)
    parser.set_defaults(handler=handle_tagging)


def tagging_task_config(args):
    from tasks.tagging_task import TaggingTaskConfig

    return task_description(args, TaggingTaskConfig)


def handle_tagging(args) -> int:
    from harness.config import load_config

    task, base = tagging_task_config(args)
    params, origin = _searched(args, "tagging")
    config = _fresh_seeds(load_config(FinetuneConfig, args.config, params + args.overrides), args, origin)
    from harness.finetuning.tagging_benchmark import TaggingInvocation, run_tagging, summary_table

    stem = task.name or task.task or Path(task.train or "data").stem
    output_dir = args.output_dir or Path("runs/tagging") / (
        f"{Path(args.model).name}-{stem}-{datetime.now():%Y%m%d-%H%M%S}")
    results = run_tagging(TaggingInvocation(model=args.model, task=task, output_dir=output_dir, config=config,
                                            seeds=args.seeds, task_file_dir=base,
                                            tracking_uri=args.tracking_uri, search=origin))
    print(summary_table(results))
    _remeasured(results, origin)
    print(f"\nresults: {output_dir / 'results.json'}")
    return _diverged(results)

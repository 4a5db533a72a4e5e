"""`harness eval glue|squad|text|tagging`: score a checkpoint that is already fine-tuned, training nothing."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from harness.commands.run import common_arguments
from tasks.registry import GLUE_TASKS

EPILOG = """examples:
  harness eval glue --model runs/glue/M-20260101/models/rte-seed0 --tasks rte --data-dir ../shared/data/glue
  harness eval glue --model textattack/bert-base-uncased-SST-2 --tasks sst2   # offline: from the Hub cache
  harness eval text --model runs/text/x/models/intents-seed0 --train train.csv --dev dev.csv \\
      --text utterance --label intent
  harness compare runs/eval/rte runs/glue/M-20260101    # the same dev examples, paired

The checkpoint's own head scores the task's dev split (and predicts the test split); its labels are
matched to the task's by name (config.json's id2label; placeholder names LABEL_0, ... are taken in
order, and said so), or refused in one line naming both sets. The output folder has a run's form:
results.json (marked "evaluated"; one seed, the interval over dev examples), per-example dev outputs
and predictions, so `harness compare`, `harness report` and `harness export onnx --run` take it. A
run text task's training file still matters: its labels name the classes."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("eval", help="score a fine-tuned checkpoint without training",
                                   description="Score a fine-tuned checkpoint on a task's dev split.")
    kinds = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    glue = kinds.add_parser("glue", help="a GLUE classifier or regressor", epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            description="Score a fine-tuned GLUE checkpoint on its tasks' dev splits.")
    _common(glue, "glue")
    glue.add_argument("--tasks", required=True,
                      help="comma list of "
                           f"{', '.join(n for n, t in GLUE_TASKS.items() if t.predicted_by is None)}")
    glue.add_argument("--data-dir", help="classic glue_data directory (default: $GLUE_DIR, else the Hub)")
    glue.set_defaults(handler=handle_glue)
    text = kinds.add_parser("text", help="your own labelled files", epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            description="Score a fine-tuned checkpoint on your own data, described as for "
                                        "harness run text.")
    _common(text, "text")
    from harness.config import add_flags
    from tasks.text_task import TextTaskConfig

    text.add_argument("--task-file", help="TOML file describing the task (the same keys as the flags)")
    add_flags(text, TextTaskConfig)
    text.set_defaults(handler=handle_text)
    squad = kinds.add_parser("squad", help="a SQuAD span model", epilog=EPILOG,
                             formatter_class=argparse.RawDescriptionHelpFormatter,
                             description="Score a fine-tuned SQuAD checkpoint on the dev questions "
                                         "(ELECTRA's answerability and joint heads where it saved them).")
    _common(squad, "squad")
    squad.add_argument("--version", default="1.1", help="SQuAD version: 1.1 or 2.0 (default: %(default)s)")
    squad.add_argument("--data-dir",
                       help="folder of train-vX.json/dev-vX.json (default: $SQUAD_DIR, else the Hub)")
    squad.add_argument("--train-file",
                       help="official-format training JSON: with it, the whole dev file is scored")
    squad.add_argument("--dev-file",
                       help="official-format dev JSON; alone, the articles a run would hold out are scored "
                            "(holdout_fraction, holdout_seed), so the two pair")
    squad.set_defaults(handler=handle_squad)
    tagging = kinds.add_parser("tagging", help="a token classifier (chunking, NER, your tagged files)",
                               epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                               description="Score a fine-tuned token classifier on a tagging task, described "
                                           "as for harness run tagging (conlleval's F1).")
    _common(tagging, "tagging")
    from tasks.tagging_task import TaggingTaskConfig

    tagging.add_argument("--task-file", help="TOML file describing the task (the same keys as the flags)")
    add_flags(tagging, TaggingTaskConfig)
    tagging.set_defaults(handler=handle_tagging)


def _common(parser, benchmark: str) -> None:
    common_arguments(parser, f"eval/{benchmark}", seeds=False)


def _settings(args):
    """The settings of a scoring pass (see _settings_of)."""
    from harness.config import load_config
    from tasks.config import FinetuneConfig

    return _settings_of(load_config(FinetuneConfig, args.config, args.overrides))


def _settings_of(config):
    """The checkpoint's head as saved (transformers' own, on the task's scale: a harness run writes ELECTRA's
    head into it), and nothing saved again."""
    import dataclasses

    return dataclasses.replace(config, head="hf", save_models=False)


def _output(args, stem: str) -> Path:
    when = f"{datetime.now():%Y%m%d-%H%M%S}"
    return args.output_dir or Path("runs/eval") / f"{Path(args.model).name}-{stem}-{when}"


def handle_glue(args) -> int:
    from tasks.registry import parse_tasks

    config = _settings(args)
    tasks = tuple(parse_tasks(args.tasks))
    from harness.finetuning.glue_benchmark import GlueInvocation, run_glue
    from harness.finetuning.table import glue_table

    output_dir = _output(args, "glue")
    results = run_glue(GlueInvocation(model=args.model, tasks=tasks, output_dir=output_dir, config=config,
                                      data_dir=args.data_dir, tracking_uri=args.tracking_uri,
                                      evaluate_only=True))
    print(glue_table(results))
    print(f"\nresults: {output_dir / 'results.json'}")
    return 0


def handle_text(args) -> int:
    from harness.commands.run import text_task_config

    task, base = text_task_config(args)
    config = _settings(args)
    from harness.finetuning.text_benchmark import TextInvocation, run_text, summary_table

    output_dir = _output(args, task.name or Path(task.train or task.dataset or "data").stem)
    results = run_text(TextInvocation(model=args.model, task=task, output_dir=output_dir, config=config,
                                      task_file_dir=base, tracking_uri=args.tracking_uri, evaluate_only=True))
    print(summary_table(results))
    print(f"\nresults: {output_dir / 'results.json'}")
    return 0


def handle_squad(args) -> int:
    import dataclasses

    from foundation.models.resolve import resolve_model
    from harness.config import load_squad_settings
    from harness.finetuning.evaluation import span_heads
    from tasks.registry import squad_task

    task = squad_task(args.version)
    config, squad_config = load_squad_settings(args.config, args.overrides)
    config = dataclasses.replace(_settings_of(config), head="hf")
    answerability, joint = span_heads(resolve_model(args.model, config.trust_remote_code))
    squad_config = dataclasses.replace(squad_config, answerability_head=answerability, joint_prediction=joint)
    from harness.finetuning.squad_benchmark import SquadInvocation, run_squad, summary_table
    from tasks.squad import SquadSource

    output_dir = _output(args, task.name)
    source = SquadSource(data_dir=args.data_dir, train_file=args.train_file, dev_file=args.dev_file)
    results = run_squad(SquadInvocation(model=args.model, task=task, output_dir=output_dir, config=config,
                                        squad_config=squad_config, source=source,
                                        tracking_uri=args.tracking_uri, evaluate_only=True))
    print(summary_table(results))
    print(f"\nresults: {output_dir / 'results.json'}")
    return 0


def handle_tagging(args) -> int:
    from harness.commands.run import tagging_task_config

    task, base = tagging_task_config(args)
    config = _settings(args)
    from harness.finetuning.tagging_benchmark import TaggingInvocation, run_tagging, summary_table

    output_dir = _output(args, task.name or task.task or Path(task.train or "data").stem)
    results = run_tagging(TaggingInvocation(model=args.model, task=task, output_dir=output_dir, config=config,
                                            task_file_dir=base, tracking_uri=args.tracking_uri,
                                            evaluate_only=True))
    print(summary_table(results))
    print(f"\nresults: {output_dir / 'results.json'}")
    return 0

"""`harness eval KIND`: score a checkpoint that is already fine-tuned on a kind of task, training nothing."""

from __future__ import annotations

from pathlib import Path

from harness import kinds
from harness.commands.run import common_arguments, default_output

EPILOG = """examples:
  harness eval glue --model runs/glue/M-20260101/models/rte-seed0 --tasks rte --data-dir ../shared/data/glue
  harness eval glue --model textattack/bert-base-uncased-SST-2 --tasks sst2   # offline: from the Hub cache
  harness eval text --model runs/text/x/models/intents-seed0 --dev dev.csv --text utterance --label intent
  harness compare runs/eval/rte runs/glue/M-20260101    # the same dev examples, paired

The checkpoint's own head scores the task's dev split (and predicts the test split); its labels are
matched to the task's by name (config.json's id2label; placeholder names LABEL_0, ... are taken in
order, and said so), or refused in one line naming both sets. The output folder has a run's form:
results.json (marked "evaluated"; one seed, the interval over dev examples), per-example dev outputs
and predictions, so `harness compare`, `harness report` and `harness export onnx --run` take it."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("eval", help="score a fine-tuned checkpoint without training",
                                   description="Score a fine-tuned checkpoint on a task's dev split.")
    for kind, sub in kinds.add_kind_parsers(parser, "eval", lambda kind, text: "\n\n".join(
            part.rstrip() for part in (EPILOG, text.epilog) if part)):
        common_arguments(sub, f"eval/{kind.name}", seeds=False)
        kinds.add_description_flags(sub, kind, "eval")
        sub.set_defaults(handler=handle)


def handle(args) -> int:
    from harness.config import load_settings

    kind = kinds.kind(args.kind)
    description, base = kinds.load_description(kind, args)
    settings = load_settings(kinds.settings_classes(kind), args.config, args.overrides)
    from harness.finetuning.kind_runner import Job, evaluation_settings

    runner = kinds.load(kind.runner)
    output_dir = args.output_dir or default_output(Path("runs/eval"), args.model,
                                                   description.output_name or kind.name)
    results = runner.run(Job(model=args.model, description=description,
                             settings=evaluation_settings(settings), output_dir=output_dir,
                             task_file_dir=base, tracking_uri=args.tracking_uri, evaluate_only=True))
    if results is None:  # a torchrun process but rank 0, which reports
        return 0
    print(runner.summary(results))
    print(f"\nresults: {output_dir / 'results.json'}")
    return 0


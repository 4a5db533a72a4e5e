"""`harness run glue`: fine-tune a discriminator on GLUE tasks and report dev scores."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from tasks.registry import GLUE_TASKS

EPILOG = """examples:
  harness run glue --model electra-small --tasks rte,mrpc --seeds 3
  harness run glue --model runs/pretrain/tiny --data-dir ../shared/data/glue num_epochs=1 batch_size=16

settings (key=value or a TOML --config file; unset ones follow ELECTRA's recipe):
  learning_rate, layerwise_lr_decay, lr_decay_depth (electra|corrected), num_epochs, warmup_fraction,
  weight_decay, adam_epsilon, max_grad_norm, batch_size, eval_batch_size, max_length, seed,
  precision (auto|fp32|bf16), group_by_length, max_train_examples, save_models"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="fine-tune and evaluate on a benchmark",
                                   description="Fine-tune a discriminator on a benchmark.")
    benchmarks = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    glue = benchmarks.add_parser(
        "glue", help="GLUE dev scores, test-server files and MLflow runs", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fine-tune on GLUE tasks with ELECTRA's recipe; writes results.json, dev/test "
                    "predictions and glue_submission.zip, logs to MLflow, prints a results table.")
    glue.add_argument("--model", required=True,
                      help="registry name (harness models), checkpoint directory or harness pretrain output")
    glue.add_argument("--tasks", default="rte,mrpc,stsb,cola",
                      help=f"comma list of {', '.join(GLUE_TASKS)} or all (default: %(default)s)")
    glue.add_argument("--seeds", type=int, default=1,
                      help="fine-tunings per task; the table reports median, mean, std, best")
    glue.add_argument("--data-dir", help="classic glue_data directory (default: $GLUE_DIR, else the Hub)")
    glue.add_argument("--config", help="TOML file of settings (see below)")
    glue.add_argument("--output-dir", type=Path,
                      help="where results go (default: runs/glue/MODEL-TIME); an existing one is resumed")
    glue.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite:///runs/mlflow.db)")
    glue.add_argument("overrides", nargs="*", metavar="key=value", help="setting overrides")
    glue.set_defaults(handler=run_glue_command)


def run_glue_command(args) -> int:
    from harness.config import load_config
    from harness.glue_run import GlueRun, run_glue
    from harness.table import glue_table
    from tasks.finetune import FinetuneConfig
    from tasks.registry import parse_tasks

    config = load_config(FinetuneConfig, args.config, args.overrides)
    output_dir = args.output_dir or Path("runs/glue") / (
        f"{Path(args.model).name}-{datetime.now():%Y%m%d-%H%M%S}")
    results = run_glue(GlueRun(model=args.model, tasks=tuple(parse_tasks(args.tasks)), output_dir=output_dir,
                               config=config, seeds=args.seeds, data_dir=args.data_dir,
                               tracking_uri=args.tracking_uri))
    print(glue_table(results))
    print(f"\nresults: {output_dir / 'results.json'}")
    return 0

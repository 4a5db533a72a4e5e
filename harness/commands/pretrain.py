"""`harness pretrain`: pre-train an ELECTRA discriminator (or an ablation) on a text corpus."""

from __future__ import annotations

import argparse
from pathlib import Path

from foundation.models.layout import DISCRIMINATOR_DIR
from harness.config import add_flags, settings_help
from harness.tracking import mlflow_runs
from pretrain.config import PretrainConfig

EPILOG = """examples:
  harness pretrain --preset electra-tiny --corpus ../shared/data/corpus/gutenberg --max-flops 1e15 \\
      --output runs/pretrain/tiny
  harness pretrain --preset electra-mini --corpus books/ --output runs/pretrain/mini max_time_s=1800
  harness pretrain --corpus glue:sst2,stsb,rte --data-dir ../shared/data/glue --max-flops 1e14 \
      --output runs/pretrain/task-text   (the tasks' training inputs only, never dev or test)
  torchrun --nproc_per_node 2 -m harness.cli pretrain ...   (DDP: gloo on CPU, nccl on GPU)

An existing output directory with a checkpoint of the same settings is resumed exactly; with other
budgets only (e.g. a larger --max-flops), a finished or killed run continues from its last checkpoint
to the new budget, its learning-rate schedule recomputed over it (a note says so; pretrain_meta.json
records it under `extended`).
OUT/discriminator is what `harness run glue --model OUT` fine-tunes; with --objective mlm it holds
the trained encoder under an untrained detection head, and OUT/generator the same encoder with its
MLM head.

""" + settings_help(
    PretrainConfig, "settings (key=value or a TOML --config file; unset ones follow the preset and the "
    "paper; the first budget reached, of max_steps, max_tokens, max_time_s and max_flops, stops the run):",
    skip=("preset", "corpus", "output_dir", "objective"))


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "pretrain", help="pre-train an ELECTRA discriminator on a text corpus", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Replaced-token detection (or an MLM baseline or ablation) on plain or gzipped text; "
                    "writes Hugging Face discriminator/ and generator/ folders, checkpoints and "
                    "pretrain_meta.json, and logs to MLflow.")
    add_flags(parser, PretrainConfig)  # --preset, --corpus, --output, --objective, --max-flops
    parser.add_argument("--data-dir", help="glue_data folder a glue: corpus is read from (default: "
                                           "$GLUE_DIR, else the shared folder's data/glue, else the Hub)")
    parser.add_argument("--config", help="TOML file of settings (see below)")
    parser.add_argument("--experiment", default="pretrain", help="MLflow experiment (default: %(default)s)")
    parser.add_argument("--tracking-uri", help=mlflow_runs.TRACKING_HELP)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="setting overrides")
    parser.set_defaults(handler=handle)


def config_from_args(args: argparse.Namespace) -> PretrainConfig:
    """Defaults, then --config, then key=value, then the flags."""
    from harness.config import flag_values, load_config

    return load_config(PretrainConfig, args.config, args.overrides, **flag_values(args, PretrainConfig))


def handle(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    from harness.pretraining.orchestration import run_pretrain, summary

    meta = run_pretrain(config, args.experiment, args.tracking_uri, data_dir=args.data_dir)
    if meta is not None:
        print(f"{meta['steps']} steps, {meta['tokens_seen']:,} tokens, {meta['train_flops']:.3g} FLOPs, "
              f"{meta['wall_time_s']:.0f} s: {summary(meta['steps'], meta['metrics'])}")
        print(f"discriminator: {Path(config.output_dir) / DISCRIMINATOR_DIR}")
    return 0

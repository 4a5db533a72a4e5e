"""`harness export onnx`: a fine-tuned discriminator as a checked, torch-free deployment bundle."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.tracking import mlflow_runs

EPILOG = """examples:
  harness export onnx --run runs/glue/electra-small-20260101-120000 --task sst2 --quantize int8
  harness export onnx --model runs/squad/x/models/squad-seed0 --task squad --data-dir ../shared/data/squad

The bundle (default RUN/onnx/TASK-seedN, or runs/onnx/DIR-TASK for --model) holds model.onnx,
model.int8.onnx with --quantize int8, tokenizer.json and manifest.json (task, labels, max length,
versions, sha256 of every file). The export fails if PyTorch and onnxruntime fp32 disagree by more
than 1e-4 on real dev examples, and warns if int8 scores more than 1 point below fp32 on dev.
Serve it with `harness predict --bundle DIR`."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("export", help="export a fine-tuned model for deployment",
                                   description="Export a fine-tuned model for deployment.")
    formats = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")
    onnx = formats.add_parser(
        "onnx", help="ONNX bundle for onnxruntime, checked against PyTorch", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Export a fine-tuned classifier, regressor, SQuAD span model or tagger to ONNX (dynamic "
                    "batch and sequence axes), check parity and dev scores, write a bundle and log it to "
                    "MLflow.")
    source = onnx.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", type=Path, metavar="RUN_DIR",
                        help="output directory of `harness run glue`, `run squad`, `run text` or "
                             "`run tagging`")
    source.add_argument("--model", metavar="DIR_OR_HUB_ID",
                        help="a fine-tuned checkpoint: a directory or a Hub id (org/name[@revision])")
    onnx.add_argument("--task", default="",
                      help="GLUE task (sst2, mnli, ...) or squad / squad_v2 the model was fine-tuned on; a "
                           "`harness run text` or `run tagging` folder's own task by default")
    onnx.add_argument("--seed", type=int, help="which seed of --run (default: the best dev score)")
    onnx.add_argument("--output", type=Path, help="bundle directory; an older bundle there is replaced")
    onnx.add_argument("--quantize", choices=["int8"], help="also write a dynamically quantised int8 model")
    onnx.add_argument("--data-dir", help="dev data for the checks: glue_data folder (default $GLUE_DIR) or "
                                         "SQuAD folder with dev-v1.1.json (default $SQUAD_DIR); else the Hub")
    onnx.add_argument("--max-eval-examples", type=int, default=1000,
                      help="dev examples (first N, file order) scored per precision (default: %(default)s)")
    onnx.add_argument("--tracking-uri", help=mlflow_runs.TRACKING_HELP)
    onnx.set_defaults(handler=handle)


def handle(args) -> int:
    from harness.deploy.bundle_export import ExportJob, export, summary

    manifest = export(ExportJob(task=args.task, run_dir=args.run, model_dir=args.model, seed=args.seed,
                                output=args.output, quantize=args.quantize, data_dir=args.data_dir,
                                max_eval_examples=args.max_eval_examples, tracking_uri=args.tracking_uri))
    print(summary(manifest))
    return 0

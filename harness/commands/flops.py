"""`harness flops`: a model's inference and pre-training FLOPs in each counting convention."""

from __future__ import annotations

import argparse

from foundation.infra.errors import UserError
from foundation.models import flops
from foundation.models.presets import PRESETS
from foundation.models.shapes import TransformerShape
from reports import flop_counts

PAPER = "paper convention (ELECTRA flops_computation.py)"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "flops", help="count a model's FLOPs (paper convention, 6*N*tokens, measured)",
        description="Inference FLOPs per example and, given --train-steps and --batch-size, pre-training "
                    "FLOPs, each in the ELECTRA paper's convention and transformers' 6*N*tokens.")
    parser.add_argument("--model", required=True, metavar="NAME_OR_DIR",
                        help=f"registry shape ({', '.join(PRESETS)}), a checkpoint directory (a `harness "
                             "pretrain` output directory counts its own generator) or a Hub id (org/name)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per example (default 128, "
                        "the paper's inference length)")
    parser.add_argument("--train-steps", type=int, help="pre-training steps (with --batch-size)")
    parser.add_argument("--batch-size", type=int, help="pre-training batch size (with --train-steps)")
    parser.add_argument("--generator-fraction", type=float,
                        help="generator width / discriminator width; 0 counts BERT's MLM objective "
                             "(default: the checkpoint's generator, else the registry's fraction)")
    parser.add_argument("--no-measure", dest="measure", action="store_false",
                        help="skip the FlopCounterMode forward pass")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    _check_numbers(args)
    shapes = flop_counts.model_shapes(args.model, args.generator_fraction)
    # measured first: it may refuse the length, before anything is printed
    measured = flop_counts.measure(shapes.config, args.seq_len) if args.measure else None
    print(shapes.label)
    print(f"  {'discriminator' if shapes.generator else 'model'}: {_describe(shapes.discriminator)}")
    generator = (f"{_describe(shapes.generator)} ({shapes.generator_source})" if shapes.generator
                 else "none (BERT's MLM objective)")
    print(f"  generator: {generator}")
    print(f"inference FLOPs per example, seq_len {args.seq_len}:")
    print(_row(PAPER, flops.inference_flops(shapes.discriminator, args.seq_len)))
    num_params = flops.non_embedding_params(shapes.discriminator)
    print(_row(f"2*N*tokens, N={num_params:,} (forward third of 6*N*tokens)",
               flops.six_n_flops(num_params, args.seq_len) / 3))
    if measured is not None:
        print(_row("measured forward (FlopCounterMode: matmuls and attention only)", measured))
    if args.train_steps is not None:
        num_tokens = args.train_steps * args.batch_size * args.seq_len
        print(f"pre-training FLOPs, {args.train_steps:,} steps x batch {args.batch_size} x "
              f"seq_len {args.seq_len}:")
        print(_row(PAPER, flops.pretrain_flops(shapes.discriminator, shapes.generator, args.train_steps,
                                               args.batch_size, args.seq_len)))
        if shapes.generator is not None:
            num_params += flops.non_embedding_params(shapes.generator)
        print(_row(f"6*N*tokens (transformers Trainer), N={num_params:,}",
                   flops.six_n_flops(num_params, num_tokens)))
    return 0


def _check_numbers(args: argparse.Namespace) -> None:
    errors = [f"--{name.replace('_', '-')} {value} must be positive"
              for name in ("seq_len", "train_steps", "batch_size")
              if (value := getattr(args, name)) is not None and value < 1]
    if (args.train_steps is None) != (args.batch_size is None):
        errors.append("pre-training FLOPs need both --train-steps and --batch-size")
    if errors:
        raise UserError("; ".join(errors))


def _describe(shape: TransformerShape) -> str:
    return (f"hidden {shape.hidden_size}, {shape.num_layers} layers, {shape.num_heads} heads, "
            f"feed-forward {shape.intermediate_size}, embedding {shape.embedding_size}, "
            f"vocab {shape.vocab_size}")


def _row(label: str, value: float) -> str:
    return f"  {label:<66} {value:.4g}"

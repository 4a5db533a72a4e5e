"""`harness flops`: a model's inference and pre-training FLOPs in each counting convention."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from pretrain.errors import UserError
from pretrain.models import PRESETS, discriminator_config
from reports import flops

PAPER = "paper convention (ELECTRA flops_computation.py)"


@dataclass(frozen=True)
class Target:
    """What `--model` named: shapes to count and the config a measured model is built from."""

    label: str
    discriminator: flops.TransformerShape
    generator: flops.TransformerShape | None  # None: BERT's MLM objective
    generator_source: str
    config: dict


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "flops", help="count a model's FLOPs (paper convention, 6*N*tokens, measured)",
        description="Inference FLOPs per example and, given --train-steps and --batch-size, pre-training "
                    "FLOPs, each in the ELECTRA paper's convention and transformers' 6*N*tokens.")
    parser.add_argument("--model", required=True, metavar="NAME_OR_DIR",
                        help=f"registry shape ({', '.join(PRESETS)}) or a checkpoint directory "
                             "(a `harness pretrain` output directory counts its own generator)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per example (default 128, "
                        "the paper's inference length)")
    parser.add_argument("--train-steps", type=int, help="pre-training steps (with --batch-size)")
    parser.add_argument("--batch-size", type=int, help="pre-training batch size (with --train-steps)")
    parser.add_argument("--generator-fraction", type=float,
                        help="generator width / discriminator width; 0 counts BERT's MLM objective "
                             "(default: the checkpoint's generator, else the registry's fraction)")
    parser.add_argument("--no-measure", dest="measure", action="store_false",
                        help="skip the FlopCounterMode forward pass")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    _check_numbers(args)
    target = resolve_target(args.model, args.generator_fraction)
    measured = _measure(target.config, args.seq_len) if args.measure else None  # may refuse the length
    print(target.label)
    print(f"  {'discriminator' if target.generator else 'model'}: {_describe(target.discriminator)}")
    generator = (f"{_describe(target.generator)} ({target.generator_source})" if target.generator
                 else "none (BERT's MLM objective)")
    print(f"  generator: {generator}")
    print(f"inference FLOPs per example, seq_len {args.seq_len}:")
    print(_row(PAPER, flops.inference_flops(target.discriminator, args.seq_len)))
    num_params = flops.count_non_embedding_params(target.discriminator)
    print(_row(f"2*N*tokens, N={num_params:,} (forward third of 6*N*tokens)",
               flops.six_n_flops(num_params, args.seq_len) / 3))
    if measured is not None:
        print(_row("measured forward (FlopCounterMode: matmuls and attention only)", measured))
    if args.train_steps is not None:
        num_tokens = args.train_steps * args.batch_size * args.seq_len
        print(f"pre-training FLOPs, {args.train_steps:,} steps x batch {args.batch_size} x "
              f"seq_len {args.seq_len}:")
        print(_row(PAPER, flops.pretrain_flops(target.discriminator, target.generator, args.train_steps,
                                               args.batch_size, args.seq_len)))
        if target.generator is not None:
            num_params += flops.count_non_embedding_params(target.generator)
        print(_row(f"6*N*tokens (transformers Trainer), N={num_params:,}",
                   flops.six_n_flops(num_params, num_tokens)))
    return 0


def resolve_target(name_or_dir: str, generator_fraction: float | None) -> Target:
    """Shapes for a registry name (no download) or a checkpoint directory's config.json files."""
    path = Path(name_or_dir).expanduser()
    if path.is_dir():
        return _from_directory(path, generator_fraction)
    if name_or_dir in PRESETS:
        preset = PRESETS[name_or_dir]
        shape = flops.shape_of(preset)
        fraction = preset.generator_fraction if generator_fraction is None else generator_fraction
        generator, source = _generator_from_fraction(shape, fraction)
        # An ElectraModel is BERT plus an optional embedding projection, so it measures both families.
        return Target(f"{preset.name} (registry shape)", shape, generator, source,
                      discriminator_config(preset).to_dict())
    raise UserError(f"unknown model {name_or_dir!r}; choose one of {', '.join(PRESETS)} "
                    "or pass a checkpoint directory containing config.json")


def _from_directory(path: Path, generator_fraction: float | None) -> Target:
    for root in (path, path / "discriminator"):
        if (root / "config.json").is_file():
            break
    else:
        raise UserError(f"{str(path)!r} has no config.json (nor discriminator/config.json); pass a "
                        f"checkpoint directory or one of {', '.join(PRESETS)}")
    config = _read_config(root / "config.json")
    shape = flops.shape_of(config)
    generator_config = path / "generator" / "config.json"
    if generator_fraction is not None:
        generator, source = _generator_from_fraction(shape, generator_fraction)
    elif generator_config.is_file():
        generator, source = flops.shape_of(_read_config(generator_config)), f"from {generator_config}"
    elif config.get("model_type") == "electra":
        # A bare released discriminator: assume the paper's generator for its size.
        same_shape = [p for p in PRESETS.values() if p.family == "electra" and flops.shape_of(p) == shape]
        generator, source = _generator_from_fraction(
            shape, same_shape[0].generator_fraction if same_shape else 0.25)
    else:
        generator, source = None, ""
    return Target(f"{root} (checkpoint config)", shape, generator, source, config)


def _read_config(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise UserError(f"cannot read {str(path)!r} ({error}); pass a directory save_pretrained() wrote"
                        ) from error


def _generator_from_fraction(shape: flops.TransformerShape, fraction: float):
    if fraction == 0:
        return None, ""
    return flops.generator_shape(shape, fraction), f"fraction {fraction:.3g} of the discriminator"


def _measure(config: dict, seq_len: int) -> float:
    import torch
    from transformers import AutoConfig, AutoModel

    if seq_len > config.get("max_position_embeddings", seq_len):
        raise UserError(f"--seq-len {seq_len} exceeds the model's max_position_embeddings "
                        f"{config['max_position_embeddings']}; lower it or pass --no-measure")
    settings = {key: value for key, value in config.items() if key != "model_type"}
    model_config = AutoConfig.for_model(config.get("model_type", "electra"), **settings)
    # Meta tensors carry shapes but no storage: the same ops are dispatched and counted, without
    # allocating or initialising the weights (BERT-Large would take GBs and tens of seconds).
    with torch.device("meta"):
        model = AutoModel.from_config(model_config)
    return flops.measured_forward_flops(model, seq_len=seq_len)


def _check_numbers(args: argparse.Namespace) -> None:
    errors = [f"--{name.replace('_', '-')} {value} must be positive"
              for name in ("seq_len", "train_steps", "batch_size")
              if (value := getattr(args, name)) is not None and value < 1]
    if (args.train_steps is None) != (args.batch_size is None):
        errors.append("pre-training FLOPs need both --train-steps and --batch-size")
    if errors:
        raise UserError("; ".join(errors))


def _describe(shape: flops.TransformerShape) -> str:
    return (f"hidden {shape.hidden_size}, {shape.num_layers} layers, {shape.num_heads} heads, "
            f"feed-forward {shape.intermediate_size}, embedding {shape.embedding_size}, "
            f"vocab {shape.vocab_size}")


def _row(label: str, value: float) -> str:
    return f"  {label:<66} {value:.4g}"

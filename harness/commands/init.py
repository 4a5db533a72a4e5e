"""`harness init`: a randomly initialised discriminator checkpoint with a preset's shape.

The untrained control for experiments, and the way to exercise the harness without weights.
"""

from __future__ import annotations

from pathlib import Path


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "init", help="write a random-init discriminator checkpoint",
        description="Write a randomly initialised ELECTRA discriminator (safetensors + tokenizer).")
    parser.add_argument("--preset", default="electra-small", help="shape from `harness models`")
    parser.add_argument("--tokenizer", default="google/electra-small-discriminator",
                        help="tokenizer directory or hub id (default: %(default)s)")
    parser.add_argument("--output", type=Path, required=True, help="checkpoint directory to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-existing", action="store_true",
                        help="succeed without writing when --output already holds a checkpoint")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    import transformers

    from foundation.infra.errors import UserError
    from foundation.models.layout import has_weights
    from foundation.models.presets import discriminator_config, get_preset
    from foundation.training.quiet import quiet_transformers
    from pretrain.random_init import write_random_init

    preset = get_preset(args.preset)
    if args.keep_existing and has_weights(args.output):
        print(f"keeping the checkpoint already in {args.output}")
        return 0
    if args.output.exists() and any(args.output.iterdir()):
        raise UserError(f"output directory {str(args.output)!r} is not empty; choose a new --output")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(args.tokenizer)
    except (OSError, ValueError) as error:
        raise UserError(f"could not load tokenizer {args.tokenizer!r} ({type(error).__name__}); pass a "
                        "directory with vocab.txt/tokenizer.json as --tokenizer") from error
    model_config = discriminator_config(preset, len(tokenizer))
    with quiet_transformers():  # its "Writing model shards" bar is noise for one small file
        model = write_random_init(model_config, tokenizer, args.output, args.seed)
    print(f"wrote random-init {preset.name} ({model.num_parameters():,} parameters) to {args.output}")
    return 0

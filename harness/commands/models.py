"""`harness models`: the model registry's names and shapes."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("models", help="list the model registry",
                                   description="List named models: released discriminators and presets.")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from pretrain.common.models import PRESETS

    print(f"{'name':14} {'hidden':>6} {'layers':>6} {'heads':>5} {'ffn':>5} {'embed':>5}  weights")
    for p in PRESETS.values():
        weights = p.hub_id or "none released: harness pretrain"
        shape = p.shape
        print(f"{p.name:14} {shape.hidden_size:>6} {shape.num_layers:>6} {shape.num_heads:>5} "
              f"{shape.intermediate_size:>5} {shape.embedding_size:>5}  {weights}")
    print("\nAny Hugging Face checkpoint directory or `harness pretrain` output directory is also a --model.")
    return 0

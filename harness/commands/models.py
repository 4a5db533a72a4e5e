"""`harness models`: the model registry's names and shapes."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("models", help="list the model registry",
                                   description="List named models: released discriminators and presets.")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from pretrain.models import PRESETS

    print(f"{'name':14} {'hidden':>6} {'layers':>6} {'heads':>5} {'ffn':>5} {'embed':>5}  weights")
    for p in PRESETS.values():
        weights = p.hub_id or "none released: harness pretrain"
        print(f"{p.name:14} {p.hidden_size:>6} {p.num_layers:>6} {p.num_heads:>5} {p.intermediate_size:>5} "
              f"{p.embedding_size:>5}  {weights}")
    print("\nAny Hugging Face checkpoint directory or `harness pretrain` output directory is also a --model.")
    return 0

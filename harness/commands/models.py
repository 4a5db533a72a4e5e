"""`harness models`: the model registry's names and shapes, and what else --model takes."""

from __future__ import annotations

FAMILIES = """\
--model also takes any Hugging Face Hub id (org/name, or org/name@revision; offline, from the Hub cache),
any local checkpoint directory, or a `harness pretrain` output directory.

Families: any encoder transformers' AutoModelForSequenceClassification loads. Tested end to end (GLUE,
SQuAD, search, ONNX export, harness predict) on electra, bert, roberta, deberta-v2 (DeBERTa-v3),
distilbert and modernbert checkpoints. ELECTRA discriminators get ELECTRA's GLUE head, other families
their own (head=auto); every family gets ELECTRA's fine-tuning recipe, its row (small, base, large) by
width and depth. A family transformers does not know needs trust_remote_code=true."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("models", help="list the model registry and the families that run",
                                   description="List named models (released discriminators and presets) "
                                               "and what else --model takes.")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from foundation.models.presets import PRESETS

    print(f"{'name':14} {'hidden':>6} {'layers':>6} {'heads':>5} {'ffn':>5} {'embed':>5}  weights")
    for p in PRESETS.values():
        weights = p.hub_id or "none released: harness pretrain"
        shape = p.shape
        print(f"{p.name:14} {shape.hidden_size:>6} {shape.num_layers:>6} {shape.num_heads:>5} "
              f"{shape.intermediate_size:>5} {shape.embedding_size:>5}  {weights}")
    print("\n" + FAMILIES)
    return 0

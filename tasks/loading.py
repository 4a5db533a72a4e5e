"""Loading a checkpoint into a model with a new head, without transformers' expected-mismatch report."""

from __future__ import annotations

import torch

from pretrain.quiet import quiet_transformers


def from_pretrained_quietly(model_class, model_path, **kwargs) -> torch.nn.Module:
    """model_class.from_pretrained(model_path, **kwargs) with transformers' load report and bar off.

    A pre-training checkpoint always lacks the new head and has the RTD head we drop, and a fine-tuned
    one loaded for export matches exactly: either way the report (and the weight-loading bar) is noise.
    """
    with quiet_transformers():
        return model_class.from_pretrained(model_path, **kwargs)

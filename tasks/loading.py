"""Loading a checkpoint into a model with a new head, without transformers' expected-mismatch report."""

from __future__ import annotations

import pickle
import re

import torch

from foundation.infra.errors import UserError
from foundation.training.quiet import quiet_transformers


def from_pretrained_quietly(model_class, model_path, **kwargs) -> torch.nn.Module:
    """model_class.from_pretrained(model_path, **kwargs) with transformers' load report and bar off.

    A pre-training checkpoint always lacks the new head and has the RTD head we drop, and a fine-tuned
    one loaded for export matches exactly: either way the report (and the weight-loading bar) is noise.
    """
    try:
        with quiet_transformers():
            return model_class.from_pretrained(model_path, **kwargs)
    except pickle.UnpicklingError as error:  # torch.load(weights_only=True) refused the .bin
        raise UserError(_refused_pickle(str(model_path), str(error))) from error


def _refused_pickle(model_path: str, detail: str) -> str:
    found = re.search(r"GLOBAL ([\w.]+)", detail)  # torch names the first callable it would not import
    why = f"it would call {found.group(1)}" if found else "torch.load(weights_only=True) cannot read it"
    return (f"refused to load the pytorch_model.bin weights in {model_path!r}: the file is not a plain "
            f"tensor pickle ({why}), and unpickling anything else can run code; get model.safetensors "
            "from a source you trust, or convert a copy you trust with save_pretrained()")

"""The model a fine-tuning run starts from, and where it runs: checkpoint, tokenizer, config, device,
attention and precision, resolved once per invocation (harness run, harness search)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers

from pretrain.common import placement
from pretrain.common.checkpoint_check import check_checkpoint
from pretrain.common.errors import UserError
from pretrain.common.models import resolve_model, size_of
from tasks.config import FinetuneConfig


@dataclass(frozen=True)
class ModelSetup:
    """The resolved model and where it runs."""

    model_path: str
    tokenizer: transformers.PreTrainedTokenizerBase
    model_config: transformers.PretrainedConfig
    size: str  # recipe row: small, base or large
    device: torch.device
    attention: str  # attn_implementation
    precision: str  # "bf16" or "fp32", as used


def load(model: str, precision: str) -> ModelSetup:
    """Resolve --model, load its tokenizer and config, and pick the device, attention and precision."""
    model_path = resolve_model(model)
    model_config = load_model_config(model_path)  # first: the tokenizer reads config.json too
    tokenizer = load_tokenizer(model_path)
    check_checkpoint(model_path, model_config, tokenizer)  # damaged or mismatched files: one line, now
    device = placement.pick_device("auto")
    used = placement.resolve_precision(precision, device)
    attention = placement.resolve_attention("auto", device, used)
    return ModelSetup(model_path, tokenizer, model_config, size_of(model_config.hidden_size), device,
                      attention, used)


def load_model_config(model_path: str) -> transformers.PretrainedConfig:
    """The checkpoint's config, or a UserError naming config.json and what is wrong with it."""
    from huggingface_hub.errors import StrictDataclassError  # a field of the wrong type

    path = _config_json(model_path)
    try:
        return transformers.AutoConfig.from_pretrained(model_path)
    except (OSError, ValueError, TypeError, StrictDataclassError) as error:
        reason = " ".join(str(error).split())
        raise UserError(f"{path!r} is not a usable model config ({reason}); restore it or save the model "
                        "again with save_pretrained()") from error


def _config_json(model_path: str) -> str:
    """Path of model_path's config.json, after checking it is JSON: a broken one breaks every loader."""
    path = Path(model_path) / "config.json"
    if not path.exists():
        return str(path)  # a tokenizer folder may lack one; AutoConfig says so itself
    try:
        json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{str(path)!r} is not valid JSON ({error}); restore it or save the model again "
                        "with save_pretrained()") from error
    return str(path)


def load_tokenizer(model_path: str):
    _config_json(model_path)
    try:
        return transformers.AutoTokenizer.from_pretrained(model_path)
    except (OSError, ValueError, TypeError) as error:
        raise UserError(f"no usable tokenizer in {model_path!r} ({type(error).__name__}); save one there "
                        "with tokenizer.save_pretrained()") from error


def accelerator(device: torch.device) -> str:
    """What computed a run, for results.json: the GPU's name, or "cpu" (`device` names the host CPU)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def as_run(setup: ModelSetup, config: FinetuneConfig) -> dict[str, str]:
    """The device-dependent settings as this run resolves them: precision and compile, never "auto"."""
    return {"precision": setup.precision,
            "compile": "on" if placement.resolve_compile(config.compile, setup.device) else "off"}

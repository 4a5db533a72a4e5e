"""The model a fine-tuning run starts from, and where it runs: checkpoint, tokenizer, config, device,
attention and precision, resolved once per invocation (harness run, harness search)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import transformers

from foundation.infra.errors import UserError
from foundation.models.checkpoint_check import check_checkpoint
from foundation.models.hub import needs_remote_code
from foundation.models.identity import ModelIdentity, identify
from foundation.models.presets import size_of
from foundation.models.resolve import resolve
from foundation.training import distributed, placement
from tasks.config import FinetuneConfig, fit_max_length, head_for


@dataclass(frozen=True)
class ModelSetup:
    """The resolved model and where it runs."""

    identity: ModelIdentity  # --model, its checkpoint folder, key, config.json and pre-training record
    tokenizer: transformers.PreTrainedTokenizerBase
    model_config: transformers.PretrainedConfig
    size: str  # recipe row: small, base or large, by the encoder's width and depth
    device: torch.device
    attention: str  # attn_implementation
    precision: str  # "bf16" or "fp32", as used
    family: str = "electra"  # the config's model_type: electra, bert, roberta, deberta-v2, ...
    trust_remote_code: bool = False  # the checkpoint's own code may run (the user said so)

    @property
    def model_path(self) -> str:
        """The local checkpoint folder every from_pretrained reads."""
        return self.identity.path

    @property
    def head(self) -> str:
        """The GLUE head head=auto stands for with this family (decided in tasks/config.py, head_for)."""
        return head_for("auto", self.family)

    @property
    def recipe(self) -> str:
        """The recipe this model is fine-tuned with, as results.json and the leaderboard record it."""
        return f"electra-{self.size}"

    @property
    def load_options(self) -> dict:
        """What every from_pretrained of this model passes besides the path."""
        return {"attn_implementation": self.attention, "trust_remote_code": self.trust_remote_code}


def load(model: str, precision: str, trust_remote_code: bool = False) -> ModelSetup:
    """Resolve --model, load its tokenizer and config, and pick the device, attention and precision."""
    resolved = resolve(model, trust_remote_code)
    model_path = resolved.path
    written = _config_json(model_path)  # read once, and first: a broken config.json breaks every loader
    remote = needs_remote_code(written)
    if remote and not trust_remote_code:
        raise UserError(f"{model!r} is a {remote!r} model that transformers can only load by running code "
                        "from its repository; pass trust_remote_code=true if you trust that code")
    model_config = load_model_config(model_path, trust_remote_code)  # before the tokenizer, which reads it
    tokenizer = _tokenizer(model_path, trust_remote_code)
    check_checkpoint(model_path, model_config, tokenizer)  # damaged or mismatched files: one line, now
    identity = identify(model, model_path, written, resolved.source, resolved.license)
    device = placement.pick_device("auto", distributed.local_rank())  # under torchrun: cuda:LOCAL_RANK
    used = placement.resolve_precision(precision, device)
    attention = _supported(placement.resolve_attention("auto", device, used), model_config)
    shape = (model_config.hidden_size, model_config.num_hidden_layers)
    return ModelSetup(identity, tokenizer, model_config, size_of(*shape), device, attention, used,
                      model_config.model_type, trust_remote_code)


def require(setup: ModelSetup, auto_class, kind: str) -> None:
    """A UserError, before any data is read or anything trains, where transformers has no `auto_class`
    head (AutoModelForSequenceClassification, ...) for this family."""
    if setup.trust_remote_code or type(setup.model_config) in auto_class._model_mapping:
        return
    raise UserError(f"{kind} needs a {auto_class.__name__.removeprefix('AutoModelFor')} head, and "
                    f"transformers has none for {setup.family!r} models ({setup.model_path}); choose an "
                    "encoder family that has one")


def _supported(attention: str, config: transformers.PretrainedConfig) -> str:
    """SDPA where the family has it, else eager (DeBERTa-v2/v3 has only eager attention)."""
    mapping = transformers.AutoModel._model_mapping
    model_class = mapping[type(config)] if type(config) in mapping else None
    if attention == "sdpa" and model_class is not None and not getattr(model_class, "_supports_sdpa", True):
        return "eager"
    return attention


def load_model_config(model_path: str, trust_remote_code: bool = False) -> transformers.PretrainedConfig:
    """The checkpoint's config (its config.json checked as JSON first, by load), or a UserError naming
    config.json and what is wrong with it."""
    from huggingface_hub.errors import StrictDataclassError  # a field of the wrong type

    path = str(Path(model_path) / "config.json")
    try:
        return transformers.AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError, StrictDataclassError) as error:
        reason = " ".join(str(error).split())
        raise UserError(f"{path!r} is not a usable model config ({reason}); restore it or save the model "
                        "again with save_pretrained()") from error


def _config_json(model_path: str) -> dict:
    """model_path's config.json, after checking it is JSON: a broken one breaks every loader; {} where
    there is none (a tokenizer folder may lack one; AutoConfig says so itself)."""
    path = Path(model_path) / "config.json"
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{str(path)!r} is not valid JSON ({error}); restore it or save the model again "
                        "with save_pretrained()") from error


def load_tokenizer(model_path: str, trust_remote_code: bool = False):
    """model_path's tokenizer, its config.json checked first; a UserError where there is none."""
    _config_json(model_path)
    return _tokenizer(model_path, trust_remote_code)


def _tokenizer(model_path: str, trust_remote_code: bool):
    try:
        return transformers.AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError) as error:
        raise UserError(f"no usable tokenizer in {model_path!r} ({type(error).__name__}); save one there "
                        "with tokenizer.save_pretrained()") from error


def for_model(config: FinetuneConfig, setup: ModelSetup) -> FinetuneConfig:
    """The invocation's settings with head=auto replaced by the head it stands for with this model; a head
    the model's family cannot take is refused here, before any output or tracking."""
    if config.head == "electra" and setup.head != "electra":
        raise UserError(f"head=electra needs an ELECTRA discriminator, not a {setup.family} model; pass "
                        "head=hf (or leave head=auto) to keep the model's own classification head")
    return replace(config, head=setup.head) if config.head == "auto" else config


def fitted(config: FinetuneConfig, setup: ModelSetup, task_epochs: float, task_max_length: int,
           head: str | None, longer: str = "cut") -> FinetuneConfig:
    """`config` resolved for the task (FinetuneConfig.resolved), its max_length fitted to the model's
    positions by the one rule every kind takes (tasks/config.py fit_max_length; `longer`: what the kind
    does with its own length where the model has fewer positions)."""
    positions = getattr(setup.model_config, "max_position_embeddings", None)
    max_length = fit_max_length(config.max_length, task_max_length, positions, longer)
    return config.resolved(setup.size, task_epochs, max_length, head)


def accelerator(device: torch.device) -> str:
    """What computed a run, for results.json: the GPU's name, or "cpu" (`device` names the host CPU)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def resolved_device_settings(setup: ModelSetup, config: FinetuneConfig) -> dict[str, str]:
    """The device-dependent settings as this run resolves them: precision and compile, never "auto"."""
    return {"precision": setup.precision,
            "compile": "on" if placement.resolve_compile(config.compile, setup.device) else "off"}

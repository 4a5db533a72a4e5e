"""A `--model` value resolved to a local checkpoint folder that `from_pretrained` accepts: a checkpoint or
`harness pretrain` output folder, a preset's released Hub id, or any Hub id (from the Hub or its cache).

Model identity (CONTRIBUTING.md): fine-tuning, search and export resolve through it; a run's FLOPs
count takes what its model setup resolved (identity.py).
"""

from __future__ import annotations

from pathlib import Path

from foundation.infra.errors import UserError
from foundation.models import hub
from foundation.models.layout import checkpoint_dir
from foundation.models.presets import PRESETS


def resolve_model(name_or_path: str, trust_remote_code: bool = False) -> str:
    """Turn a `--model` value into a local checkpoint directory that `from_pretrained` accepts.

    Accepts, in this order: a Hugging Face checkpoint directory or a `harness pretrain` output directory
    (whose discriminator lives in `discriminator/`); a registry name (a shorthand for its released Hub
    id); any Hub id, `org/name` with an optional `@revision`, from the Hub or, offline, from its cache.
    trust_remote_code: fetch a Hub repo's *.py files too (they run only where the user allows it).
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(checkpoint_dir(path))
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

"""Which model a run starts from, resolved once: the `--model` value as given, its local checkpoint, its
stable key (model_id), its config.json and its pre-training record. A fine-tuning run's model setup
fills one ModelIdentity and every later step (the FLOPs count included) reads it.

Model identity (README, "Architecture"): imports only foundation.infra and foundation.models.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.models import pretrain_meta
from foundation.models.hub import parse_hub_id
from foundation.models.layout import pretrain_record_path
from foundation.models.packaged import is_package_source
from foundation.models.presets import PRESETS, published_hub_id


@dataclass(frozen=True)
class ModelIdentity:
    """A `--model` value resolved: what it names, where its files are, what its config and pre-training
    record say."""

    name: str  # --model as given
    path: str  # the local checkpoint folder (resolve.resolve_model)
    model_id: str  # the leaderboard's key (model_identity)
    config: dict[str, Any]  # config.json, as written
    pretrain_path: Path | None = None  # pretrain_meta.json in or beside the folder; None without one
    pretrain: pretrain_meta.PretrainMeta | None = None  # that record, read
    source: str = ""  # where the files came from (resolve.Resolved.source); "" where not said
    license: str | None = None  # the checkpoint's licence, where known


def identify(name: str, path: str, config: dict[str, Any], source: str = "",
             license: str | None = None) -> ModelIdentity:
    """The identity of `name`, resolved to the checkpoint `path` whose config.json holds `config` (from
    `source`, under `license`); its pre-training record read here (an unreadable one is a UserError)."""
    found = pretrain_record_path(Path(path))
    record = pretrain_meta.read(found) if found is not None else None
    return ModelIdentity(name, path, model_identity(name, path), config, found, record, source, license)


def model_identity(name: str, path: str) -> str:
    """A stable key for a discriminator: its Hub id (a registry name's, whatever source its files came
    from, or the one given, with its revision), a package source as written, else its absolute path."""
    if not Path(name).expanduser().is_dir():
        hub_id = published_hub_id(name)
        if hub_id:
            return hub_id
        if is_package_source(name):
            return name
        found = None if name in PRESETS else parse_hub_id(name)
        if found is not None:
            return found[0] if found[1] is None else f"{found[0]}@{found[1]}"
    return str(Path(path).expanduser().resolve())

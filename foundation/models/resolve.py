"""A `--model` value resolved to a local checkpoint folder that `from_pretrained` accepts: a checkpoint or
`harness pretrain` output folder, a registry name (a preset's released Hub id, or a published checkpoint:
its Hub id from the Hub or its cache, else its installed package, sha256-checked), a folder inside an
installed package (`pkg:NAME/FOLDER`), or any Hub id (from the Hub or its cache).

Model identity (CONTRIBUTING.md): fine-tuning, search and export resolve through it; a run's FLOPs
count takes what its model setup resolved (identity.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from foundation.infra.errors import UserError
from foundation.models import hub, packaged
from foundation.models.checkpoint_check import check_sha256
from foundation.models.layout import checkpoint_dir, config_dir
from foundation.models.presets import CHECKPOINTS, PRESETS, PublishedCheckpoint, published_hub_id

LOCAL = "local folder"


@dataclass(frozen=True)
class Resolved:
    """Where a `--model` value's files are, where they came from, and their licence where known."""

    path: str
    # LOCAL, "Hub cache (org/name@rev)", "Hugging Face Hub (...)", "package NAME VERSION (pkg:...)"
    source: str
    license: str | None = None  # the registry row's, else the checkpoint's model card's front matter


def resolve_model(name_or_path: str, trust_remote_code: bool = False) -> str:
    """The local checkpoint directory of a `--model` value (resolve's path)."""
    return resolve(name_or_path, trust_remote_code).path


def resolve(name_or_path: str, trust_remote_code: bool = False) -> Resolved:
    """Turn a `--model` value into a local checkpoint directory that `from_pretrained` accepts.

    Accepts, in this order: a Hugging Face checkpoint directory or a `harness pretrain` output directory
    (whose discriminator lives in `discriminator/`); a published checkpoint's registry name or Hub id; a
    preset's name (a shorthand for its released Hub id); `pkg:NAME/FOLDER`, a folder inside an installed
    Python package; any Hub id, `org/name` with an optional `@revision`, from the Hub or, offline, its cache.
    trust_remote_code: fetch a Hub repo's *.py files too (they run only where the user allows it).
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if config_dir(path) is None and name_or_path in registry_names():
            raise _shadowed(name_or_path, path)
        return _local(checkpoint_dir(path), LOCAL)
    published = published_checkpoint(name_or_path)
    if published is not None:
        return _published(published, trust_remote_code)
    if name_or_path in PRESETS:
        preset = PRESETS[name_or_path]
        if preset.hub_id is None:
            raise UserError(f"{preset.name!r} is a shape without released weights; pre-train it with "
                            f"`harness pretrain --preset {preset.name}` and pass the output directory")
        return _hub(preset.hub_id, None, trust_remote_code)
    if packaged.is_package_source(name_or_path):
        found = packaged.package_checkpoint(name_or_path)
        return _local(checkpoint_dir(found.path), _package_source(found, name_or_path))
    found = hub.parse_hub_id(name_or_path)  # None for a path: ids start with a letter, digit or '_'
    if found is None:
        raise UserError(f"model directory {name_or_path!r} does not exist; pass an existing checkpoint "
                        f"directory, a Hub id such as google/electra-small-discriminator, or one of "
                        f"{', '.join(registry_names())}")
    if "/" in found[0]:
        return _hub(*found, trust_remote_code)
    try:  # one word: a legacy Hub id (bert-base-uncased), or a mistyped registry name
        return _hub(*found, trust_remote_code)
    except UserError as error:
        raise UserError(f"unknown model {name_or_path!r}; choose one of {', '.join(registry_names())}, pass "
                        f"a checkpoint directory or a Hub id such as google/electra-small-discriminator "
                        f"({hub.NOT_FOUND})") from error


def _shadowed(name: str, path: Path) -> UserError:
    """A folder named as a registry entry, holding no checkpoint: a folder wins (as in transformers), so
    say which one was taken and how to reach the other."""
    return UserError(f"{name!r} is a folder here ({str(path.resolve())!r}) holding no checkpoint, and a "
                     f"folder is taken before the registry's {name}; run from another directory, rename the "
                     f"folder, or pass the registry's model by its Hub id ({published_hub_id(name)})")


def registry_names() -> list[str]:
    """The registry names that stand for weights: published checkpoints and released presets."""
    return [*CHECKPOINTS, *(n for n, p in PRESETS.items() if p.hub_id)]


def published_checkpoint(value: str) -> PublishedCheckpoint | None:
    """The published checkpoint a `--model` value names: by registry name, or by its Hub id (bare or at its
    pinned revision), which resolves the same way."""
    if value in CHECKPOINTS:
        return CHECKPOINTS[value]
    return next((c for c in CHECKPOINTS.values() if value in (c.hub_id, f"{c.hub_id}@{c.revision}")), None)


def _published(checkpoint: PublishedCheckpoint, trust_remote_code: bool) -> Resolved:
    """Its Hub id at the pinned revision from the Hub or its cache, else its installed package; either way
    its weights must hash to the official file's."""
    shown = f"{checkpoint.name} ({checkpoint.hub_id})"
    try:
        folder = hub.hub_checkpoint(checkpoint.hub_id, checkpoint.revision, code=trust_remote_code)
        source = f"{hub.where()} ({checkpoint.hub_id}@{checkpoint.revision[:8]})"
        fix = (f"download it again: hf download {checkpoint.hub_id} --revision {checkpoint.revision} "
               "--force-download")
    except UserError as error:
        try:
            found = packaged.package_checkpoint(checkpoint.package, checkpoint.install)
        except UserError:
            raise UserError(f"{shown} is neither in the Hugging Face Hub cache nor installed as a package; "
                            f"{checkpoint.install} (or, where the Hub is reachable, hf download "
                            f"{checkpoint.hub_id} --revision {checkpoint.revision})") from error
        folder, source, fix = found.path, _package_source(found, checkpoint.package), found.reinstall
    check_sha256(Path(folder) / "model.safetensors", checkpoint.sha256,
                 f"{checkpoint.hub_id}@{checkpoint.revision[:8]}", fix)
    return Resolved(str(checkpoint_dir(Path(folder))), source, checkpoint.license)


def _hub(repo_id: str, revision: str | None, trust_remote_code: bool) -> Resolved:
    folder = hub.hub_checkpoint(repo_id, revision, code=trust_remote_code)
    return _local(folder, f"{hub.where()} ({repo_id}{'@' + revision if revision else ''})")


def _local(folder: Path, source: str) -> Resolved:
    return Resolved(str(folder), source, card_license(folder))


def _package_source(found: packaged.PackageCheckpoint, value: str) -> str:
    return f"package {found.distribution} ({value})" if found.distribution else f"package ({value})"


def card_license(folder: Path) -> str | None:
    """The `license:` of a checkpoint's model card (README.md's front matter), None without one."""
    card = Path(folder) / "README.md"
    if not card.is_file():
        return None
    from huggingface_hub import metadata_load

    try:
        found = (metadata_load(card) or {}).get("license")
    except Exception:  # noqa: BLE001 - a card's front matter that does not parse tells no licence
        return None
    return str(found) if isinstance(found, str) and found else None

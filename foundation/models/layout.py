"""Where a checkpoint's parts lie: the weights files a Hugging Face folder may hold, and the layout of a
`harness pretrain` output (the discriminator and generator as plain transformers folders, and the run's
record, pretrain_meta.json, that reports read).

Model identity (CONTRIBUTING.md): imports only foundation.infra.errors and .hub.
"""

from __future__ import annotations

from pathlib import Path

from foundation.infra.errors import UserError
from foundation.models import hub

WEIGHT_FILES = hub.WEIGHTS_ANY
DISCRIMINATOR_DIR = "discriminator"
GENERATOR_DIR = "generator"
PRETRAIN_META = "pretrain_meta.json"


def has_weights(directory: Path) -> bool:
    return _has_any(directory, WEIGHT_FILES)


def config_dir(path: Path) -> Path | None:
    """The folder holding the model's config.json: `path` itself or a pre-training output's discriminator."""
    for candidate in (path, path / DISCRIMINATOR_DIR):
        if (candidate / "config.json").is_file():
            return candidate
    return None


def checkpoint_dir(path: Path) -> Path:
    candidate = config_dir(path)
    if candidate is None:
        raise UserError(f"{str(path)!r} is not a Hugging Face checkpoint (no config.json in it or in its "
                        f"{DISCRIMINATOR_DIR}/ folder); pass the directory save_pretrained() wrote")
    if not has_weights(candidate):
        raise UserError(f"model directory {str(candidate)!r} has a config.json but no weights "
                        f"({' or '.join(WEIGHT_FILES[::2])}); save the model with save_pretrained() "
                        "or create a random-init one with `harness init`")
    return candidate


def pretrain_record_path(model_path: Path) -> Path | None:
    """The pre-training record of a checkpoint folder: in it (a checkpoint of the run) or beside it (an
    output's discriminator/); None where neither holds one."""
    for path in (model_path / PRETRAIN_META, model_path.parent / PRETRAIN_META):
        if path.is_file():
            return path
    return None


def _has_any(directory: Path, names: tuple[str, ...]) -> bool:
    return any((directory / name).is_file() for name in names)

"""Hugging Face Hub ids as `--model` values: `org/name` with an optional `@revision`, resolved to a local
snapshot folder by huggingface_hub's own `snapshot_download`, which is what `from_pretrained` calls. Offline
(HF_HUB_OFFLINE=1) it reads the cache in its hub layout (`models--org--name/refs/<revision>`,
`snapshots/<commit>/`), exactly as `from_pretrained` would.

Model identity: imports only foundation.infra.errors, and huggingface_hub or transformers inside
the functions that need them.
"""

from __future__ import annotations

import re
from pathlib import Path

from foundation.infra.errors import UserError

# The Hub's repo-id rule (huggingface_hub's validate_repo_id): letters, digits, '-', '_', '.', one optional
# '/' between namespace and name; a revision (branch, tag or commit) may follow an '@'.
_HUB_ID = re.compile(r"^(?P<repo>(?:[\w][\w.-]{0,95}/)?[\w][\w.-]{0,95})(?:@(?P<revision>[\w./-]+))?$")
WEIGHTS_SAFE = ("model.safetensors", "model.safetensors.index.json")
WEIGHTS_ANY = (*WEIGHTS_SAFE, "pytorch_model.bin", "pytorch_model.bin.index.json")
# What a checkpoint needs besides its weights: configs, vocabularies (WordPiece .txt, BPE merges .txt,
# SentencePiece .model). Never *.py: code from the Hub runs only where the user allows it. Top-level files
# only (_top_level): in huggingface_hub's filter '*' matches '/' too, so '*.json' took every sub-folder's.
_FILES = ["*.json", "*.txt", "*.model"]
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
NOT_FOUND = "not found on the Hub or in its cache"


def parse_hub_id(value: str) -> tuple[str, str | None] | None:
    """(repo id, revision) of an `org/name[@revision]` value, or None when it is not shaped like one (a
    path starting with '.', '~' or '/' never is: an id starts with a letter, digit or '_')."""
    match = _HUB_ID.match(value)
    if match is None or ".." in value or value.endswith((".", "/")):
        return None
    return match.group("repo"), match.group("revision")


def hub_checkpoint(repo_id: str, revision: str | None = None, code: bool = False) -> Path:
    """The snapshot folder of a Hub checkpoint, safetensors preferred: the pickled .bin is fetched only for a
    repo without them (transformers reads it with torch.load(weights_only=True): tensors, never code).
    code: also the repo's *.py files (for trust_remote_code), which needs `revision` to be a commit: code
    that runs must not change under the same name."""
    if code and not (revision and _COMMIT.match(revision)):
        pinned = f"{revision!r} is a branch or tag, which can move" if revision else "no revision is pinned"
        raise UserError(f"trust_remote_code=true runs code from the Hub repo {repo_id!r}, but {pinned}; pass "
                        f"--model {repo_id}@<commit> (the 40-hex commit id of the code you have read)")
    extra = ["*.py"] if code else []
    folder = _snapshot(repo_id, revision, _FILES + extra + ["*.safetensors"])
    if not any((folder / name).is_file() for name in WEIGHTS_SAFE):
        folder = _snapshot(repo_id, revision, _FILES + extra + ["pytorch_model*.bin"])
    if not any((folder / name).is_file() for name in WEIGHTS_ANY):
        raise UserError(f"the Hub snapshot of {_shown(repo_id, revision)} (in {str(folder)!r}) has no "
                        "weights (model.safetensors or pytorch_model.bin); connect once so they download, or "
                        "pass a local checkpoint directory as --model")
    return folder


def _snapshot(repo_id: str, revision: str | None, allow_patterns: list[str]) -> Path:
    import huggingface_hub
    from huggingface_hub import constants

    try:
        if not constants.HF_HUB_OFFLINE:  # offline: the cached snapshot, as from_pretrained reads it
            allow_patterns = _top_level(repo_id, revision, allow_patterns)
        return Path(huggingface_hub.snapshot_download(repo_id, revision=revision,
                                                      allow_patterns=allow_patterns))
    except Exception as error:  # offline and not cached, unknown repo, gated, no network: one answer
        where = "offline (HF_HUB_OFFLINE=1)" if constants.HF_HUB_OFFLINE else "online"
        raise UserError(
            f"{_shown(repo_id, revision)} is not a local directory and could not be had from the Hugging "
            f"Face Hub or its cache {constants.HF_HUB_CACHE!r} ({where}: {type(error).__name__}); download "
            f"it once with `hf download {repo_id}` where the Hub is reachable, point HF_HUB_CACHE at a cache "
            "that holds it, or pass a local checkpoint directory as --model") from error


def _top_level(repo_id: str, revision: str | None, patterns: list[str]) -> list[str]:
    """The repo's top-level files that match `patterns`, each as a pattern that matches only itself."""

    import huggingface_hub

    try:
        files = huggingface_hub.list_repo_files(repo_id, revision=revision)
    except Exception:  # noqa: BLE001 - unreachable: snapshot_download falls back to the cache or says why
        return patterns
    return top_level_files(files, patterns)


def top_level_files(files: list[str], patterns: list[str]) -> list[str]:
    """Of a repo's `files`, those in its top folder matching a pattern, escaped for fnmatch."""
    import fnmatch
    import glob

    return [glob.escape(name) for name in files
            if "/" not in name and any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)]


def where() -> str:
    """Where a snapshot was had from, as a run's record says: the cache when offline, else the Hub."""
    from huggingface_hub import constants

    return "Hub cache" if constants.HF_HUB_OFFLINE else "Hugging Face Hub"


def _shown(repo_id: str, revision: str | None) -> str:
    return repr(f"{repo_id}@{revision}" if revision else repo_id)


def needs_remote_code(config: object) -> str | None:
    """The model_type of a checkpoint, by its config.json as read, that transformers can only load with the
    repo's own code (trust_remote_code), or None for one it knows."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = config.get("model_type") if isinstance(config, dict) else None
    if config and "auto_map" in config and model_type not in CONFIG_MAPPING:
        return str(model_type)
    return None

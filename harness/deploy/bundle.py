"""The deployment bundle's manifest: what a bundle holds, its checksums, and checking them on load.

A bundle is a directory with model.onnx (fp32), optionally model.int8.onnx, tokenizer.json and
manifest.json. The manifest names the task, its labels, the input limits, the versions that made
it, a sha256 for every other file and, last, a sha256 of itself (`manifest_sha256`, over the
manifest without that key), so an edited label list is caught like an edited model. These catch
corruption and stray edits, not a forger who rewrites the checksums too. Torch-free: the runtime
imports this module.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from datetime import UTC, datetime
from pathlib import Path

from foundation.infra.confined import confined
from foundation.infra.errors import UserError
from harness.kinds import pipelines

BUNDLE_FORMAT = "electra-harness/onnx-bundle/2"  # 2: the manifest carries its own sha256
MANIFEST = "manifest.json"
SEAL = "manifest_sha256"
TOKENIZER = "tokenizer.json"
MODEL_FILES = {"fp32": "model.onnx", "int8": "model.int8.onnx"}
# The inputs a bundle may take: the tokenizer's own (its model_input_names, in this order), and for a span
# model the answer mask's context_mask (tasks/squad_spans.context_mask); a bundle lists its own.
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids", "context_mask")
TOKEN_INPUTS = INPUT_NAMES[:3]
# One value (a tagger's: one row of tag logits) per position; the rest one per example.
PER_TOKEN_OUTPUTS = ("start_logits", "end_logits", "tag_logits")
VERSIONED = ("electra-harness", "torch", "transformers", "onnx", "onnxruntime", "tokenizers", "numpy")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_entries(directory: Path, names: list[str]) -> dict[str, dict]:
    """Manifest `files` entries (sha256 and size) for the named files in `directory`."""
    return {name: {"sha256": sha256(directory / name), "bytes": (directory / name).stat().st_size}
            for name in names}


def new_manifest(directory: Path, files: list[str], fields: dict) -> dict:
    """A manifest of `fields` plus the format, the package versions and checksums of `files`."""
    versions = {}
    for package in VERSIONED:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {"format": BUNDLE_FORMAT, **fields, "versions": versions,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "files": file_entries(directory, files)}


def manifest_digest(manifest: dict) -> str:
    """sha256 of the manifest as canonical JSON, without its own checksum."""
    body = {key: value for key, value in manifest.items() if key != SEAL}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_manifest(directory: Path) -> dict:
    """The bundle's manifest, checked for the fields the runtime reads."""
    if directory.exists() and not directory.is_dir():
        raise UserError(f"--bundle {str(directory)!r} is a file, not a bundle directory; pass the folder "
                        "`harness export onnx` wrote (its --output)")
    if not directory.is_dir():
        raise UserError(f"bundle directory {str(directory)!r} does not exist; pass the --output of "
                        "`harness export onnx`")
    path = directory / MANIFEST
    if not path.is_file():
        raise UserError(f"{str(directory)!r} has no {MANIFEST}; is it a bundle written by "
                        "`harness export onnx`?")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"{path} is not valid JSON ({error}); re-export the bundle") from error
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise UserError(f"{path} has format {found!r}, not {BUNDLE_FORMAT!r}; re-export the bundle "
                        "with this version of the harness")
    if manifest.get(SEAL) != manifest_digest(manifest):
        raise UserError(f"{path} was changed after export: its content does not match the {SEAL} it "
                        "carries; restore the bundle or re-export it")
    missing = [key for key in ("task", "kind", "max_length", "files", "pad_token_id") if key not in manifest]
    if missing:
        raise UserError(f"{path} lacks {', '.join(missing)}; re-export the bundle")
    known = pipelines()  # the pipelines of the registered kinds of task
    if manifest["kind"] not in known:
        raise UserError(f"{path} has kind {manifest['kind']!r}; expected one of {', '.join(known)}")
    if not isinstance(manifest["files"], dict) or \
            not all(isinstance(entry, dict) and "sha256" in entry for entry in manifest["files"].values()):
        raise UserError(f"{path} has no file list of checksums; re-export the bundle")
    for name in manifest["files"]:  # a seal proves no stray edit, not that its author meant well
        confined(directory, name, str(path), "re-export the bundle")
    return manifest


def verify_files(directory: Path, manifest: dict, names: list[str],
                 load: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Raise UserError unless each named file exists and matches its manifest checksum; the bytes of
    the `load` ones, read once: what was hashed is what the caller loads, whatever the file holds later."""
    loaded = {}
    for name in names:
        entry = manifest["files"].get(name)
        path = confined(directory, name, str(directory / MANIFEST), "re-export the bundle")
        if entry is None:
            raise UserError(f"{directory / MANIFEST} lists no {name}; choose a precision the bundle has "
                            f"({', '.join(p for p, f in MODEL_FILES.items() if f in manifest['files'])})")
        if not path.is_file():
            raise UserError(f"bundle file {str(path)!r} is missing; restore the bundle or re-export it")
        if name in load:
            loaded[name] = path.read_bytes()
            actual = sha256_bytes(loaded[name])
        else:
            actual = sha256(path)
        if actual != entry["sha256"]:
            raise UserError(f"checksum mismatch for {str(path)!r}: sha256 {actual[:12]}... but the manifest "
                            f"says {entry['sha256'][:12]}...; the file was changed or corrupted, re-export "
                            "the bundle")
    return loaded

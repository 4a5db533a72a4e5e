"""A checkpoint's files checked before a run writes anything: damaged weights, weights of another shape
than config.json says, a tokenizer with more tokens than the model's embedding.

Without these a weights file cut short by an interrupted download or copy ended in 30 lines of
`SafetensorError: incomplete metadata`, and the other two in a size-mismatch or index-out-of-range
traceback after the output folder and MLflow run existed. Only the safetensors headers (and a .bin's
zip directory) are read, not the tensors: cheap enough to run on every load, before any.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

from foundation.infra.confined import confined
from foundation.infra.errors import UserError

FIX_WEIGHTS = "copy or download the checkpoint again (or save it again with save_pretrained())"


def check_checkpoint(model_path: str, model_config, tokenizer) -> None:
    """Raise a one-line UserError if the checkpoint in `model_path` cannot be what its config says."""
    directory = Path(model_path)
    shapes = weight_shapes(directory)
    if shapes:
        check_shapes(directory, shapes, model_config)
    if len(tokenizer) <= len(tokenizer.all_special_tokens):  # transformers builds one from nothing
        raise UserError(f"the tokenizer in {model_path!r} has no vocabulary, only its {len(tokenizer)} "
                        "special tokens (its vocabulary files are missing); save the model's tokenizer there "
                        "(tokenizer.save_pretrained())")
    vocab = getattr(model_config, "vocab_size", None)
    if vocab is not None and len(tokenizer) > vocab:  # its largest ids would index past the embedding
        raise UserError(f"the tokenizer in {model_path!r} has {len(tokenizer)} tokens but the model's "
                        f"vocab_size is {vocab}: a tokenizer from another model; save this model's own "
                        "tokenizer there (tokenizer.save_pretrained())")


def check_sha256(path: Path, expected: str, what: str, fix: str) -> None:
    """A UserError unless the file at `path` hashes to `expected` (sha256 hex), the official file of `what`.
    Hashing the 91 MB of a small encoder takes 0.14 s here (reports/results/performance.md), against a
    run of minutes: it runs on every resolve, so that no cache's stale key lets a changed file through."""
    if not path.is_file():
        raise UserError(f"{str(path)!r} is missing: the checkpoint of {what} must hold its official weights "
                        f"file; {fix}")
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise UserError(f"weights file {str(path)!r} has sha256 {digest.hexdigest()[:16]}..., not that of "
                        f"{what}'s official file ({expected[:16]}...): a damaged or other file; {fix}")


def weight_shapes(directory: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from the safetensors headers (empty for .bin weights), each file checked whole."""
    index = directory / "model.safetensors.index.json"
    if (directory / "model.safetensors").is_file():
        files = [directory / "model.safetensors"]
    elif index.is_file():
        files = sorted(_indexed_files(index))
    else:  # .bin weights: their shapes would need unpickling; transformers' loader checks those
        if (directory / "pytorch_model.bin.index.json").is_file():  # its names confined all the same
            _indexed_files(directory / "pytorch_model.bin.index.json")
        if (directory / "pytorch_model.bin").is_file():
            _check_zip(directory / "pytorch_model.bin")
        return {}
    shapes = {}
    for path in files:
        shapes |= _safetensors_shapes(path)
    return shapes


def _indexed_files(index: Path) -> set[Path]:
    """The files an index names, each confined to the index's folder: transformers' loader opens
    `folder / name` for whatever the index says, `../x` and `/etc/passwd` included."""
    directory = index.parent
    # A Hub cache snapshot's files are symlinks into the repository's blobs/ folder: allowed there.
    blobs = (directory.parent.parent / "blobs",) if directory.parent.name == "snapshots" else ()
    return {confined(directory, name, repr(str(index)), FIX_WEIGHTS, also_within=blobs)
            for name in _weight_map(index).values()}


def _weight_map(index: Path) -> dict[str, str]:
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise UserError(f"{str(index)!r} is not a safetensors index (a JSON object with a weight_map: "
                        f"{type(error).__name__}: {error}); {FIX_WEIGHTS}") from None
    if not isinstance(weight_map, dict):
        raise UserError(f"{str(index)!r} has no weight_map object; {FIX_WEIGHTS}")
    return weight_map


def _safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    from safetensors import SafetensorError, safe_open

    if not path.is_file():
        raise UserError(f"weights file {str(path)!r}, named in the safetensors index, is missing; "
                        f"{FIX_WEIGHTS}")
    try:
        with safe_open(path, framework="np") as weights:  # validates the header against the file's size
            return {name: tuple(weights.get_slice(name).get_shape()) for name in weights.keys()}  # noqa: SIM118
    except (SafetensorError, OSError, ValueError) as error:
        reason = " ".join(str(error).split())
        raise UserError(f"weights file {str(path)!r} is damaged ({reason}; {path.stat().st_size} bytes), as "
                        f"a download or copy cut short leaves it; {FIX_WEIGHTS}") from None


def _check_zip(path: Path) -> None:
    """A .bin written by torch.save (a zip archive) must be whole; older pickle-format files pass."""
    with path.open("rb") as handle:
        if handle.read(4) != b"PK\x03\x04":
            return
    try:
        with zipfile.ZipFile(path) as archive:
            broken = archive.testzip()  # reads every member, checks its CRC
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise UserError(f"weights file {str(path)!r} is damaged ({error}; {path.stat().st_size} bytes), as a "
                        f"download or copy cut short leaves it; {FIX_WEIGHTS}") from None
    if broken is not None:
        raise UserError(f"weights file {str(path)!r} is damaged (member {broken!r} fails its CRC); "
                        f"{FIX_WEIGHTS}")


def check_shapes(directory: Path, shapes: dict[str, tuple[int, ...]], model_config) -> None:
    """Every tensor of the config's base model that the checkpoint holds has the shape the config gives."""
    import torch
    import transformers

    try:
        with torch.device("meta"):  # shapes only: no memory, no initialisation
            base = transformers.AutoModel.from_config(model_config)
    except (ValueError, KeyError):  # a config transformers builds no base model for: its loader will say
        return
    prefix = getattr(base, "base_model_prefix", "")
    wrong = []
    for name, tensor in base.state_dict().items():
        stored = next((shapes[key] for key in (name, f"{prefix}.{name}") if key in shapes), None)
        if stored is not None and stored != tuple(tensor.shape):
            wrong.append(f"{name} is {list(stored)}, the config makes it {list(tensor.shape)}")
    if wrong:
        more = f" (and {len(wrong) - 2} more)" if len(wrong) > 2 else ""
        raise UserError(f"the weights in {str(directory)!r} do not fit its config.json: "
                        f"{'; '.join(wrong[:2])}{more}; restore the config.json saved with these weights")

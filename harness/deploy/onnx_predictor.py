"""Torch-free inference on an ONNX bundle: tokenizers + onnxruntime + numpy, nothing else.

Imports neither torch nor transformers (tests/test_onnx.py checks), so a deployment needs only
`pip install onnxruntime tokenizers numpy` and this package. This module loads and verifies a bundle and
runs its model, requests batched longest first and padded to the longest in each batch; what differs by
pipeline (request keys, truncation or windows, the answers) is the bundle's `Pipeline`
(harness/deploy/pipeline.py), found through harness/kinds.py by the name in the manifest's "kind".

Batch input (`harness predict` from a file or stdin) is JSON Lines, one object per line, blank lines
skipped: the pipeline's two keys ({"text": ..., "text_pair": ...} for classification, {"question": ...,
"context": ...} for SQuAD, {"text": ...} or pre-split {"tokens": [...]} for tagging); an optional "id" is
echoed back. JSON Lines rather than TSV because sentences and contexts may hold tabs and quotes that TSV
cannot carry unescaped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import onnxruntime
from tokenizers import Encoding, Tokenizer

from foundation.infra.errors import UserError
from harness.deploy.bundle import (
    INPUT_NAMES,
    MODEL_FILES,
    PER_TOKEN_OUTPUTS,
    TOKENIZER,
    read_manifest,
    verify_files,
)
from harness.deploy.pipeline import Encoded, Pipeline, Request
from harness.kinds import pipelines

__all__ = ["Encoded", "Predictor", "Request", "pad_batch", "read_requests", "request_from_record"]

PRECISIONS = ("auto", *MODEL_FILES)


class Predictor:
    """A loaded, checksum-verified bundle that predicts batches of Requests through its pipeline."""

    def __init__(self, directory: str | Path, precision: str = "auto", batch_size: int = 32,
                 threads: int = 0):
        directory = Path(directory)
        if precision not in PRECISIONS:
            raise UserError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
        if batch_size < 1:
            raise UserError(f"batch size must be at least 1 (got {batch_size})")
        self.manifest = read_manifest(directory)
        if precision == "auto":
            precision = "int8" if MODEL_FILES["int8"] in self.manifest["files"] else "fp32"
        self.precision = precision
        used = [TOKENIZER, MODEL_FILES[precision]]  # first: a missing precision gets its own message
        # The two files used are read once, hashed and loaded from those bytes: a file swapped after
        # the check cannot be the one loaded.
        others = sorted(set(self.manifest["files"]) - set(used))
        loaded = verify_files(directory, self.manifest, used + others, load=tuple(used))
        self.max_length = int(self.manifest["max_length"])
        self.labels = self.manifest.get("labels")
        self.batch_size = batch_size
        self.tokenizer = _tokenizer(loaded.pop(TOKENIZER), directory / TOKENIZER)
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        # A second copy the pipeline may truncate with (long inputs, or contexts into windows).
        truncating = Tokenizer.from_str(self.tokenizer.to_str())
        pipeline = pipelines()[self.manifest["kind"]]  # the manifest's "kind" names the pipeline
        self.pipeline: Pipeline = pipeline(self.manifest, self.tokenizer, truncating)
        model = MODEL_FILES[precision]
        self.session = _session(loaded.pop(model), directory / model, threads)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def predict(self, requests: Sequence[Request]) -> list[dict]:
        """One result dict per request, in order; a "note" key says what was truncated."""
        encoded = self.encode(requests)
        outputs = dict(zip(self.output_names, self.infer(encoded.encodings), strict=True))
        by_request: list[list[int]] = [[] for _ in requests]
        for k, owner in enumerate(encoded.owners):
            by_request[owner].append(k)
        return [_finish(self.pipeline.decode(request, i, encoded, mine, outputs), request,
                        encoded.notes.get(i))
                for i, (request, mine) in enumerate(zip(requests, by_request, strict=True))]

    def encode(self, requests: Sequence[Request]) -> Encoded:
        """Model inputs: the pipeline's encodings of the checked requests."""
        for request in requests:
            self.check(request)
        return self.pipeline.encode(requests)

    def check(self, request: Request) -> None:
        """Raise UserError unless this bundle can take the request: valid text, the right number of texts."""
        self.pipeline.check(request)

    def rows(self, requests: Sequence[Request]) -> list[int]:
        """The model rows `encode` makes of each request, without running the model (what `harness serve`
        counts its limits in); may run beside a `predict` in another thread."""
        return self.pipeline.rows(requests)

    def batches(self, encodings: Sequence[Encoding]) -> Iterator[tuple[list[int], dict[str, np.ndarray]]]:
        """(indices, padded inputs) batches, longest first so each pads little."""
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))
        for first in range(0, len(order), self.batch_size):
            batch = order[first:first + self.batch_size]
            yield batch, pad_batch([encodings[i] for i in batch], int(self.manifest["pad_token_id"]),
                                   self.input_names, self.pipeline.columns)

    def infer(self, encodings: Sequence[Encoding]) -> list[list[np.ndarray]]:
        """Each model output, one array per encoding; per-token outputs cut to the encoding's length."""
        outputs: list[list] = [[None] * len(encodings) for _ in self.session.get_outputs()]
        per_token = [o.name in PER_TOKEN_OUTPUTS for o in self.session.get_outputs()]
        for batch, feed in self.batches(encodings):
            results = self.session.run(None, feed)
            for output, result, cut in zip(outputs, results, per_token, strict=True):
                for row, i in enumerate(batch):
                    output[i] = result[row, :len(encodings[i].ids)] if cut else result[row]
        return outputs


def pad_batch(encodings: Sequence[Encoding], pad_id: int, names: Sequence[str] = INPUT_NAMES[:3],
              columns: dict[str, Callable[[Encoding], list[int]]] | None = None) -> dict[str, np.ndarray]:
    """The named inputs as int64 arrays padded to the longest encoding: the tokenizer's, and `columns`
    (a pipeline's own inputs, each row computed from an encoding)."""
    length = max(len(e.ids) for e in encodings)
    arrays = {name: np.zeros((len(encodings), length), dtype=np.int64) for name in names}
    if "input_ids" in arrays:
        arrays["input_ids"].fill(pad_id)
    rows = {"input_ids": lambda e: e.ids, "attention_mask": lambda e: [1] * len(e.ids),
            "token_type_ids": lambda e: e.type_ids, **(columns or {})}
    for row, encoding in enumerate(encodings):
        for name, array in arrays.items():
            array[row, :len(encoding.ids)] = rows[name](encoding)
    return arrays


def _finish(result: dict, request: Request, note: str | None) -> dict:
    if request.id is not None:
        result = {"id": request.id} | result
    return result | ({"note": note} if note else {})


def _tokenizer(data: bytes, path: Path) -> Tokenizer:
    try:
        return Tokenizer.from_str(data.decode("utf-8"))
    except Exception as error:  # tokenizers raises its own untyped errors for a file it cannot parse
        raise UserError(f"cannot read the tokenizer {str(path)!r} ({type(error).__name__}); re-export the "
                        "bundle") from error


def _session(model: bytes, path: Path, threads: int) -> onnxruntime.InferenceSession:
    """A session of the model's bytes (the ones hashed); `path` only names it in errors."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3  # warnings about unused initialisers etc. are not the user's business
    try:
        return onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own untyped errors for unreadable models
        raise UserError(f"onnxruntime cannot load {str(path)!r} ({type(error).__name__}); re-export the "
                        "bundle") from error


def read_requests(lines: Iterable[str], pipeline: Pipeline, source: str) -> list[Request]:
    """Requests from JSON Lines (see the module docstring); errors name the source and line."""
    first, second = pipeline.request_keys
    requests = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{where}: not valid JSON ({error.msg}); give one object per line, e.g. "
                            f'{{"{first}": "...", "{second}": "..."}}') from None
        requests.append(request_from_record(record, pipeline, where))
    if not requests:
        raise UserError(f"{source} holds no requests; give one JSON object per line, e.g. "
                        f'{{"{first}": "..."}}')
    return requests


def request_from_record(record: object, pipeline: Pipeline, where: str) -> Request:
    """One decoded JSON object as a Request: its keys and their types checked (`harness serve` too)."""
    first, second = pipeline.request_keys
    allowed = {first, second, "id"}
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected a JSON object with {first!r}, got {type(record).__name__}")
    unknown = sorted(set(record) - allowed)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; use "
                        f"{', '.join(map(repr, sorted(allowed)))}")
    text, pair, tokens = pipeline.texts(record, where)
    try:  # echoed back as UTF-8 JSON: a lone surrogate (from an escape such as \ud800) cannot be written
        json.dumps(record.get("id"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"{where}: 'id' holds a lone surrogate, not text (from an escape such as \\ud800); "
                        "send valid Unicode") from None
    if tokens is not None:
        return Request.of_tokens(tokens, record.get("id"), where)
    return Request(text, pair, record.get("id"), where)

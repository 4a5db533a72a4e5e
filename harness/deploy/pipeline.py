"""One interface for what differs by pipeline at run time: requests in, model inputs, answers out.

A bundle's manifest names its pipeline ("kind": sequence-classification, question-answering or
token-classification); harness/kinds.py maps the name to its `Pipeline` subclass (a kind of task's own
module in harness/deploy/). harness/deploy/onnx_predictor.py loads the bundle and runs the model; the
pipeline reads requests, encodes them into model rows, counts the rows a request costs and decodes the
outputs. Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from tokenizers import Encoding, Tokenizer

from foundation.infra.errors import UserError


@dataclass(frozen=True)
class Request:
    """One input: a text (and pair), or for SQuAD a question and its context; `where` names it in errors."""

    text: str
    text_pair: str | None = None
    id: object = None  # echoed back unchanged
    where: str = "input"
    tokens: tuple[str, ...] | None = None  # tagging: pre-split words (text is them joined by single spaces)

    @classmethod
    def of_tokens(cls, tokens, id: object = None, where: str = "input") -> Request:
        return cls(" ".join(tokens), None, id, where, tuple(tokens))


@dataclass
class Encoded:
    """The encodings of a list of requests; `owners[k]`: the request of encoding k."""

    encodings: list[Encoding]
    owners: list[int]
    notes: dict[int, str] = field(default_factory=dict)  # request index -> what was truncated
    per_request: list = field(default_factory=list)  # what the pipeline's decode needs of each request
    per_encoding: list = field(default_factory=list)  # ... and of each encoding


class Pipeline:
    """A pipeline's requests and answers; the predictor hands it the bundle's manifest and tokenizers."""

    name: ClassVar[str]  # the manifest's "kind"
    request_keys: ClassVar[tuple[str, str]]  # a JSON request's two text keys
    # Model inputs that are not the tokenizer's own, each row computed from an encoding.
    columns: ClassVar[dict[str, Callable[[Encoding], list[int]]]] = {}
    rows_are_one: ClassVar[bool] = False  # one model row per request: `rows` needs no tokenizer

    def __init__(self, manifest: dict, tokenizer: Tokenizer, truncating: Tokenizer):
        """`tokenizer` never truncates; `truncating` is a copy this pipeline may set truncation on."""
        self.manifest, self.tokenizer, self.truncating = manifest, tokenizer, truncating
        self.max_length = int(manifest["max_length"])
        self.labels = manifest.get("labels")

    def encode(self, requests: Sequence[Request]) -> Encoded:
        """Model inputs: the encodings of checked requests."""
        raise NotImplementedError

    def rows(self, requests: Sequence[Request]) -> list[int]:
        """The model rows `encode` makes of each request, without running the model (what `harness serve`
        counts its limits in); uses only the untruncated tokenizer, so it may run beside a predict."""
        raise NotImplementedError

    def decode(self, request: Request, index: int, encoded: Encoded, mine: list[int],
               outputs: dict[str, list[np.ndarray]]) -> dict:
        """The answer to request `index`, from the outputs (by name, one array per encoding) of its
        encodings `mine`."""
        raise NotImplementedError

    def check(self, request: Request) -> None:
        """Raise UserError unless this bundle can take the request."""
        check_texts(request, self.request_keys)

    def texts(self, record: dict, where: str) -> tuple[str, str | None, list[str] | None]:
        """A JSON request's text, pair and pre-split words, their types checked."""
        first, second = self.request_keys
        text, pair = record.get(first), record.get(second)
        if not isinstance(text, str) or not isinstance(pair, str | None):
            raise UserError(f"{where}: {first!r} must be a string (and {second!r} a string if given)")
        return text, pair, None

    def from_texts(self, texts: Sequence[str]) -> Request:
        """The request of `harness predict TEXT [TEXT]`."""
        return Request(*texts, where="TEXT")

    def row_unit(self) -> str:
        """What one model row is, for the over-the-limit message (empty: one per request)."""
        return ""

    def answer_labels(self) -> list[str] | None:
        """The labels an answer can hold (what /health lists): the model's own, unless answers are written
        in another form than the model's labels."""
        return self.labels


def check_texts(request: Request, keys: tuple[str, str], pair_required: str = "") -> None:
    """Raise UserError for a lone surrogate or an empty text; `pair_required`: the reason a pair must be
    given."""
    first, second = keys
    for key, text in ((first, request.text), (second, request.text_pair)):
        try:
            (text or "").encode("utf-8")
        except UnicodeEncodeError as error:  # the tokenizer would raise a TypeError on it
            raise UserError(f"{request.where}: {key} holds U+{ord(text[error.start]):04X} at character "
                            f"{error.start}, a lone surrogate, not text (from an escape such as \\ud800 "
                            "or undecodable bytes); send valid Unicode") from None
    if not request.text.strip():
        raise UserError(f"{request.where}: empty {first}; give some text")
    if pair_required and (request.text_pair is None or not request.text_pair.strip()):
        raise UserError(f"{request.where}: empty {second}; {pair_required}")
    if request.text_pair is not None and not request.text_pair.strip():
        raise UserError(f"{request.where}: empty {second}; give some text or leave it out")

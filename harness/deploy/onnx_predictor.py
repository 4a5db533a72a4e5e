"""Torch-free inference on an ONNX bundle: tokenizers + onnxruntime + numpy, nothing else.

Imports neither torch nor transformers (tests/test_onnx.py checks), so a deployment needs only
`pip install onnxruntime tokenizers numpy` and this package. Requests are batched longest first and
padded to the longest in each batch. Classification inputs longer than the bundle's max_length are
truncated (longest first, as at fine-tuning) with a note; SQuAD contexts are split into overlapping
windows as at fine-tuning, and the best span over all windows wins. A tagging bundle splits raw text
into words (the manifest's word_splitter), tags each word, and answers the chunks as spans with
character offsets (harness/deploy/tag_spans.py); a sentence over max_length is tagged in windows of
whole words, with a note.

Batch input (`harness predict` from a file or stdin) is JSON Lines, one object per line, blank lines
skipped: {"text": ..., "text_pair": ...} for classification (text_pair for two-sentence tasks) and
{"question": ..., "context": ...} for SQuAD, {"text": ...} or pre-split {"tokens": [...]} for tagging;
an optional "id" is echoed back. JSON Lines rather than TSV because sentences and contexts may hold
tabs and quotes that TSV cannot carry unescaped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime
from tokenizers import Encoding, Tokenizer

from foundation.infra.errors import UserError
from harness.deploy import tag_spans
from harness.deploy.bundle import (
    INPUT_NAMES,
    MODEL_FILES,
    PER_TOKEN_OUTPUTS,
    TOKENIZER,
    read_manifest,
    verify_files,
)
from tasks import squad_spans
from tasks.registry import GLUE_TASKS

PRECISIONS = ("auto", *MODEL_FILES)
REQUEST_KEYS = {"sequence-classification": ("text", "text_pair"),
                "question-answering": ("question", "context"),
                "token-classification": ("text", "tokens")}  # tokens: pre-split words instead of a text
TAGGING = "token-classification"


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
    """Encodings of a list of requests: `owners[k]` is the request of encoding k (SQuAD has several)."""

    encodings: list[Encoding]
    owners: list[int]
    notes: dict[int, str] = field(default_factory=dict)  # request index -> what was truncated
    steps: list[int] = field(default_factory=list)  # SQuAD: context tokens between window starts, per request
    words: list[list[tag_spans.Word]] = field(default_factory=list)  # tagging: each request's words
    placed: list[tag_spans.Placed] = field(default_factory=list)  # tagging: each encoding's words


class Predictor:
    """A loaded, checksum-verified bundle that predicts batches of Requests."""

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
        self.kind, self.max_length = self.manifest["kind"], int(self.manifest["max_length"])
        self.labels = self.manifest.get("labels")
        task = GLUE_TASKS.get(self.manifest["task"])  # None for SQuAD (always two texts) and your own
        self.pair = self.manifest.get("pair") if task is None else len(task.hub_columns) == 2
        self.multilabel = bool(self.manifest.get("multilabel"))
        if self.kind == TAGGING:
            self.words_by = tag_spans.splitter(self.manifest.get("word_splitter", ""))
        self.batch_size = batch_size
        self.tokenizer = _tokenizer(loaded.pop(TOKENIZER), directory / TOKENIZER)
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        # A second copy truncates: long classification inputs, or SQuAD contexts into windows
        # (`_windows` sets the overlap per question length, as tasks/squad_features.py does).
        self.truncating = Tokenizer.from_str(self.tokenizer.to_str())
        if self.kind != "question-answering":
            self.truncating.enable_truncation(self.max_length, strategy="longest_first")
        model = MODEL_FILES[precision]
        self.session = _session(loaded.pop(model), directory / model, threads)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def predict(self, requests: Sequence[Request]) -> list[dict]:
        """One result dict per request, in order; a "note" key says what was truncated."""
        encoded = self.encode(requests)
        outputs = self.infer(encoded.encodings)
        by_request: list[list[int]] = [[] for _ in requests]
        for k, owner in enumerate(encoded.owners):
            by_request[owner].append(k)
        results = []
        for i, (request, mine) in enumerate(zip(requests, by_request, strict=True)):
            if self.kind == TAGGING:
                result = self._tags(request, encoded.words[i], encoded, mine, outputs[0])
            elif self.kind == "question-answering":
                result = best_answer(request.text_pair, [encoded.encodings[k] for k in mine],
                                     {name: [output[k] for k in mine]
                                      for name, output in zip(self.output_names, outputs, strict=True)},
                                     self.manifest["qa"], encoded.steps[i])
            else:
                result = self._label(outputs[0][mine[0]])
            results.append(_finish(result, request, encoded.notes.get(i)))
        return results

    def encode(self, requests: Sequence[Request]) -> Encoded:
        """Model inputs: one encoding per request, or for SQuAD one per context window."""
        for request in requests:
            self.check(request)
        if self.kind == "question-answering":
            return self._windows(requests)
        if self.kind == TAGGING:
            return self._tag_windows(requests)
        inputs = [r.text if r.text_pair is None else (r.text, r.text_pair) for r in requests]
        encodings = self.tokenizer.encode_batch(inputs)
        notes = {}
        long = [i for i, e in enumerate(encodings) if len(e.ids) > self.max_length]
        if long:
            truncated = self.truncating.encode_batch([inputs[i] for i in long])
            for i, encoding in zip(long, truncated, strict=True):
                notes[i] = (f"{requests[i].where}: {len(encodings[i].ids)} tokens exceed the bundle's "
                            f"max_length {self.max_length}; truncated to {self.max_length}")
                encodings[i] = encoding
        return Encoded(encodings, list(range(len(encodings))), notes)

    def check(self, request: Request) -> None:
        """Raise UserError unless this bundle can take the request: valid text, the right number of texts."""
        _check_request(request, self.kind)
        task = self.manifest["task"]
        if self.kind == TAGGING and request.text_pair is not None:
            raise UserError(f"{request.where}: {task} tags one sentence, got a pair; pass one text")
        if self.pair and request.text_pair is None:
            raise UserError(f"{request.where}: {task} classifies a pair of sentences, got one text; pass "
                            "both (two texts, or text_pair in JSON Lines)")
        if self.pair is False and request.text_pair is not None:
            raise UserError(f"{request.where}: {task} classifies one sentence, got a pair; pass one text "
                            "(drop text_pair)")

    def rows(self, requests: Sequence[Request]) -> list[int]:
        """The model rows `encode` makes of each request, without running the model: 1 for
        classification, the context's windows for SQuAD, the sentence's windows of whole words for
        tagging (what `harness serve` counts its limits in).
        Uses only the untruncated tokenizer, so it may run beside a `predict` in another thread."""
        if self.kind == TAGGING:  # its windows of whole words
            room = self.max_length - tag_spans.specials(self.tokenizer)
            sentences = [[w for w, _ in self._words(r)] or ["."] for r in requests]
            return [len(tag_spans.bounds(lengths, room))
                    for lengths in tag_spans.word_lengths(self.tokenizer, sentences)]
        if self.kind != "question-answering":
            return [1] * len(requests)
        questions, _ = _truncate_questions(self.tokenizer, requests, self.manifest["qa"]["max_query_length"])
        question_lengths, context_lengths = ([len(e.ids) for e in self.tokenizer.encode_batch(
            texts, add_special_tokens=False)] for texts in (questions, [r.text_pair for r in requests]))
        specials = self.tokenizer.post_processor.num_special_tokens_to_add(True)
        rows = []
        for question, context in zip(question_lengths, context_lengths, strict=True):
            room = self.max_length - question - specials  # context tokens a window holds
            step = squad_spans.window_step(self.max_length, question, self._overlap(question), specials)
            rows.append(1 + math.ceil(max(context - room, 0) / step))
        return rows

    def _overlap(self, question_tokens: int) -> int:
        """Tokens consecutive windows share for a question of this length (tokenizers' `stride`)."""
        qa = self.manifest["qa"]
        # doc_stride is the step between window starts (ELECTRA's); bundles exported before that
        # change recorded the tokens windows share instead, and are read that way.
        if not qa.get("doc_stride_is_step", False):
            return qa["doc_stride"]
        specials = self.tokenizer.post_processor.num_special_tokens_to_add(True)
        return squad_spans.window_overlap(self.max_length, question_tokens, qa["doc_stride"], specials)

    def _windows(self, requests: Sequence[Request]) -> Encoded:
        qa = self.manifest["qa"]
        questions, notes = _truncate_questions(self.tokenizer, requests, qa["max_query_length"])
        pairs = [(q, r.text_pair) for q, r in zip(questions, requests, strict=True)]
        lengths = [len(e.ids) for e in self.tokenizer.encode_batch(questions, add_special_tokens=False)]
        specials = self.tokenizer.post_processor.num_special_tokens_to_add(True)  # 3: [CLS] q [SEP] c [SEP]
        by_overlap: dict[int, list[int]] = {}
        steps = []
        for i, length in enumerate(lengths):
            overlap = self._overlap(length)
            by_overlap.setdefault(overlap, []).append(i)
            steps.append(squad_spans.window_step(self.max_length, length, overlap, specials))
        found: dict[int, list[Encoding]] = {}
        for overlap, members in by_overlap.items():
            self.truncating.enable_truncation(self.max_length, stride=overlap, strategy="only_second")
            for i, encoding in zip(members, self.truncating.encode_batch([pairs[i] for i in members]),
                                   strict=True):
                found[i] = [encoding, *encoding.overflowing]
        encodings, owners = [], []
        for i in range(len(pairs)):
            encodings += found[i]
            owners += [i] * len(found[i])
        return Encoded(encodings, owners, notes, steps)

    def _words(self, request: Request) -> list[tag_spans.Word]:
        if request.tokens is not None:
            return tag_spans.joined_words(request.tokens)
        return tag_spans.split_words(request.text, self.words_by)

    def _tag_windows(self, requests: Sequence[Request]) -> Encoded:
        words = [self._words(r) for r in requests]
        for request, found in zip(requests, words, strict=True):
            if not found:
                raise UserError(f"{request.where}: no words in the text; give some text")
        encodings, placed, notes = tag_spans.windows(
            self.tokenizer, [[w for w, _ in found] for found in words], self.max_length,
            [r.where for r in requests])
        return Encoded(encodings, [p.request for p in placed], notes, words=words, placed=placed)

    def _tags(self, request: Request, words: list[tag_spans.Word], encoded: Encoded, mine: list[int],
              logits: list[np.ndarray]) -> dict:
        """The request's spans: each word tagged at its first sub-token, its windows joined."""
        tags = ["O"] * len(words)
        for k in mine:
            placed, ids = encoded.placed[k], logits[k].argmax(axis=-1)
            for offset, position in enumerate(placed.positions):
                if position >= 0:
                    tags[placed.first + offset] = self.labels[int(ids[position])]
        return tag_spans.result(request.text, words, tags, self.manifest["scheme"])

    def _label(self, logits: np.ndarray) -> dict:
        if self.labels is None:  # regression (STS-B): the one output is the score
            return {"score": float(logits[0])}
        if self.multilabel:  # one sigmoid per label; a label is predicted above 0.5, as in training
            probabilities = 1 / (1 + np.exp(-logits.astype(np.float64)))
            return {"labels": [name for name, p in zip(self.labels, probabilities, strict=True) if p > 0.5],
                    "scores": {name: float(p) for name, p in zip(self.labels, probabilities, strict=True)}}
        probabilities = np.exp(logits - logits.max())
        probabilities /= probabilities.sum()
        best = int(probabilities.argmax())
        return {"label": self.labels[best], "probability": float(probabilities[best]),
                "probabilities": {name: float(p) for name, p in zip(self.labels, probabilities, strict=True)}}

    def batches(self, encodings: Sequence[Encoding]) -> Iterator[tuple[list[int], dict[str, np.ndarray]]]:
        """(indices, padded inputs) batches, longest first so each pads little."""
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))
        for first in range(0, len(order), self.batch_size):
            batch = order[first:first + self.batch_size]
            yield batch, pad_batch([encodings[i] for i in batch], int(self.manifest["pad_token_id"]),
                                   self.input_names)

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


def pad_batch(encodings: Sequence[Encoding], pad_id: int,
              names: Sequence[str] = INPUT_NAMES[:3]) -> dict[str, np.ndarray]:
    """The named inputs (of INPUT_NAMES) as int64 arrays padded to the longest encoding; context_mask is
    squad_spans.context_mask of each (question, context) window."""
    length = max(len(e.ids) for e in encodings)
    arrays = {name: np.zeros((len(encodings), length), dtype=np.int64) for name in names}
    if "input_ids" in arrays:
        arrays["input_ids"].fill(pad_id)
    rows = {"input_ids": lambda e: e.ids, "attention_mask": lambda e: [1] * len(e.ids),
            "token_type_ids": lambda e: e.type_ids,
            "context_mask": lambda e: squad_spans.context_mask(e.sequence_ids)}
    for row, encoding in enumerate(encodings):
        for name, array in arrays.items():
            array[row, :len(encoding.ids)] = rows[name](encoding)
    return arrays


def best_answer(context: str, windows: Sequence[Encoding], outputs: dict[str, list[np.ndarray]],
                qa: dict, step: int) -> dict:
    """The best context span over all windows, by `tasks.squad_spans.best_answer` as at fine-tuning.

    outputs: the model's outputs by name, one array per window: start logits, then end logits or the
    joint prediction's beams, and null logits where the bundle has the answerability classifier.
    step: context tokens between window starts, for the max-context rule.
    """
    offsets = [squad_spans.context_offsets(w.offsets, w.sequence_ids) for w in windows]
    joint = None
    if squad_spans.JOINT_OUTPUTS[0] in outputs:
        joint = [dict(zip(squad_spans.JOINT_OUTPUTS, beams, strict=True))
                 for beams in zip(*(outputs[name] for name in squad_spans.JOINT_OUTPUTS), strict=True)]
    return squad_spans.best_answer(
        context, outputs["start_logits"], outputs.get("end_logits", [None] * len(windows)), offsets,
        n_best=qa["n_best"], max_answer_length=qa["max_answer_length"], version_2=qa["version_2"],
        null_threshold=qa["null_threshold"], null_logits=outputs.get("null_logits"),
        allowed=squad_spans.start_allowed(offsets, step), joint=joint)


def _truncate_questions(tokenizer: Tokenizer, requests: Sequence[Request],
                        max_query_length: int) -> tuple[list[str], dict[int, str]]:
    questions, notes = [], {}
    stripped = [r.text.lstrip() for r in requests]
    for i, encoding in enumerate(tokenizer.encode_batch(stripped, add_special_tokens=False)):
        questions.append(squad_spans.truncate_question(stripped[i], encoding.offsets, max_query_length))
        if len(encoding.ids) > max_query_length:
            notes[i] = (f"{requests[i].where}: the question has {len(encoding.ids)} tokens, over the "
                        f"bundle's max_query_length {max_query_length}; truncated")
    return questions, notes


def _finish(result: dict, request: Request, note: str | None) -> dict:
    if request.id is not None:
        result = {"id": request.id} | result
    return result | ({"note": note} if note else {})


def _check_request(request: Request, kind: str) -> None:
    first, second = REQUEST_KEYS[kind]
    for key, text in ((first, request.text), (second, request.text_pair)):
        try:
            (text or "").encode("utf-8")
        except UnicodeEncodeError as error:  # the tokenizer would raise a TypeError on it
            raise UserError(f"{request.where}: {key} holds U+{ord(text[error.start]):04X} at character "
                            f"{error.start}, a lone surrogate, not text (from an escape such as \\ud800 "
                            "or undecodable bytes); send valid Unicode") from None
    if not request.text.strip():
        raise UserError(f"{request.where}: empty {first}; give some text")
    if kind == "question-answering" and (request.text_pair is None or not request.text_pair.strip()):
        raise UserError(f"{request.where}: empty {second}; a SQuAD bundle needs a question and its context")
    if request.text_pair is not None and not request.text_pair.strip():
        raise UserError(f"{request.where}: empty {second}; give some text or leave it out")


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


def read_requests(lines: Iterable[str], kind: str, source: str) -> list[Request]:
    """Requests from JSON Lines (see the module docstring); errors name the source and line."""
    requests = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            first, second = REQUEST_KEYS[kind]
            raise UserError(f"{where}: not valid JSON ({error.msg}); give one object per line, e.g. "
                            f'{{"{first}": "...", "{second}": "..."}}') from None
        requests.append(request_from_record(record, kind, where))
    if not requests:
        raise UserError(f"{source} holds no requests; give one JSON object per line, e.g. "
                        f'{{"{REQUEST_KEYS[kind][0]}": "..."}}')
    return requests


def request_from_record(record: object, kind: str, where: str) -> Request:
    """One decoded JSON object as a Request: its keys and their types checked (`harness serve` too)."""
    first, second = REQUEST_KEYS[kind]
    allowed = {first, second, "id"}
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected a JSON object with {first!r}, got {type(record).__name__}")
    unknown = sorted(set(record) - allowed)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; use "
                        f"{', '.join(map(repr, sorted(allowed)))}")
    pre_split = kind == TAGGING and "tokens" in record  # a tagging request's words, split already
    if pre_split:
        tokens = record["tokens"]
        if "text" in record or not isinstance(tokens, list) or not tokens or \
                not all(isinstance(t, str) and t.strip() for t in tokens):
            raise UserError(f"{where}: 'tokens' must be a non-empty list of non-blank strings, without "
                            "'text' (or send the raw sentence as 'text')")
    texts = [" ".join(record["tokens"]), None] if pre_split else [record.get(first), record.get(second)]
    if not isinstance(texts[0], str) or not isinstance(texts[1], str | None):
        wanted = f"a string (or {second!r} a list of strings)" if kind == TAGGING else \
            f"a string (and {second!r} a string if given)"
        raise UserError(f"{where}: {first!r} must be {wanted}")
    try:  # echoed back as UTF-8 JSON: a lone surrogate (from an escape such as \ud800) cannot be written
        json.dumps(record.get("id"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"{where}: 'id' holds a lone surrogate, not text (from an escape such as \\ud800); "
                        "send valid Unicode") from None
    if pre_split:
        return Request.of_tokens(record["tokens"], record.get("id"), where)
    return Request(texts[0], texts[1], record.get("id"), where)

"""The sequence-classification bundle at run time (GLUE, your own text): one model row per text (or pair),
truncated longest first past max_length as at fine-tuning, answered as a label with probabilities, a
score (regression; your own task's also under its label column's name) or the labels over the run's
threshold (multi-label, default 0.5). A run with long_text=windows (its manifest says) reads a long text
as the same windows as at fine-tuning (the tokenizers library's overflowing encodings, window_overlap
tokens shared), one model row each, and answers from the mean of its windows' logits.
Torch-free."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer

from foundation.infra.errors import UserError
from harness.deploy.pipeline import Encoded, Pipeline, Request
from tasks.registry import GLUE_TASKS


class Predictor(Pipeline):
    """Labels, probabilities or a score for each text (or pair of texts)."""

    name = "sequence-classification"
    request_keys = ("text", "text_pair")
    rows_are_one = True

    def __init__(self, manifest: dict, tokenizer: Tokenizer, truncating: Tokenizer):
        super().__init__(manifest, tokenizer, truncating)
        task = GLUE_TASKS.get(manifest["task"])  # None for your own, whose manifest says
        self.pair = manifest.get("pair") if task is None else len(task.hub_columns) == 2
        self.multilabel = bool(manifest.get("multilabel"))
        self.threshold = float(manifest.get("threshold", 0.5))  # bundles of older runs: 0.5, as trained
        self.windows = manifest.get("long_text") == "windows"
        self.rows_are_one = not self.windows  # a long text is several windows, counted by the tokenizer
        self.truncating.enable_truncation(self.max_length, strategy="longest_first",
                                          stride=int(manifest["window_overlap"]) if self.windows else 0)

    def encode(self, requests: Sequence[Request]) -> Encoded:
        if self.windows:
            return self._windows(requests)
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

    def _windows(self, requests: Sequence[Request]) -> Encoded:
        """Each text's windows (its truncated encoding and the overflowing ones), as fine-tuning made them."""
        encodings, owners = [], []
        for index, encoding in enumerate(self.truncating.encode_batch([r.text for r in requests])):
            mine = [encoding, *encoding.overflowing]
            encodings += mine
            owners += [index] * len(mine)
        return Encoded(encodings, owners)

    def rows(self, requests: Sequence[Request]) -> list[int]:
        if not self.windows:
            return [1] * len(requests)
        # the text tokens a window holds, and how far each next window starts
        room = self.max_length - self.tokenizer.post_processor.num_special_tokens_to_add(False)
        step = room - int(self.manifest["window_overlap"])
        lengths = [len(e.ids) for e in self.tokenizer.encode_batch([r.text for r in requests],
                                                                   add_special_tokens=False)]
        return [1 + math.ceil(max(length - room, 0) / step) for length in lengths]

    def check(self, request: Request) -> None:
        super().check(request)
        task = self.manifest["task"]
        if self.pair and request.text_pair is None:
            raise UserError(f"{request.where}: {task} classifies a pair of sentences, got one text; pass "
                            "both (two texts, or text_pair in JSON Lines)")
        if self.pair is False and request.text_pair is not None:
            raise UserError(f"{request.where}: {task} classifies one sentence, got a pair; pass one text "
                            "(drop text_pair)")

    def decode(self, request, index, encoded, mine, outputs) -> dict:
        # windows: the mean of the text's windows' logits, as at fine-tuning (tasks/text.py); else its one row
        logits = np.mean([outputs["logits"][row] for row in mine], axis=0)
        if self.labels is None:  # regression: the one output is the score, named as the label column too
            score = float(logits[0])
            column = self.manifest.get("label_column")  # your own task's; GLUE's STS-B answers "score" alone
            return ({column: score} if column else {}) | {"score": score}
        if self.multilabel:  # one sigmoid per label; a label is predicted above the run's threshold
            probabilities = 1 / (1 + np.exp(-logits.astype(np.float64)))
            return {"labels": [name for name, p in zip(self.labels, probabilities, strict=True)
                               if p > self.threshold],
                    "scores": {name: float(p) for name, p in zip(self.labels, probabilities, strict=True)}}
        probabilities = np.exp(logits - logits.max())
        probabilities /= probabilities.sum()
        best = int(probabilities.argmax())
        return {"label": self.labels[best], "probability": float(probabilities[best]),
                "probabilities": {name: float(p) for name, p in zip(self.labels, probabilities, strict=True)}}

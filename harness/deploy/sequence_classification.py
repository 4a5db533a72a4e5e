"""The sequence-classification bundle at run time (GLUE, your own text): one model row per text (or pair),
truncated longest first past max_length as at fine-tuning, answered as a label with probabilities, a
score (regression; your own task's also under its label column's name) or the labels over the run's
threshold (multi-label, default 0.5).
Torch-free."""

from __future__ import annotations

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
        self.truncating.enable_truncation(self.max_length, strategy="longest_first")

    def encode(self, requests: Sequence[Request]) -> Encoded:
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

    def rows(self, requests: Sequence[Request]) -> list[int]:
        return [1] * len(requests)

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
        logits = outputs["logits"][mine[0]]
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

"""The token-classification bundle at run time (tagging): raw text split into words (the manifest's
word_splitter), each word tagged at its first sub-token in windows of whole words, the chunks answered as
spans with character offsets (harness/deploy/tag_spans.py). Torch-free."""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Tokenizer

from foundation.infra.errors import UserError
from harness.deploy import tag_spans
from harness.deploy.pipeline import Encoded, Pipeline, Request


class Predictor(Pipeline):
    """Each text's words, their tags and the spans they make."""

    name = "token-classification"
    request_keys = ("text", "tokens")  # tokens: pre-split words instead of a text

    def __init__(self, manifest: dict, tokenizer: Tokenizer, truncating: Tokenizer):
        super().__init__(manifest, tokenizer, truncating)
        self.words_by = tag_spans.splitter(manifest.get("word_splitter", ""))

    def check(self, request: Request) -> None:
        super().check(request)
        if request.text_pair is not None:
            raise UserError(f"{request.where}: {self.manifest['task']} tags one sentence, got a pair; pass "
                            "one text")

    def texts(self, record: dict, where: str) -> tuple[str, str | None, list[str] | None]:
        if "tokens" not in record:
            text = record.get("text")
            if not isinstance(text, str):
                raise UserError(f"{where}: 'text' must be a string (or 'tokens' a list of strings)")
            return text, None, None
        tokens = record["tokens"]
        if "text" in record or not isinstance(tokens, list) or not tokens or \
                not all(isinstance(t, str) and t.strip() for t in tokens):
            raise UserError(f"{where}: 'tokens' must be a non-empty list of non-blank strings, without "
                            "'text' (or send the raw sentence as 'text')")
        return " ".join(tokens), None, tokens

    def answer_labels(self) -> list[str]:
        """Tags in the file's own scheme (answers are written in it), not the model's BIOES labels."""
        return tag_spans.scheme_tags(self.manifest["types"], self.manifest["scheme"])

    def row_unit(self) -> str:
        return f", a window of {self.max_length} tokens each"

    def _words(self, request: Request) -> list[tag_spans.Word]:
        if request.tokens is not None:
            return tag_spans.joined_words(request.tokens)
        return tag_spans.split_words(request.text, self.words_by)

    def rows(self, requests: Sequence[Request]) -> list[int]:
        """Each sentence's windows of whole words."""
        room = self.max_length - tag_spans.specials(self.tokenizer)
        sentences = [[w for w, _ in self._words(r)] or ["."] for r in requests]
        return [len(tag_spans.bounds(lengths, room))
                for lengths in tag_spans.word_lengths(self.tokenizer, sentences)]

    def encode(self, requests: Sequence[Request]) -> Encoded:
        """`per_request`: each request's words; `per_encoding`: where each window's words sit."""
        words = [self._words(r) for r in requests]
        for request, found in zip(requests, words, strict=True):
            if not found:
                raise UserError(f"{request.where}: no words in the text; give some text")
        encodings, placed, notes = tag_spans.windows(
            self.tokenizer, [[w for w, _ in found] for found in words], self.max_length,
            [r.where for r in requests])
        return Encoded(encodings, [p.request for p in placed], notes, words, placed)

    def decode(self, request, index, encoded, mine, outputs) -> dict:
        """The request's spans: each word tagged at its first sub-token, its windows joined."""
        words, logits = encoded.per_request[index], outputs["tag_logits"]
        tags = ["O"] * len(words)
        for k in mine:
            placed, ids = encoded.per_encoding[k], logits[k].argmax(axis=-1)
            for offset, position in enumerate(placed.positions):
                if position >= 0:
                    tags[placed.first + offset] = self.labels[int(ids[position])]
        return tag_spans.result(request.text, words, tags, self.manifest["scheme"])

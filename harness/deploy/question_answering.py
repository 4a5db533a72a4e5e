"""The question-answering bundle at run time (SQuAD): each context split into overlapping windows as at
fine-tuning, the best span over all windows by tasks/squad_spans.py's rules (the fine-tuning loop's own).
Torch-free."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from tokenizers import Encoding, Tokenizer

from foundation.infra.errors import UserError
from harness.deploy.pipeline import Encoded, Pipeline, Request, check_texts
from tasks import squad_spans


class Predictor(Pipeline):
    """The answer span (or none, SQuAD 2.0) of each question in its context."""

    name = "question-answering"
    request_keys = ("question", "context")
    columns = {"context_mask": lambda e: squad_spans.context_mask(e.sequence_ids)}  # the answer mask's

    def __init__(self, manifest: dict, tokenizer: Tokenizer, truncating: Tokenizer):
        super().__init__(manifest, tokenizer, truncating)
        self.qa = manifest["qa"]
        self.specials = tokenizer.post_processor.num_special_tokens_to_add(True)  # 3: [CLS] q [SEP] c [SEP]

    def check(self, request: Request) -> None:
        check_texts(request, self.request_keys, "a SQuAD bundle needs a question and its context")

    def from_texts(self, texts: Sequence[str]) -> Request:
        if len(texts) != 2:
            raise UserError("a SQuAD bundle needs two texts: the question and its context")
        return super().from_texts(texts)

    def row_unit(self) -> str:
        return f", a context window of {self.max_length} tokens each"

    def rows(self, requests: Sequence[Request]) -> list[int]:
        questions, _ = truncate_questions(self.tokenizer, requests, self.qa["max_query_length"])
        question_lengths, context_lengths = ([len(e.ids) for e in self.tokenizer.encode_batch(
            texts, add_special_tokens=False)] for texts in (questions, [r.text_pair for r in requests]))
        rows = []
        for question, context in zip(question_lengths, context_lengths, strict=True):
            room = self.max_length - question - self.specials  # context tokens a window holds
            step = squad_spans.window_step(self.max_length, question, self._overlap(question), self.specials)
            rows.append(1 + math.ceil(max(context - room, 0) / step))
        return rows

    def _overlap(self, question_tokens: int) -> int:
        """Tokens consecutive windows share for a question of this length (tokenizers' `stride`)."""
        # doc_stride is the step between window starts (ELECTRA's); bundles exported before that
        # change recorded the tokens windows share instead, and are read that way.
        if not self.qa.get("doc_stride_is_step", False):
            return self.qa["doc_stride"]
        return squad_spans.window_overlap(self.max_length, question_tokens, self.qa["doc_stride"],
                                          self.specials)

    def encode(self, requests: Sequence[Request]) -> Encoded:
        """One encoding per context window; `per_request`: context tokens between window starts."""
        questions, notes = truncate_questions(self.tokenizer, requests, self.qa["max_query_length"])
        pairs = [(q, r.text_pair) for q, r in zip(questions, requests, strict=True)]
        lengths = [len(e.ids) for e in self.tokenizer.encode_batch(questions, add_special_tokens=False)]
        by_overlap: dict[int, list[int]] = {}
        steps = []
        for i, length in enumerate(lengths):
            overlap = self._overlap(length)
            by_overlap.setdefault(overlap, []).append(i)
            steps.append(squad_spans.window_step(self.max_length, length, overlap, self.specials))
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

    def decode(self, request, index, encoded, mine, outputs) -> dict:
        return best_answer(request.text_pair, [encoded.encodings[k] for k in mine],
                           {name: [output[k] for k in mine] for name, output in outputs.items()},
                           self.qa, encoded.per_request[index])


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


def truncate_questions(tokenizer: Tokenizer, requests: Sequence[Request],
                       max_query_length: int) -> tuple[list[str], dict[int, str]]:
    """Each question cut to max_query_length tokens (as at fine-tuning), and a note for each one cut."""
    questions, notes = [], {}
    stripped = [r.text.lstrip() for r in requests]
    for i, encoding in enumerate(tokenizer.encode_batch(stripped, add_special_tokens=False)):
        questions.append(squad_spans.truncate_question(stripped[i], encoding.offsets, max_query_length))
        if len(encoding.ids) > max_query_length:
            notes[i] = (f"{requests[i].where}: the question has {len(encoding.ids)} tokens, over the "
                        f"bundle's max_query_length {max_query_length}; truncated")
    return questions, notes

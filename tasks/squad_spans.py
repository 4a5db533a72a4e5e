"""SQuAD answer search over token windows, and question truncation: numpy only.

The one implementation behind fine-tuning's post-processing (`tasks.squad_features`) and the torch-free
ONNX predictor (`reports.onnx_predictor`), so a deployed bundle picks answers exactly as its dev score
was measured. Imports nothing but numpy: the predictor must not pull in torch, transformers or datasets.

A window is given by its start and end logits and its offsets: one (start_char, end_char) per token, None
for tokens that cannot start or end an answer ([CLS], the question, [SEP]s). Logits may run past the
offsets (batch padding); those positions are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

Offsets = Sequence[Sequence[int] | None]
CONTEXT = 1  # sequence id of the context in a (question, context) pair


def context_offsets(offsets: Sequence[Sequence[int]], sequence_ids: Sequence[int | None]) -> list:
    """A window's offsets with None for every token outside the context: [CLS], the question, [SEP]s."""
    return [o if s == CONTEXT else None for o, s in zip(offsets, sequence_ids, strict=True)]


def window_overlap(max_length: int, question_tokens: int, doc_stride: int) -> int:
    """Tokens consecutive windows share so that their starts are doc_stride apart.

    ELECTRA (finetune/qa/qa_tasks.py, `featurize`) steps min(length, doc_stride) tokens from one window's
    start to the next, each window holding max_length - question - 3 context tokens; tokenizers' `stride`
    is the overlap instead, so the step is converted to the overlap for this question's length.
    """
    room = max_length - question_tokens - 3  # [CLS] question [SEP] context [SEP]
    return max(room - doc_stride, 0)


def truncate_question(question: str, offsets: Sequence[Sequence[int]], max_query_length: int) -> str:
    """Cut a question after its max_query_length-th token, at that token's end in the text.

    offsets: (start_char, end_char) of each of the question's tokens, special tokens excluded.
    """
    if len(offsets) <= max_query_length:
        return question
    return question[: offsets[max_query_length - 1][1]]


def window_spans(start_logits, end_logits, offsets: Offsets, n_best: int,
                 max_answer_length: int) -> Iterator[tuple[float, int, int]]:
    """(score, start_char, end_char) for each allowed pair of the n_best start and n_best end tokens.

    A span's score is its start logit plus its end logit; it must lie in the context, end at or after its
    start and be at most max_answer_length tokens long.
    """
    top_starts = np.argsort(start_logits)[::-1][:n_best]
    top_ends = np.argsort(end_logits)[::-1][:n_best]
    for start in top_starts:
        for end in top_ends:
            if start >= len(offsets) or end >= len(offsets) or offsets[start] is None or offsets[end] is None:
                continue
            if end < start or end - start + 1 > max_answer_length:
                continue
            yield float(start_logits[start] + end_logits[end]), offsets[start][0], offsets[end][1]


def best_answer(
    context: str,
    start_logits: Sequence,
    end_logits: Sequence,
    offsets: Sequence[Offsets],
    n_best: int = 20,
    max_answer_length: int = 30,
    version_2: bool = False,
    null_threshold: float = 0.0,
    null_logits: Sequence[float] | None = None,
) -> dict:
    """The best span over one question's windows: {"answer", "start", "end", "score"} (+ "null_odds").

    start_logits, end_logits, offsets (and null_logits): one entry per window of the question. The best
    span is the highest-scoring allowed one over all windows, the earliest on ties; with none allowed the
    answer is an empty span scored 0.0, as in transformers' utils_qa.py. For SQuAD 2.0, "null_odds" is
    the lowest null logit over the windows when the model has an answerability classifier (null_logits),
    else the lowest [CLS] score (start + end logit at token 0) minus the best span's score: every window
    must favour "no answer". Above null_threshold the answer is "" and start and end are None.
    """
    if not len(start_logits) == len(end_logits) == len(offsets):
        raise ValueError(f"got {len(start_logits)}/{len(end_logits)} logit rows for {len(offsets)} windows")
    if not offsets:
        raise ValueError("no windows to search; a question has at least one")
    best = None
    for starts, ends, window in zip(start_logits, end_logits, offsets, strict=True):
        for span in window_spans(starts, ends, window, n_best, max_answer_length):
            if best is None or span[0] > best[0]:
                best = span
    score, start_char, end_char = best or (0.0, 0, 0)
    result = {"answer": context[start_char:end_char], "start": start_char, "end": end_char, "score": score}
    if version_2:
        if null_logits is not None:
            result["null_odds"] = min(float(null) for null in null_logits)
        else:
            cls_scores = [float(s[0] + e[0]) for s, e in zip(start_logits, end_logits, strict=True)]
            result["null_odds"] = min(cls_scores) - score
        if result["null_odds"] > null_threshold:
            result.update(answer="", start=None, end=None)
    return result

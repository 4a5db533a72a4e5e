"""SQuAD answer search over token windows (ELECTRA's qa_metrics.py rules, the max-context rule of its
qa_tasks.py, independent or joint span candidates), and question truncation: numpy only.

The one implementation behind fine-tuning's post-processing (`tasks.squad_features`) and the torch-free
ONNX predictor (`harness.deploy.onnx_predictor`), so a deployed bundle picks answers exactly as its dev score
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


def context_mask(sequence_ids: Sequence[int | None]) -> list[int]:
    """1 from a window's first context token to its end (the context and the special tokens closing it),
    0 before ([CLS], the question, its separators): ELECTRA's answer mask, input_mask x segment_ids, which
    equals BERT's token_type_ids here and is defined for tokenizers without token types (RoBERTa's)."""
    first = list(sequence_ids).index(CONTEXT)
    return [0] * first + [1] * (len(sequence_ids) - first)


def window_overlap(max_length: int, question_tokens: int, doc_stride: int, specials: int = 3) -> int:
    """Tokens consecutive windows share so that their starts are doc_stride apart.

    ELECTRA (finetune/qa/qa_tasks.py, `featurize`) steps min(length, doc_stride) tokens from one window's
    start to the next, each window holding max_length - question - 3 context tokens; tokenizers' `stride`
    is the overlap instead, so the step is converted to the overlap for this question's length.
    specials: the special tokens of a pair (3 for BERT's [CLS] q [SEP] c [SEP], 4 for RoBERTa's).
    """
    room = max_length - question_tokens - specials
    return max(room - doc_stride, 0)


def window_step(max_length: int, question_tokens: int, overlap: int, specials: int = 3) -> int:
    """Context tokens from one window's start to the next's, given the overlap the tokenizer was run with."""
    return max_length - question_tokens - specials - overlap


def max_context(lengths: Sequence[int], step: int) -> list[list[bool]]:
    """Per window, per context token: whether this window gives the token its most context.

    ELECTRA's `_check_is_max_context` (finetune/qa/qa_tasks.py): window k covers context tokens
    k*step .. k*step + lengths[k] - 1; a token's score in a window is min(tokens left of it, tokens right
    of it) + 0.01 * the window's length, and the first window with the highest score is its window.
    Prediction keeps a start only there, so a token near one window's edge is judged where it sits mid-window.
    """
    starts = [k * step for k in range(len(lengths))]
    owner = {}  # context token -> (score, window)
    for window, (start, length) in enumerate(zip(starts, lengths, strict=True)):
        for position in range(start, start + length):
            score = min(position - start, start + length - 1 - position) + 0.01 * length
            if position not in owner or score > owner[position][0]:
                owner[position] = (score, window)
    return [[owner[start + i][1] == window for i in range(length)]
            for window, (start, length) in enumerate(zip(starts, lengths, strict=True))]


def start_allowed(offsets: Sequence[Offsets], step: int) -> list[list[bool]]:
    """Per window, per token: True where an answer may start (a context token in its max-context window)."""
    lengths = [sum(o is not None for o in window) for window in offsets]
    allowed = []
    for window, flags in zip(offsets, max_context(lengths, step), strict=True):
        kept = iter(flags)
        allowed.append([o is not None and next(kept) for o in window])
    return allowed


def truncate_question(question: str, offsets: Sequence[Sequence[int]], max_query_length: int) -> str:
    """Cut a question after its max_query_length-th token, at that token's end in the text.

    offsets: (start_char, end_char) of each of the question's tokens, special tokens excluded.
    """
    if len(offsets) <= max_query_length:
        return question
    return question[: offsets[max_query_length - 1][1]]


JOINT_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index")


def _candidates(start_logits, end_logits, n_best: int, joint) -> Iterator[tuple[float, int, int]]:
    """(score, start, end) token pairs to consider, best first per start, in ELECTRA's order."""
    if joint is None:  # independent heads: the n_best starts x the n_best ends, scored by their logits
        top_starts = np.argsort(start_logits)[::-1][:n_best]
        top_ends = np.argsort(end_logits)[::-1][:n_best]
        for start in top_starts:
            for end in top_ends:
                yield float(start_logits[start] + end_logits[end]), int(start), int(end)
        return
    # joint_prediction: the model's beam of starts, each with its own beam of ends, scored by log-probs
    start_log_probs, start_index, end_log_probs, end_index = (joint[name] for name in JOINT_OUTPUTS)
    for i, start in enumerate(start_index):
        for j, end in enumerate(end_index[i]):
            yield float(start_log_probs[i] + end_log_probs[i][j]), int(start), int(end)


def window_spans(start_logits, end_logits, offsets: Offsets, n_best: int, max_answer_length: int,
                 allowed: Sequence[bool] | None = None, joint=None) -> Iterator[tuple[float, int, int]]:
    """(score, start_char, end_char) for each allowed candidate span of one window.

    ELECTRA's filters (finetune/qa/qa_metrics.py, `write_predictions`): start and end in the context,
    the start in its max-context window (`allowed`, None: every context token), end at or after the
    start, at most max_answer_length tokens. Candidates: with independent heads the n_best start and
    n_best end tokens, a span scored by start logit plus end logit; with joint prediction (`joint`, the
    model's JOINT_OUTPUTS for this window) its beam of starts and ends, scored by log-probabilities.
    """
    for score, start, end in _candidates(start_logits, end_logits, n_best, joint):
        if start >= len(offsets) or end >= len(offsets) or offsets[start] is None or offsets[end] is None:
            continue
        if allowed is not None and not allowed[start]:
            continue
        if end < start or end - start + 1 > max_answer_length:
            continue
        yield score, offsets[start][0], offsets[end][1]


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
    allowed: Sequence[Sequence[bool]] | None = None,
    joint: Sequence | None = None,
) -> dict:
    """The best span over one question's windows: {"answer", "start", "end", "score"} (+ "null_odds").

    start_logits, end_logits, offsets (and null_logits, allowed, joint: see `window_spans`): one entry per
    window of the question; with joint prediction end_logits may be None (ELECTRA's are zeros). The best
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
    allowed = allowed if allowed is not None else [None] * len(offsets)
    joint = joint if joint is not None else [None] * len(offsets)
    best = None
    windows = zip(start_logits, end_logits, offsets, allowed, joint, strict=True)
    for starts, ends, window, flags, beam in windows:
        for span in window_spans(starts, ends, window, n_best, max_answer_length, flags, beam):
            if best is None or span[0] > best[0]:
                best = span
    score, start_char, end_char = best or (0.0, 0, 0)
    result = {"answer": context[start_char:end_char], "start": start_char, "end": end_char, "score": score}
    if version_2:
        if null_logits is not None:
            result["null_odds"] = min(float(null) for null in null_logits)
        else:
            cls_scores = [float(s[0] + (0.0 if e is None else e[0]))
                          for s, e in zip(start_logits, end_logits, strict=True)]
            result["null_odds"] = min(cls_scores) - score
        if result["null_odds"] > null_threshold:
            result.update(answer="", start=None, end=None)
    return result

"""SQuAD examples to overlapping token windows and back: features for training and eval, span post-processing.

Each window is [CLS] question [SEP] context-slice [SEP], at most max_length tokens and left unpadded: the
fine-tuning loop's collator pads each batch to its longest window. As in ELECTRA's (and BERT's) run_squad
code, doc_stride is the step between window starts, not the number of tokens consecutive windows share
(transformers' run_qa.py meaning, the tokenizer's `stride`): questions are tokenised in groups of equal
length, each with the overlap that gives that step (`squad_spans.window_overlap`). Needs a fast tokenizer
(offset mappings) that pads on the right, so that [CLS], the "no answer" position, is token 0.
"""

import datasets
import numpy as np

from foundation.infra.errors import UserError
from tasks import squad_spans
from tasks.config import DOC_STRIDE, MAX_QUERY_LENGTH
from tasks.registry import SQUAD_TASKS

MAX_LENGTH = SQUAD_TASKS["1.1"].max_length  # the registry's window length, for callers that pass none


def _check_setup(tokenizer, max_length: int, max_query_length: int) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"{type(tokenizer).__name__} is not a fast tokenizer; SQuAD needs offset mappings")
    if tokenizer.padding_side != "right":
        raise UserError(f"tokenizer pads on the {tokenizer.padding_side}; set padding_side='right' for SQuAD")
    # The pair's special tokens ([CLS], [SEP], [SEP] for BERT) share the window with question and context.
    context_room = max_length - max_query_length - tokenizer.num_special_tokens_to_add(pair=True)
    if context_room < 1:
        raise UserError(
            f"max_length {max_length} leaves no context tokens after a {max_query_length}-token question; "
            f"raise max_length or lower max_query_length"
        )


def truncate_questions(questions: list[str], tokenizer, max_query_length: int) -> list[str]:
    """Cut each question after its max_query_length-th token (`squad_spans.truncate_question`)."""
    encoded = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    return [squad_spans.truncate_question(question, offsets, max_query_length)
            for question, offsets in zip(questions, encoded["offset_mapping"], strict=True)]


def _tokenize(batch: dict, tokenizer, max_length: int, doc_stride: int, max_query_length: int) -> dict:
    """Windows of each (question, context) pair, in example order, with their sequence ids."""
    # Leading spaces waste tokens for some tokenizers and shift nothing we need (run_qa.py does the same).
    questions = truncate_questions([q.lstrip() for q in batch["question"]], tokenizer, max_query_length)
    lengths = [len(ids) for ids in tokenizer(questions, add_special_tokens=False)["input_ids"]]
    by_length: dict[int, list[int]] = {}
    for i, length in enumerate(lengths):
        by_length.setdefault(length, []).append(i)
    specials = tokenizer.num_special_tokens_to_add(pair=True)
    windows = []  # (example, window number, row)
    for length, members in by_length.items():
        encoded = tokenizer(
            [questions[i] for i in members],
            [batch["context"][i] for i in members],
            truncation="only_second",
            max_length=max_length,
            stride=squad_spans.window_overlap(max_length, length, doc_stride, specials),
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        samples = encoded.pop("overflow_to_sample_mapping")
        for k, sample in enumerate(samples):
            row = {key: values[k] for key, values in encoded.items()}
            row["sequence_ids"] = encoded.sequence_ids(k)
            row["context_mask"] = squad_spans.context_mask(row["sequence_ids"])
            windows.append((members[sample], k, row))
    windows.sort(key=lambda window: window[:2])
    columns = {key: [row[key] for _, _, row in windows] for key in windows[0][2]} if windows else {}
    return columns | {"overflow_to_sample_mapping": [example for example, _, _ in windows]}


def _context_span(sequence_ids: list) -> tuple[int, int]:
    first = sequence_ids.index(squad_spans.CONTEXT)
    last = len(sequence_ids) - 1 - sequence_ids[::-1].index(squad_spans.CONTEXT)
    return first, last


def _answer_tokens(offsets, sequence_ids, start_char: int, end_char: int) -> tuple[int, int, bool]:
    """(start, end, misaligned) token positions of a char span; (0, 0, False) unless all in the window."""
    first, last = _context_span(sequence_ids)
    if offsets[first][0] > start_char or offsets[last][1] < end_char:
        return 0, 0, False
    start = first
    while start <= last and offsets[start][0] <= start_char:
        start += 1
    end = last
    while end >= first and offsets[end][1] >= end_char:
        end -= 1
    start, end = start - 1, end + 1  # the last token starting at or before the answer, first ending after it
    return start, end, offsets[start][0] != start_char or offsets[end][1] != end_char


def _train_batch(batch: dict, tokenizer, max_length: int, doc_stride: int, max_query_length: int) -> dict:
    encoded = _tokenize(batch, tokenizer, max_length, doc_stride, max_query_length)
    sample_map = encoded.pop("overflow_to_sample_mapping")
    sequence_ids = encoded.pop("sequence_ids")
    starts, ends, impossible, misaligned, flagged = [], [], [], [], set()
    for i, offsets in enumerate(encoded.pop("offset_mapping")):
        example = sample_map[i]
        answers = batch["answers"][example]
        start, end, off_boundary = 0, 0, False  # CLS: unanswerable, or the answer is not in this window
        if answers["answer_start"]:
            # Training uses the first gold answer only, as run_qa.py does (SQuAD train has one per question).
            start_char = answers["answer_start"][0]
            start, end, off_boundary = _answer_tokens(
                offsets, sequence_ids[i], start_char, start_char + len(answers["text"][0])
            )
        starts.append(start)
        ends.append(end)
        # ELECTRA's answerability target is the example's (`_is_impossible`): a window that misses the
        # answer points its span at [CLS] but is still trained as answerable.
        impossible.append(int(not answers["answer_start"]))
        # Windows overlap, so count an example once however many of its windows hold the answer.
        misaligned.append(off_boundary and example not in flagged)
        if off_boundary:
            flagged.add(example)
    return {**encoded, "start_positions": starts, "end_positions": ends, "is_impossible": impossible,
            "misaligned": misaligned}


def prepare_train_features(
    examples: datasets.Dataset,
    tokenizer,
    max_length: int = MAX_LENGTH,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
) -> tuple[datasets.Dataset, int]:
    """Training windows with start/end token positions, and how many answers fall off token boundaries.

    Off-boundary answers ("1990" inside "1990s" tokenised as one piece) keep the enclosing tokens as
    their span; they are counted, not dropped.
    """
    features = _windows(examples, _train_batch, tokenizer, max_length, doc_stride, max_query_length)
    num_misaligned = sum(features["misaligned"])
    return features.remove_columns("misaligned"), num_misaligned


def _eval_batch(batch: dict, tokenizer, max_length: int, doc_stride: int, max_query_length: int) -> dict:
    encoded = _tokenize(batch, tokenizer, max_length, doc_stride, max_query_length)
    sample_map = encoded.pop("overflow_to_sample_mapping")
    sequence_ids = encoded.pop("sequence_ids")
    example_ids, offset_mapping, allowed = [], [], []
    for i, offsets in enumerate(encoded.pop("offset_mapping")):
        example_ids.append(batch["id"][sample_map[i]])
        offset_mapping.append(squad_spans.context_offsets(offsets, sequence_ids[i]))
    # An example's windows are consecutive rows (`_tokenize`): mark the starts in their max-context window.
    first = 0
    while first < len(sample_map):
        last = first
        while last + 1 < len(sample_map) and sample_map[last + 1] == sample_map[first]:
            last += 1
        question_tokens = sequence_ids[first].count(0)
        specials = tokenizer.num_special_tokens_to_add(pair=True)
        overlap = squad_spans.window_overlap(max_length, question_tokens, doc_stride, specials)
        step = squad_spans.window_step(max_length, question_tokens, overlap, specials)
        allowed += squad_spans.start_allowed(offset_mapping[first:last + 1], step)
        first = last + 1
    return {**encoded, "example_id": example_ids, "offset_mapping": offset_mapping, "allowed": allowed}


def prepare_eval_features(
    examples: datasets.Dataset,
    tokenizer,
    max_length: int = MAX_LENGTH,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
) -> datasets.Dataset:
    """Eval windows keeping example_id, the context-only offset_mapping and `allowed` (a start may be
    there: a context token in its max-context window), which `postprocess` needs."""
    return _windows(examples, _eval_batch, tokenizer, max_length, doc_stride, max_query_length)


def _windows(examples, batch_function, tokenizer, max_length: int, doc_stride: int,
             max_query_length: int) -> datasets.Dataset:
    """`batch_function` mapped over the examples, one row per window."""
    _check_setup(tokenizer, max_length, max_query_length)
    settings = {"tokenizer": tokenizer, "max_length": max_length, "doc_stride": doc_stride,
                "max_query_length": max_query_length}
    return examples.map(batch_function, batched=True, remove_columns=examples.column_names,
                        fn_kwargs=settings)


def postprocess(
    examples,
    features,
    start_logits,
    end_logits,
    n_best: int = 20,
    max_answer_length: int = 30,
    version_2: bool = False,
    null_threshold: float = 0.0,
    null_logits=None,
    joint=None,
) -> tuple[dict[str, str], dict[str, float]]:
    """Best answer text per example id and, for SQuAD 2.0, null odds, by `squad_spans.best_answer`.

    examples: rows with "id" and "context"; features: `prepare_eval_features` output (or a mapping with
    its example_id, offset_mapping and allowed columns; without allowed every context token may start);
    logits (and null_logits, one per feature, from an answerability classifier, and joint, the joint
    prediction's beams per feature: `squad_spans.window_spans`): one row per feature, each at least as
    long as that feature (positions past it, i.e. batch padding, are ignored). For 2.0 the answer is ""
    when null odds exceed null_threshold; for 1.1 null_odds is empty (every question has an answer).
    """
    rows = len(features)
    if len(start_logits) != rows or len(end_logits) != rows:
        raise ValueError(f"got {len(start_logits)}/{len(end_logits)} logit rows for {rows} features")
    if null_logits is not None and len(null_logits) != rows:
        raise ValueError(f"got {len(null_logits)} null logits for {rows} features")
    windows = {}  # example id -> the indices of its features
    for i, example_id in enumerate(features["example_id"]):
        windows.setdefault(example_id, []).append(i)
    offset_mapping = list(features["offset_mapping"])  # one pass over the column, not a read per row
    columns = getattr(features, "column_names", features)  # a Dataset's, or a mapping's keys
    allowed = list(features["allowed"]) if "allowed" in columns else None
    predictions, null_odds = {}, {}
    for example in examples:
        qid = example["id"]
        if qid not in windows:
            raise ValueError(f"example {qid!r} has no features; build features from the same examples")
        mine = windows[qid]
        # Rows may differ in length when batches were padded separately, so no single 2-D array.
        answer = squad_spans.best_answer(
            example["context"], [np.asarray(start_logits[i]) for i in mine],
            [None if end_logits[i] is None else np.asarray(end_logits[i]) for i in mine],
            [offset_mapping[i] for i in mine],
            n_best=n_best, max_answer_length=max_answer_length, version_2=version_2,
            null_threshold=null_threshold,
            null_logits=None if null_logits is None else [null_logits[i] for i in mine],
            allowed=None if allowed is None else [allowed[i] for i in mine],
            joint=None if joint is None else [joint[i] for i in mine])
        predictions[qid] = answer["answer"]
        if version_2:
            null_odds[qid] = answer["null_odds"]
    return predictions, null_odds

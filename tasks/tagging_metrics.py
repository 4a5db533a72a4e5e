"""Phrase-level precision, recall and F1 as conlleval computes them, per type, and token accuracy.

Pure functions of tag strings. A chunk starts and ends where conlleval.pl's startOfChunk/endOfChunk say
(an I- tag after O, after another type, or first in a sentence starts a chunk; a change of type ends
one), with the E- and S- rules of seqeval's conlleval-compatible mode for BIOES, which leave B/I/O tags
exactly as conlleval reads them. A chunk is correct when gold and guess share its type, first and last
word (conlleval's correctChunk). Sentences are scored one by one: conlleval closes every chunk at a
sentence boundary, so the sums over sentences are its counts, and a bootstrap over sentences resamples
them (`SentenceCounts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

Chunk = tuple[str, int, int]  # (type, first word, last word)


def split_tag(tag: str) -> tuple[str, str]:
    """('B', 'NP') from 'B-NP'; ('O', '') from 'O'. The type is everything after the first '-'."""
    if tag == "O":
        return "O", ""
    prefix, _, entity_type = tag.partition("-")
    return prefix, entity_type


def _ends(prev: str, tag: str, prev_type: str, entity_type: str) -> bool:
    if prev in ("E", "S"):
        return True
    if (prev, tag) in {("B", "B"), ("B", "S"), ("B", "O"), ("I", "B"), ("I", "S"), ("I", "O")}:
        return True
    return prev != "O" and prev_type != entity_type


def _starts(prev: str, tag: str, prev_type: str, entity_type: str) -> bool:
    if tag in ("B", "S"):
        return True
    if (prev, tag) in {("E", "E"), ("E", "I"), ("S", "E"), ("S", "I"), ("O", "E"), ("O", "I")}:
        return True
    return tag != "O" and prev_type != entity_type


def chunks(tags: Sequence[str]) -> list[Chunk]:
    """The chunks of one sentence's tags, as conlleval reads them (any of IOB1, IOB2, BIOES)."""
    found, start, prev, prev_type = [], None, "O", ""
    for i, tag in enumerate([*tags, "O"]):  # the sentence boundary closes the last chunk
        prefix, entity_type = split_tag(tag)
        if start is not None and _ends(prev, prefix, prev_type, entity_type):
            found.append((prev_type, start, i - 1))
            start = None
        if _starts(prev, prefix, prev_type, entity_type):
            start = i
        prev, prev_type = prefix, entity_type
    return found


def tags_of(spans: Iterable[Chunk], length: int, scheme: str) -> list[str]:
    """Tags of `length` words holding these chunks, in IOB1, IOB2 or BIOES (ELECTRA's get_tags for BIOES;
    IOB1 marks B- only on a chunk that follows one of its type)."""
    tags = ["O"] * length
    last_end, last_type = -2, None
    for entity_type, start, end in sorted(spans, key=lambda c: c[1]):
        for i in range(start, end + 1):
            tags[i] = f"I-{entity_type}"
        if scheme == "BIOES":
            tags[end] = f"E-{entity_type}"
            tags[start] = f"S-{entity_type}" if start == end else f"B-{entity_type}"
        elif scheme == "IOB2" or (last_end == start - 1 and last_type == entity_type):
            tags[start] = f"B-{entity_type}"
        last_end, last_type = end, entity_type
    return tags


@dataclass(frozen=True)
class SentenceCounts:
    """conlleval's counts per sentence: chunks (correct, guessed, gold) per type, tags (correct, total).

    chunks: (sentences, types, 3); tokens: (sentences, 2). Every figure is a ratio of sums of these, so a
    resample of sentences is scored by summing its rows (batched_scores)."""

    types: tuple[str, ...]
    chunks: np.ndarray
    tokens: np.ndarray


def sentence_counts(gold: Sequence[Sequence[str]], guessed: Sequence[Sequence[str]],
                    types: Sequence[str] | None = None) -> SentenceCounts:
    """Per-sentence counts of guessed against gold tags (the same scheme, as conlleval compares them)."""
    gold_chunks = [chunks(tags) for tags in gold]
    guessed_chunks = [chunks(tags) for tags in guessed]
    if types is None:
        types = sorted({c[0] for found in (*gold_chunks, *guessed_chunks) for c in found})
    index = {entity_type: k for k, entity_type in enumerate(types)}
    counts = np.zeros((len(gold), len(types), 3), dtype=np.int64)
    tokens = np.zeros((len(gold), 2), dtype=np.int64)
    rows = zip(gold, guessed, gold_chunks, guessed_chunks, strict=True)
    for row, (g_tags, p_tags, g, p) in enumerate(rows):
        if len(g_tags) != len(p_tags):
            raise ValueError(f"sentence {row}: {len(g_tags)} gold tags but {len(p_tags)} guessed")
        for entity_type, *_ in set(g) & set(p):
            counts[row, index[entity_type], 0] += 1
        for entity_type, *_ in p:
            counts[row, index[entity_type], 1] += 1
        for entity_type, *_ in g:
            counts[row, index[entity_type], 2] += 1
        tokens[row] = (sum(a == b for a, b in zip(g_tags, p_tags, strict=True)), len(g_tags))
    return SentenceCounts(tuple(types), counts, tokens)


def _prf(correct, guessed, gold):
    """precision, recall, F1 as fractions (conlleval prints them x100); 0 where undefined, as conlleval."""
    correct, guessed, gold = (np.asarray(x, dtype=float) for x in (correct, guessed, gold))
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(guessed > 0, correct / np.maximum(guessed, 1), 0.0)
        recall = np.where(gold > 0, correct / np.maximum(gold, 1), 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-300),
                      0.0)
    return precision, recall, f1


def scores(counts: SentenceCounts) -> dict[str, float]:
    """conlleval's overall precision, recall, F1 and accuracy, and each type's F1 (f1_TYPE)."""
    total = counts.chunks.sum(axis=0)  # (types, 3)
    precision, recall, f1 = _prf(*total.sum(axis=0))
    tokens = counts.tokens.sum(axis=0)
    found = {"f1": float(f1), "precision": float(precision), "recall": float(recall),
             "accuracy": float(tokens[0] / tokens[1]) if tokens[1] else 0.0}
    per_type = _prf(total[:, 0], total[:, 1], total[:, 2])[2]
    return found | {f"f1_{entity_type}": float(value)
                    for entity_type, value in zip(counts.types, per_type, strict=True)}


def conlleval(gold: Sequence[Sequence[str]], guessed: Sequence[Sequence[str]]) -> dict[str, float]:
    """conlleval's figures for sentences of gold and guessed tags."""
    return scores(sentence_counts(gold, guessed))


def metric_rows(rows: np.ndarray, types: Sequence[str], metric: str) -> np.ndarray:
    """The columns of `flat_rows` rows (..., n, 3 * types + 2) a metric needs: the tags' (correct, total)
    for accuracy, one type's (correct, guessed, gold) for f1_TYPE, their sum over types otherwise."""
    k = len(types)
    if metric == "accuracy":
        return rows[..., 3 * k:]
    per_type = rows[..., :3 * k].reshape(*rows.shape[:-1], k, 3)
    if metric.startswith("f1_"):
        return per_type[..., list(types).index(metric[3:]), :]
    return per_type.sum(axis=-2)


def batched_score(metric: str):
    """scorer(rows (..., n, C), _) -> (...,): `metric` from the summed `metric_rows` of each resample."""
    def scorer(rows: np.ndarray, references: np.ndarray | None = None) -> np.ndarray:
        summed = rows.sum(axis=-2)
        if metric == "accuracy":
            return summed[..., 0] / np.maximum(summed[..., 1], 1)
        precision, recall, f1 = _prf(summed[..., 0], summed[..., 1], summed[..., 2])
        return {"precision": precision, "recall": recall}.get(metric, f1)

    return scorer


def flat_rows(counts: SentenceCounts) -> np.ndarray:
    """(sentences, 3 * types + 2): each type's (correct, guessed, gold), then the tags (correct, total)."""
    return np.concatenate([counts.chunks.reshape(len(counts.chunks), -1), counts.tokens], axis=1)

"""A tagging bundle at run time: raw text to words with character offsets, words to model windows of whole
words, and the model's BIOES tags back to spans of the text.

Torch-free (the runtime imports it). The model was fine-tuned on words (a CoNLL file's first column), each
word's first sub-token carrying its tag (tasks/tagging.py); raw text is split into words first, by the
`tokenizers` pre-tokenizer the bundle's manifest names (`word_splitter`), then each window of words is
encoded as at fine-tuning (pre-tokenized input, [CLS] words [SEP]). Tags are read as chunks by conlleval's
rules (tasks/tagging_metrics.py) and written in the task's own scheme, as the run's predictions files are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenizers import Encoding, Tokenizer, pre_tokenizers

from foundation.infra.errors import UserError
from tasks import tagging_metrics

# BERT's basic split: at whitespace, and every punctuation character a word of its own ("Smith's" ->
# Smith ' s), the way CoNLL corpora are tokenised closely enough for English, and never a word a WordPiece
# vocabulary splits across two words. Recorded in the manifest, so a bundle keeps the split it was made with.
WORD_SPLITTER = "BertPreTokenizer"
SPLITTERS = {"BertPreTokenizer": pre_tokenizers.BertPreTokenizer, "Whitespace": pre_tokenizers.Whitespace}

Word = tuple[str, tuple[int, int]]  # the word and its character offsets (start, end) into the text


@dataclass(frozen=True)
class Placed:
    """One model window: words [first, first + len(positions)) of request `request`, and where each
    word's first sub-token sits in the window's encoding (-1: no sub-token, e.g. a control character)."""

    request: int
    first: int
    positions: tuple[int, ...]


def splitter(name: str):
    """The named `tokenizers` pre-tokenizer; UserError for a name this version does not know."""
    if name not in SPLITTERS:
        raise UserError(f"the bundle's word_splitter {name!r} is unknown to this version (known: "
                        f"{', '.join(SPLITTERS)}); re-export the bundle")
    return SPLITTERS[name]()


def split_words(text: str, words_by) -> list[Word]:
    """The words of raw text with their character offsets."""
    return [(word, (start, end)) for word, (start, end) in words_by.pre_tokenize_str(text)]


def joined_words(tokens: Sequence[str]) -> list[Word]:
    """Pre-split tokens with their offsets into the tokens joined by single spaces (a request's text)."""
    words, start = [], 0
    for token in tokens:
        words.append((token, (start, start + len(token))))
        start += len(token) + 1
    return words


def specials(tokenizer: Tokenizer) -> int:
    """Special tokens around one sentence ([CLS] and [SEP]: 2)."""
    return tokenizer.post_processor.num_special_tokens_to_add(False) if tokenizer.post_processor else 0


def word_lengths(tokenizer: Tokenizer, sentences: Sequence[Sequence[str]]) -> list[list[int]]:
    """Each word's sub-token count, as pre-tokenized input (what fine-tuning encoded)."""
    lengths = []
    for words, encoding in zip(sentences, tokenizer.encode_batch(
            [list(w) for w in sentences], is_pretokenized=True, add_special_tokens=False), strict=True):
        counts = [0] * len(words)
        for word in encoding.word_ids:
            if word is not None:
                counts[word] += 1
        lengths.append(counts)
    return lengths


def bounds(lengths: Sequence[int], room: int) -> list[tuple[int, int]]:
    """Windows of whole words, each at most `room` sub-tokens, as tasks/tagging.windows_of cuts them: a
    window closes before the word that would overflow it (a word longer than `room` alone: one window)."""
    found, first, used = [], 0, 0
    for index, length in enumerate(lengths):
        if used + length > room and index > first:
            found.append((first, index))
            first, used = index, 0
        used += length
    return found + [(first, len(lengths))]


def windows(tokenizer: Tokenizer, sentences: Sequence[Sequence[str]], max_length: int,
            wheres: Sequence[str]) -> tuple[list[Encoding], list[Placed], dict[int, str]]:
    """Each window's encoding and placement, and a note per sentence split into several windows."""
    room = max_length - specials(tokenizer)
    pieces, placed, notes = [], [], {}
    lengths_of = word_lengths(tokenizer, sentences)
    for number, (words, lengths) in enumerate(zip(sentences, lengths_of, strict=True)):
        longest = max(range(len(words)), key=lambda k: lengths[k])
        if lengths[longest] > room:
            raise UserError(f"{wheres[number]}: the word {words[longest][:40]!r} alone is {lengths[longest]} "
                            f"tokens, more than the bundle's max_length {max_length} holds; split it")
        found = bounds(lengths, room)
        if len(found) > 1:
            notes[number] = (f"{wheres[number]}: {sum(lengths)} tokens, more than the bundle's max_length "
                             f"{max_length} holds; tagged in {len(found)} windows of whole words")
        for first, end in found:
            pieces.append(list(words[first:end]))
            placed.append(Placed(number, first, ()))
    encodings = tokenizer.encode_batch(pieces, is_pretokenized=True) if pieces else []
    for k, encoding in enumerate(encodings):
        starts: dict[int, int] = {}
        for position, word in enumerate(encoding.word_ids):
            if word is not None:
                starts.setdefault(word, position)
        placed[k] = Placed(placed[k].request, placed[k].first,
                           tuple(starts.get(w, -1) for w in range(len(pieces[k]))))
    return encodings, placed, notes


def result(text: str, words: Sequence[Word], model_tags: Sequence[str], scheme: str) -> dict:
    """{"tokens", "tags" (the task's scheme), "spans": [{"text", "type", "start", "end"}]}: each chunk of
    the model's tags (conlleval's reading) with its character offsets into `text` (end exclusive)."""
    found = tagging_metrics.chunks(model_tags)
    spans = []
    for entity_type, first, last in found:
        start, end = words[first][1][0], words[last][1][1]
        spans.append({"text": text[start:end], "type": entity_type, "start": start, "end": end})
    return {"tokens": [word for word, _ in words],
            "tags": tagging_metrics.tags_of(found, len(model_tags), scheme), "spans": spans}


# The prefixes a scheme's tags take: what an answer's "tags" can hold (tagging_metrics.tags_of writes them)
SCHEME_PREFIXES = {"IOB1": ("B", "I"), "IOB2": ("B", "I"), "BIOES": ("B", "I", "E", "S")}


def scheme_tags(types: Sequence[str], scheme: str) -> list[str]:
    """Every tag an answer in `scheme` can hold: O, then each type's prefixed tags (what /health lists;
    the model's own labels are BIOES, as ELECTRA trains)."""
    return ["O", *(f"{prefix}-{entity_type}" for entity_type in types for prefix in SCHEME_PREFIXES[scheme])]

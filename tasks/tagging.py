"""Tagging through the one loop: word features, the token-classification head, and conlleval scoring.

As ELECTRA's tagging task (finetune/tagging/tagging_tasks.py): each word's first sub-token carries its
BIOES tag and the others none (-100 here: the loss skips them, where ELECTRA gathers the first sub-tokens
only); one dense layer over the encoder's tokens (transformers' ElectraForTokenClassification: dropout and
a dense layer). ELECTRA cuts a sentence longer than max_seq_length; here it is split into windows of whole
words, each a model input, and the predictions of its windows are joined again (or, with
--long-sentences refuse, it is refused in one line). Predicted BIOES tags are read as chunks and written in
the files' scheme; conlleval scores those against the gold tags (tasks/tagging_metrics.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from datasets import Dataset
from transformers import AutoModelForTokenClassification, PreTrainedTokenizerBase

from foundation.infra.errors import UserError
from tasks import tagging_metrics
from tasks.loading import from_pretrained_quietly
from tasks.tagging_data import Sentence, TaggingData, to_model_scheme
from tasks.tagging_task import TaggingTask


@dataclass(frozen=True)
class Window:
    """One model input: words [first, first + count) of a sentence, and where each word's first sub-token
    sits in the input (-1: the word has no sub-token, e.g. a lone control character)."""

    sentence: int
    first: int
    positions: tuple[int, ...]


@dataclass
class TaggingAdapter:
    """A tagging task's windows and its scoring; satisfies tasks.finetune.TaskAdapter."""

    task: TaggingTask
    train: Dataset
    evals: dict[str, Dataset]
    windows: dict[str, list[Window]]  # per eval row
    sentences: dict[str, list[Sentence]]
    double_unordered: bool = False
    target_scale: float = 1.0
    # padded to the batch's longest, not a multiple of 8: sentences average 30 tokens, where rounding up
    # adds 15% of the work on a CPU for nothing (reports/results/performance.md, tagging)
    pad_to_multiple_of: int | None = None

    def example_outputs(self, output, batch) -> list[np.ndarray]:
        """Each window's predicted label id per input token (its padding dropped)."""
        ids = output.logits.argmax(dim=-1).cpu().numpy().astype(np.int16)
        lengths = batch["attention_mask"].sum(dim=-1).cpu().tolist()
        return [row[:length] for row, length in zip(ids, lengths, strict=True)]

    def model_tags(self, split: str, outputs: list[np.ndarray]) -> list[list[str]]:
        """Each sentence's predicted BIOES tags, its windows joined; a word without a sub-token is O."""
        tags = [["O"] * len(s.words) for s in self.sentences[split]]
        names = self.task.label_names
        for window, ids in zip(self.windows[split], outputs, strict=True):
            for offset, position in enumerate(window.positions):
                if position >= 0:
                    tags[window.sentence][window.first + offset] = names[int(ids[position])]
        return tags

    def predicted_tags(self, split: str, outputs: list[np.ndarray]) -> list[list[str]]:
        """Predicted tags in the files' scheme (what a predictions file holds and conlleval scores)."""
        return [tagging_metrics.tags_of(tagging_metrics.chunks(tags), len(tags), self.task.scheme)
                for tags in self.model_tags(split, outputs)]

    def counts(self, split: str, outputs: list[np.ndarray]) -> tagging_metrics.SentenceCounts:
        gold = [s.tags for s in self.sentences[split]]
        return tagging_metrics.sentence_counts(gold, self.predicted_tags(split, outputs), self.task.types)

    def score(self, split: str, outputs: list[np.ndarray]) -> dict[str, float]:
        """conlleval's figures and each type's F1; `score` is the F1 (what seeds, search and compare rank)."""
        values = tagging_metrics.scores(self.counts(split, outputs))
        return values | {"score": values[self.task.headline]}


def special_layout(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after one sentence ([CLS] and [SEP] for BERT's)."""
    encoded = tokenizer([["x"]], is_split_into_words=True)
    ids, words = encoded["input_ids"][0], encoded.word_ids(0)
    first = words.index(0)
    last = len(words) - 1 - words[::-1].index(0)
    return list(ids[:first]), list(ids[last + 1:])


def windows_of(split: str, sentences: list[Sentence], tokenizer: PreTrainedTokenizerBase, max_length: int,
               long_sentences: str, where: str) -> tuple[list[list[list[int]]], list[Window]]:
    """Each window's words' sub-token ids, and the windows: whole words, at most max_length tokens with
    the special tokens; a sentence that fits is one window."""
    if not getattr(tokenizer, "is_fast", False):
        raise UserError("tagging needs a fast tokenizer (word alignment); this model's tokenizer is a slow "
                        "one (save it as a fast one: AutoTokenizer.from_pretrained(..., use_fast=True))")
    before, after = special_layout(tokenizer)
    specials = len(before) + len(after)
    room = max_length - specials
    # verbose=False: the whole sentence is tokenized once to place its words, then cut into windows of
    # room tokens, so transformers' "longer than the maximum sequence length ... indexing errors" warning
    # about a long sentence is untrue here
    encoded = tokenizer([list(s.words) for s in sentences], is_split_into_words=True,
                        add_special_tokens=False, verbose=False)
    pieces, windows = [], []
    for number, sentence in enumerate(sentences):
        words: list[list[int]] = [[] for _ in sentence.words]
        for token, word in zip(encoded["input_ids"][number], encoded.word_ids(number), strict=True):
            if word is not None:
                words[word].append(token)
        total = sum(len(w) for w in words)
        if total > room and long_sentences == "refuse":
            raise UserError(f"{where}:{sentence.line}: a sentence of {total} tokens, more than max_length "
                            f"{max_length} holds with its {specials} special tokens; pass "
                            "long_sentences=split or a larger max_length")
        first, used = 0, 0
        for index, word in enumerate(words):
            if len(word) > room:
                raise UserError(f"{where}:{sentence.lines[index]}: the word {sentence.words[index]!r} "
                                f"alone is {len(word)} tokens, more than max_length {max_length} holds; "
                                "pass a larger max_length")
            if used + len(word) > room:
                pieces.append(words[first:index])
                windows.append(Window(number, first, ()))
                first, used = index, 0
            used += len(word)
        pieces.append(words[first:])
        windows.append(Window(number, first, ()))
    return pieces, windows


def encode(tokenizer: PreTrainedTokenizerBase, pieces: list[list[list[int]]], windows: list[Window],
           labels: list[list[int]] | None) -> tuple[Dataset, list[Window]]:
    """Model inputs of each window ([CLS] words [SEP]), its words' first sub-token positions, and (training)
    labels: the word's tag id on its first sub-token, -100 elsewhere."""
    before, after = special_layout(tokenizer)
    rows: dict[str, list] = {"input_ids": [], "attention_mask": [], "labels": []}
    placed = []
    for words, window in zip(pieces, windows, strict=True):
        ids, positions = [], []
        for word in words:
            positions.append(len(before) + len(ids) if word else -1)
            ids.extend(word)
        input_ids = before + ids + after
        rows["input_ids"].append(input_ids)
        rows["attention_mask"].append([1] * len(input_ids))
        if labels is not None:
            row = [-100] * len(input_ids)
            for offset, position in enumerate(positions):
                if position >= 0:
                    row[position] = labels[window.sentence][window.first + offset]
            rows["labels"].append(row)
        placed.append(Window(window.sentence, window.first, tuple(positions)))
    if labels is None:
        del rows["labels"]
    return Dataset.from_dict(rows), placed


def build_task(data: TaggingData, tokenizer: PreTrainedTokenizerBase, max_length: int,
               long_sentences: str = "split", max_train_examples: int | None = None,
               splits: tuple[str, ...] = ("train", "validation", "test")) -> TaggingAdapter:
    """The splits' windows: train with labels (max_train_examples sentences drawn with seed 0), the others
    without."""
    task = data.task
    label_ids = {name: i for i, name in enumerate(task.label_names)}
    evals, windows, sentences, train = {}, {}, {}, None
    for split in (s for s in splits if s in data.splits):
        found = data.splits[split].sentences
        if split == "train" and max_train_examples is not None and max_train_examples < len(found):
            chosen = np.random.default_rng(0).permutation(len(found))[:max_train_examples]
            found = [found[i] for i in sorted(chosen)]
        pieces, placed = windows_of(split, found, tokenizer, max_length, long_sentences,
                                    str(data.splits[split].path))
        if split == "train":
            labels = [[label_ids[t] for t in to_model_scheme(s.tags)] for s in found]
            train, _ = encode(tokenizer, pieces, placed, labels)
        else:
            evals[split], windows[split] = encode(tokenizer, pieces, placed, None)
            sentences[split] = found
    return TaggingAdapter(task, train, evals, windows, sentences)


def load_model(model_path: str, task: TaggingTask, **load_options) -> torch.nn.Module:
    """The encoder with a fresh token-classification head, its BIOES tags in the config (id2label)."""
    return from_pretrained_quietly(
        AutoModelForTokenClassification, model_path, num_labels=task.num_labels, **load_options,
        id2label=dict(enumerate(task.label_names)),
        label2id={name: i for i, name in enumerate(task.label_names)})

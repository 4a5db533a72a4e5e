"""Model inputs of a sentence (or sentence pair) classification task, for any kind that has one (GLUE, your
own text): text_a[, text_b] and label columns in, token ids and labels out."""

from __future__ import annotations

from datasets import Dataset
from transformers import PreTrainedTokenizerBase

from foundation.infra.errors import UserError


def tokenize(dataset: Dataset, tokenizer: PreTrainedTokenizerBase, max_length: int,
             keep_labels: bool, target_scale: float = 1.0) -> Dataset:
    """Model inputs (unpadded; the collator pads per batch) and, for training, `labels`."""
    def encode(batch):
        pair = (batch["text_b"],) if "text_b" in batch else ()
        return tokenizer(batch["text_a"], *pair, truncation=True, max_length=max_length)

    encoded = dataset.map(encode, batched=True, remove_columns=dataset.column_names, desc="tokenize")
    if keep_labels:
        labels = dataset["label"]
        if target_scale != 1.0:
            labels = [label / target_scale for label in labels]
        encoded = encoded.add_column("labels", labels)
    return encoded


def window_overlap(chosen: int | None, max_length: int, tokenizer: PreTrainedTokenizerBase) -> int:
    """long_text=windows: the tokens consecutive windows share (None: max_length // 2), checked to leave
    each window at least one new token, as the tokenizer requires."""
    overlap = max_length // 2 if chosen is None else chosen
    room = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    if not 0 <= overlap < room:
        raise UserError(f"window_overlap={overlap} leaves no new token in a window of max_length "
                        f"{max_length} ({room} text tokens); choose window_overlap below {room}")
    return overlap


def windows(dataset: Dataset, tokenizer: PreTrainedTokenizerBase, max_length: int, overlap: int,
            keep_labels: bool) -> tuple[Dataset, list[int]]:
    """long_text=windows: each text (text_a) as windows of max_length tokens sharing `overlap` tokens, by the
    tokenizer's own return_overflowing_tokens; and each window's text (its row in `dataset`). For training,
    `labels`: each window its text's label."""
    def encode(batch, rows):
        encoded = tokenizer(batch["text_a"], truncation=True, max_length=max_length, stride=overlap,
                            return_overflowing_tokens=True)
        if keep_labels:
            encoded["labels"] = [batch["label"][row] for row in encoded["overflow_to_sample_mapping"]]
        encoded["document"] = [rows[row] for row in encoded["overflow_to_sample_mapping"]]
        del encoded["overflow_to_sample_mapping"]
        return encoded

    encoded = dataset.map(encode, batched=True, with_indices=True, remove_columns=dataset.column_names,
                          desc="windows")
    documents = list(encoded["document"])
    return encoded.remove_columns("document"), documents

"""Model inputs of a sentence (or sentence pair) classification task, for any kind that has one (GLUE, your
own text): text_a[, text_b] and label columns in, token ids and labels out."""

from __future__ import annotations

from datasets import Dataset
from transformers import PreTrainedTokenizerBase


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

"""Batches for training (length-grouped, shuffled, seeded) and evaluation (sorted by length)."""

from __future__ import annotations

import torch
from datasets import Dataset
from torch.utils.data import DataLoader, RandomSampler
from transformers import DataCollatorWithPadding, PreTrainedTokenizerBase
from transformers.trainer_pt_utils import LengthGroupedSampler


def collator(tokenizer: PreTrainedTokenizerBase) -> DataCollatorWithPadding:
    """Dynamic padding to the longest sequence in the batch (a multiple of 8 keeps kernels aligned)."""
    return DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8, return_tensors="pt")


def lengths(dataset: Dataset) -> list[int]:
    return [len(ids) for ids in dataset["input_ids"]]


def train_loader(dataset: Dataset, batch_size: int, seed: int, group_by_length: bool,
                 collate) -> DataLoader:
    """Shuffled batches; with group_by_length, similar lengths share a batch so padding is small."""
    generator = torch.Generator().manual_seed(seed)
    if group_by_length:
        sampler = LengthGroupedSampler(batch_size, lengths=lengths(dataset), generator=generator)
    else:
        sampler = RandomSampler(dataset, generator=generator)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=collate)


def eval_order(dataset: Dataset) -> list[int]:
    """Indices longest first: batches pad little, and order is restored after prediction."""
    sizes = lengths(dataset)
    return sorted(range(len(sizes)), key=lambda i: -sizes[i])


def eval_loader(dataset: Dataset, batch_size: int, order: list[int], collate) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, sampler=order, collate_fn=collate)

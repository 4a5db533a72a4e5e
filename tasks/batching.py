"""Batches for training (length-grouped, shuffled, seeded) and evaluation (sorted by length)."""

from __future__ import annotations

import dataclasses

import torch
from datasets import Dataset
from torch.utils.data import DataLoader, RandomSampler
from transformers import DataCollatorWithPadding, PreTrainedTokenizerBase
from transformers.trainer_pt_utils import LengthGroupedSampler

from foundation.training import stop


@dataclasses.dataclass
class Collator(DataCollatorWithPadding):
    """transformers' dynamic padding, plus the per-token features the tokenizer does not know (SQuAD's
    context_mask, padded with zeros; tagging's labels, with -100) on the right to the same length."""

    zero_padded: tuple[str, ...] = ("context_mask",)

    def __call__(self, features: list[dict]) -> dict:
        names = [name for name in self.zero_padded if features and name in features[0]]
        # a label id per token (tagging): padded with -100, which the loss ignores. A multi-label row's
        # 0/1 floats (tasks/text.py) are one target per label, not per token: left as they are.
        labels = features[0].get("labels") if features else None
        if isinstance(labels, list) and labels and isinstance(labels[0], int):
            names.append("labels")
        extra = {name: [f[name] for f in features] for name in names}
        batch = super().__call__([{k: v for k, v in f.items() if k not in extra} for f in features])
        length = batch["input_ids"].shape[1]
        for name, rows in extra.items():
            pad = -100 if name == "labels" else 0
            batch[name] = torch.tensor([list(row) + [pad] * (length - len(row)) for row in rows])
        return batch


def collator(tokenizer: PreTrainedTokenizerBase,
             pad_to_multiple_of: int | None = 8) -> DataCollatorWithPadding:
    """Dynamic padding to the longest sequence in the batch, rounded up to a multiple of
    `pad_to_multiple_of` (8 keeps a GPU's tensor-core kernels aligned; on a CPU a step's time is
    proportional to the length, so None wastes nothing: reports/results/performance.md, tagging)."""
    return Collator(tokenizer, pad_to_multiple_of=pad_to_multiple_of, return_tensors="pt")


def lengths(dataset: Dataset) -> list[int]:
    return [len(ids) for ids in dataset["input_ids"]]


def for_device(collate: DataCollatorWithPadding, max_length: int | None, accelerator: bool):
    """The collator a device needs: on an accelerator, four length buckets (a compiled model records a
    few CUDA graphs; eager runs pad alike, since dropout draws depend on the shapes and a seed should
    give one result either way); elsewhere the collator as given."""
    return bucketed(collate, max_length) if accelerator else collate


def bucketed(collate: DataCollatorWithPadding, max_length: int | None) -> DataCollatorWithPadding:
    """The collator padding to a multiple of a quarter of max_length (capped at max_length): at most
    four batch lengths, so a compiled model sees few shapes. Without max_length: multiples of 32."""
    step = max(8, (max_length or 128) // 4 // 8 * 8)
    padder = dataclasses.replace(collate, pad_to_multiple_of=step)
    if max_length is None or max_length % step == 0:
        return padder
    to_max = dataclasses.replace(collate, padding="max_length", max_length=max_length,
                                 pad_to_multiple_of=None)
    return to_max if max_length <= step else _Capped(padder, to_max, max_length)


@dataclasses.dataclass
class _Capped:
    """Pad to a multiple of the step, or to max_length where that would go past it."""

    padder: DataCollatorWithPadding
    to_max: DataCollatorWithPadding
    max_length: int

    def __call__(self, features):
        batch = self.padder(features)
        return batch if batch["input_ids"].shape[1] <= self.max_length else self.to_max(features)


def train_loader(dataset: Dataset, batch_size: int, seed: int, group_by_length: bool,
                 collate, accelerator: bool = False) -> DataLoader:
    """Shuffled batches; with group_by_length, similar lengths share a batch so padding is small.

    Fetching and padding a batch of 32 tokenised MRPC pairs takes ~3 ms on this project's CPU. For
    an accelerator two worker processes prepare the next batches while it computes, into pinned
    memory; on a CPU they would only take cores from the model. The order comes from the seeded
    sampler in this process either way.
    """
    generator = torch.Generator().manual_seed(seed)
    if group_by_length:
        sampler = LengthGroupedSampler(batch_size, lengths=lengths(dataset), generator=generator)
    else:
        sampler = RandomSampler(dataset, generator=generator)
    workers = 2 if accelerator else 0
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=collate,
                      pin_memory=accelerator, num_workers=workers, persistent_workers=workers > 0,
                      worker_init_fn=stop.ignore_in_worker if workers else None)


def eval_order(dataset: Dataset) -> list[int]:
    """Indices longest first: batches pad little, and order is restored after prediction."""
    sizes = lengths(dataset)
    return sorted(range(len(sizes)), key=lambda i: -sizes[i])


def eval_loader(dataset: Dataset, batch_size: int, order: list[int], collate) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, sampler=order, collate_fn=collate)

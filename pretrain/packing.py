"""Tokenised paragraphs -> fixed-length pre-training examples, packed as ELECTRA does.

Paragraphs of one document fill an example up to its target length; 90% are split into two
segments near the middle, at a paragraph boundary where one is near (the [CLS] A [SEP] B [SEP]
shape of fine-tuning pairs), 10% stay one segment, and 5% of targets are a random shorter length.
Unlike ELECTRA's `build_pretraining_dataset.py`, which drops whatever overflows the last
paragraph, the overflow carries over into the next example of the same document, so no text is
lost.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from foundation.training.quiet import quiet_datasets
from pretrain.corpus import cache_key

SINGLE_SEGMENT_PROB = 0.1
SHORT_TARGET_PROB = 0.05
PACKING_VERSION = 2


class ExampleBuilder:
    """Accumulates paragraphs and emits examples as {"input_ids", "segment_b_start"}."""

    def __init__(self, max_length: int, cls_id: int, sep_id: int, rng: random.Random):
        self.max_length = max_length
        self.cls_id, self.sep_id = cls_id, sep_id
        self.rng = rng
        self.target_length = max_length
        self.pieces: list[list[int]] = []
        self.length = 0

    def add(self, ids: list[int], starts_document: bool) -> Iterator[dict]:
        """Add one paragraph; yield the examples it completes."""
        if starts_document and self.pieces:
            yield self._example()
        while ids:
            room = self.target_length - 3 - self.length  # [CLS] and two [SEP]s still to come
            piece, ids = ids[:room], ids[room:]
            self.pieces.append(piece)
            self.length += len(piece)
            if self.length >= self.target_length - 3:
                yield self._example()

    def flush(self) -> Iterator[dict]:
        """Emit the last, unfinished example."""
        if self.pieces:
            yield self._example()

    def _example(self) -> dict:
        single = self.rng.random() < SINGLE_SEGMENT_PROB
        first_target = self.max_length if single else (self.target_length - 3) // 2
        first: list[int] = []
        second: list[int] = []
        for piece in self.pieces:
            # As ELECTRA: a paragraph joins the first segment if that is empty, if it fits, or half
            # the time when it would overflow it. Unlike ELECTRA, nothing returns to the first
            # segment once the second has begun (that would reorder the text).
            if not second and (not first or len(first) + len(piece) < first_target
                               or (len(first) < first_target and self.rng.random() < 0.5)):
                first += piece
            else:
                second += piece
        if not single and not second:
            # One long paragraph filled the example: split it at the target, or book text (long
            # paragraphs) would give mostly one-segment examples where ELECTRA's give two.
            first, second = first[:first_target], first[first_target:]
        self.pieces, self.length = [], 0
        if self.rng.random() < SHORT_TARGET_PROB:
            self.target_length = self.rng.randint(5, self.max_length)
        else:
            self.target_length = self.max_length
        input_ids = [self.cls_id, *first, self.sep_id]
        segment_b_start = len(input_ids)
        if second:
            input_ids += [*second, self.sep_id]
        return {"input_ids": input_ids, "segment_b_start": segment_b_start}


def packed_examples(paragraphs, max_length: int, seed: int, cls_id: int, sep_id: int, cache_dir):
    """Arrow-backed `datasets.Dataset` of packed examples, built once per (corpus, length, seed)."""
    import datasets

    sources = [f["filename"] for f in paragraphs.cache_files]
    key = cache_key("examples", sources, max_length, seed, cls_id, sep_id, PACKING_VERSION)
    features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int32")),
                                  "segment_b_start": datasets.Value("int32")})
    with quiet_datasets():
        return datasets.Dataset.from_generator(
            _pack, features=features, cache_dir=str(cache_dir / "datasets"), fingerprint=key,
            gen_kwargs={"sources": sources, "max_length": max_length, "seed": seed, "cls_id": cls_id,
                        "sep_id": sep_id, "key": key})


def _pack(sources: list[str], max_length: int, seed: int, cls_id: int, sep_id: int, key: str):
    import datasets

    builder = ExampleBuilder(max_length, cls_id, sep_id, random.Random(seed))
    for source in sources:
        for batch in datasets.Dataset.from_file(source).iter(batch_size=1000):
            for ids, starts in zip(batch["input_ids"], batch["starts_document"], strict=True):
                yield from builder.add(ids, starts)
    yield from builder.flush()

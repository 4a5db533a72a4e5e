"""Batches of packed examples in a seeded order that a checkpoint can resume exactly.

The order is a fresh permutation per epoch drawn from (seed, epoch); the position is the number of
examples already taken. A step takes the next `batch_size` examples (the global batch) and each
process keeps its contiguous share, so the order and the token count do not depend on the
number of processes.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch


class BatchStream:
    """Endless global batches over a `datasets.Dataset` of {"input_ids", "segment_b_start"}."""

    def __init__(self, examples, batch_size: int, seed: int, pad_id: int, rank: int = 0, world_size: int = 1,
                 width: int | None = None):
        if len(examples) == 0:
            raise ValueError("the corpus produced no examples")
        if batch_size % world_size:
            raise ValueError(f"batch_size={batch_size} does not split over {world_size} processes")
        self.examples = examples
        # rows as Arrow: a batch's token ids come as one flat array, never as Python lists of ints
        self._arrow = examples.with_format("arrow")
        self.batch_size, self.seed, self.pad_id = batch_size, seed, pad_id
        self.rank, self.world_size = rank, world_size
        self.width = width  # pad every batch to this: fixed shapes (None: the batch's longest)
        self.epoch, self.index = 0, 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.examples))

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._order = self._permutation(self.epoch)

    def _take(self, count: int) -> list[int]:
        taken: list[int] = []
        while len(taken) < count:
            if self.index == len(self._order):
                self.epoch, self.index = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            chunk = self._order[self.index:self.index + count - len(taken)]
            taken.extend(int(i) for i in chunk)
            self.index += len(chunk)
        return taken

    def next_batch(self) -> tuple[dict[str, torch.Tensor], int]:
        """This process's share of the next global batch, and the global batch's real token count."""
        rows = self._arrow[self._take(self.batch_size)]
        ids = rows.column("input_ids").combine_chunks()
        lengths = ids.value_lengths().to_numpy(zero_copy_only=False).astype(np.int64)
        width = self.width or int(lengths.max())  # every process pads alike: same FLOPs
        share = self.batch_size // self.world_size
        mine = slice(self.rank * share, (self.rank + 1) * share)
        values = ids.slice(mine.start, share).flatten().to_numpy(zero_copy_only=False)
        b_starts = rows.column("segment_b_start").to_numpy()[mine]
        return collate(values, lengths[mine], b_starts, width, self.pad_id), int(lengths.sum())


class Prefetching:
    """A BatchStream whose next batch is read and collated on a thread while the current step runs, so
    a GPU step does not wait for the host to build its batch. The batches, their order and state_dict
    (the position after the batches handed out, not after the one prepared ahead) are the stream's own:
    a checkpoint resumes exactly as without it."""

    def __init__(self, stream: BatchStream):
        self.stream = stream
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batches")
        self._ahead: Future | None = None
        self._state = stream.state_dict()

    def _prepare(self) -> tuple[tuple[dict[str, torch.Tensor], int], dict]:
        return self.stream.next_batch(), self.stream.state_dict()

    def next_batch(self) -> tuple[dict[str, torch.Tensor], int]:
        batch, self._state = (self._ahead or self._pool.submit(self._prepare)).result()
        self._ahead = self._pool.submit(self._prepare)
        return batch

    def state_dict(self) -> dict:
        return dict(self._state)

    def load_state_dict(self, state: dict) -> None:
        if self._ahead is not None:  # let the batch in preparation finish, then drop it
            self._ahead.result()
            self._ahead = None
        self.stream.load_state_dict(state)
        self._state = self.stream.state_dict()


def collate(values: np.ndarray, lengths: np.ndarray, b_starts: np.ndarray, width: int,
            pad_id: int) -> dict[str, torch.Tensor]:
    """Examples' token ids laid end to end (`values`), with their `lengths`, padded to `width`; token types
    are 1 from the second segment's start to the end of the example. A few array operations, where a
    loop over a batch's rows as Python lists took ~6 ms of the GIL for 128 x 128 on this CPU, time a GPU
    step's host thread waits for (reports/results/performance.md, "GPU")."""
    if len(lengths) and int(lengths.max()) > width:
        raise ValueError(f"an example of {int(lengths.max())} tokens is longer than the width {width}")
    real = np.arange(width) < lengths[:, None]
    input_ids = np.full((len(lengths), width), pad_id, dtype=np.int64)
    input_ids[real] = values  # row by row, each row's tokens from its start: the order `values` has
    token_types = (np.arange(width) >= np.asarray(b_starts, dtype=np.int64)[:, None]) & real
    return {"input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(real.astype(np.int64)),
            "token_type_ids": torch.from_numpy(token_types.astype(np.int64))}

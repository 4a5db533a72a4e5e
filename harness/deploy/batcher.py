"""The micro-batcher of `harness serve`: requests that arrive together share one onnxruntime call.

Policy. One worker runs one batch at a time, in a thread of its own, so the event loop keeps
reading requests meanwhile. Work is counted in rows, what the model runs (a job says how many it
makes: one per classification object, one per SQuAD context window). A batch is the oldest waiting
job (one HTTP request: one object or a list) plus the jobs queued behind it, in arrival order, while
the total stays within `max_batch` rows; a job is never split, and a job larger than `max_batch`
runs alone. With `max_wait_s` 0
(the default) nothing waits for company: an idle server answers at once, and under load the queue
fills while a batch runs, so batches grow with the load by themselves. A positive `max_wait_s` lets
the first job of a batch wait that long for more. If a batch fails, its jobs are retried one by one,
so a request that breaks the model fails alone. A job that would take the waiting rows past
`max_pending` is refused (`Busy`) rather than queued without bound. A job whose caller stops waiting
(a time limit) leaves the queue at once, and is skipped if its batch has not started.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field


class Busy(Exception):
    """The queue is full: the caller should answer 503 and the client retry later."""


@dataclass
class Job:
    requests: Sequence
    rows: int  # what the model runs for them
    future: asyncio.Future


@dataclass
class BatchStats:
    """What the worker has done, for /health and the tests."""

    requests: int = 0
    rows: int = 0
    batches: int = 0
    largest_batch: int = 0  # in rows
    sizes: dict[int, int] = field(default_factory=dict)  # rows in a batch -> batches of that size


class MicroBatcher:
    """Collects submitted requests into batches for `predict` (a list of requests -> a list of results)."""

    def __init__(self, predict: Callable[[list], list], max_batch: int = 32, max_wait_s: float = 0.0,
                 max_pending: int = 1024):
        self.predict, self.max_batch = predict, max_batch
        self.max_wait_s, self.max_pending = max_wait_s, max_pending
        self.stats = BatchStats()
        self._queue: deque[Job] = deque()
        self._pending = 0
        self._arrived = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="batcher")

    @property
    def pending(self) -> int:
        """Rows queued or gathered into the next batch, not yet running."""
        return self._pending

    async def submit(self, requests: Sequence, rows: int | None = None) -> list:
        """The results of `requests` (making `rows` model rows; default one each), in order, once a batch
        holding them has run."""
        rows = len(requests) if rows is None else rows
        if self._pending + rows > self.max_pending:
            raise Busy(f"{self._pending} rows are waiting and this request makes {rows}, the limit is "
                       f"{self.max_pending} (max_pending)")
        job = Job(requests, rows, asyncio.get_running_loop().create_future())
        self._queue.append(job)
        self._pending += rows
        self._arrived.set()
        try:
            return await job.future
        except asyncio.CancelledError:  # the caller gave up (a time limit, a cancelled handler)
            if job in self._queue:
                self._queue.remove(job)
                self._pending -= rows
            raise

    async def work(self) -> None:
        """Take batches off the queue and predict them, until cancelled."""
        try:
            while True:
                while not self._queue:
                    self._arrived.clear()
                    await self._arrived.wait()
                batch = await self._gather()
                self._pending -= sum(job.rows for job in batch)
                batch = [job for job in batch if not job.future.done()]  # callers that gave up meanwhile
                if batch:
                    await self._predict_batch(batch)
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def _gather(self) -> list[Job]:
        loop = asyncio.get_running_loop()
        batch = [self._queue.popleft()]
        size, deadline = batch[0].rows, loop.time() + self.max_wait_s
        while size < self.max_batch:
            if self._queue:
                if size + self._queue[0].rows > self.max_batch:
                    break
                batch.append(self._queue.popleft())
                size += batch[-1].rows
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                break
        return batch

    async def _predict_batch(self, batch: list[Job]) -> None:
        requests = [request for job in batch for request in job.requests]
        try:
            results = await asyncio.get_running_loop().run_in_executor(self._executor, self.predict, requests)
        except Exception as error:
            if len(batch) > 1:  # find the culprit: each job alone
                for job in batch:
                    await self._predict_batch([job])
            elif not batch[0].future.done():  # done: the client went away and its handler was cancelled
                batch[0].future.set_exception(error)
            return
        self._count(len(requests), sum(job.rows for job in batch))
        first = 0
        for job in batch:
            if not job.future.done():
                job.future.set_result(results[first:first + len(job.requests)])
            first += len(job.requests)

    def _count(self, requests: int, rows: int) -> None:
        self.stats.requests += requests
        self.stats.rows += rows
        self.stats.batches += 1
        self.stats.largest_batch = max(self.stats.largest_batch, rows)
        self.stats.sizes[rows] = self.stats.sizes.get(rows, 0) + 1

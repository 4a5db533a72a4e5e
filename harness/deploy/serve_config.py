"""The settings of `harness serve`, apart from the server so that `--help` needs no server library."""

from __future__ import annotations

from dataclasses import dataclass

from foundation.infra.settings import setting


@dataclass(frozen=True)
class ServeConfig:
    """Limits and batching of `harness serve` (key=value settings; `harness settings serve` explains them).

    Work is counted in model rows, what onnxruntime runs: one per classification object, one per
    max_length-token window of a SQuAD context (a long context is many), so that one request of long
    contexts cannot cost more than the limits say.
    """

    max_batch: int = setting(32, role="runtime", help=(
        "model rows a batch, at most (a classification object is one row, a SQuAD context one per window); "
        "a request of more rows runs alone"))
    onnx_batch: int = setting(8, role="runtime", help=(
        "a batch's encodings run sorted by length in onnxruntime calls of this many, so that a short "
        "request is padded only to its neighbours' length (reports/results/serve-load.md measured it)"))
    batch_wait_ms: float = setting(0.0, role="runtime", help=(
        "how long a batch's first request waits for others (0: not at all)"))
    max_pending: int = setting(1024, role="runtime", help=(
        "model rows waiting to run, at most; a request that would pass it gets 503 (at least max_rows)"))
    max_rows: int = setting(128, role="runtime", help=(
        "model rows one request may make (SQuAD: context windows), at most; more get 413 "
        "(at least max_items, at most max_pending)"))
    request_timeout_s: float = setting(30.0, role="runtime", help=(
        "seconds a request may take from its first byte to its answer; a body still arriving then gets "
        "408, a request still queued or running 504 (its queued rows are dropped)"))
    max_body_bytes: int = setting(1 << 20, role="runtime", help="larger request bodies get 413")
    max_items: int = setting(64, role="runtime", help="objects in one request's list, at most")
    max_text_chars: int = setting(20_000, role="runtime", help="characters a text (a SQuAD context included)")
    threads: int = setting(0, role="runtime", help="onnxruntime intra-op threads (0: one per core)")
    limit_concurrency: int = setting(256, role="runtime", help=(
        "uvicorn's limit_concurrency: a request that arrives while this many connections are open (its "
        "own included) or this many requests are in progress gets uvicorn's plain 503; bounds what slow "
        "clients hold (at least 2)"))
    timeout_graceful_shutdown: float = setting(30.0, role="runtime", help=(
        "uvicorn's timeout_graceful_shutdown: seconds SIGTERM or Ctrl-C waits for requests in progress "
        "before cancelling them"))
    access_log: bool = setting(False, role="output", help=(
        "a log line per request (uvicorn's); off, as it costs time under load"))

    def __post_init__(self):
        positive = ("max_batch", "onnx_batch", "max_pending", "max_rows", "max_body_bytes", "max_items",
                    "max_text_chars")
        small = [f"{name}={getattr(self, name)}" for name in positive if getattr(self, name) < 1]
        small += [f"{name}={getattr(self, name)}" for name in ("batch_wait_ms", "threads")
                  if not 0 <= getattr(self, name) < float("inf")]
        small += [f"{name}={getattr(self, name)}" for name in ("request_timeout_s",
                                                               "timeout_graceful_shutdown")
                  if not 0 < getattr(self, name) < float("inf")]
        if self.limit_concurrency < 2:  # uvicorn counts the request's own connection: 1 refuses everything
            small.append(f"limit_concurrency={self.limit_concurrency}")
        if small:
            raise ValueError(f"{', '.join(small)}: the limits must be at least 1 (limit_concurrency 2), "
                             "the time limits positive, batch_wait_ms and threads at least 0 (all finite)")
        # Each object is at least one row, and a request is refused if it cannot be queued whole: a
        # larger max_items (or max_rows) would only let requests through to be refused after parsing.
        if not self.max_items <= self.max_rows <= self.max_pending:
            raise ValueError(f"max_items={self.max_items}, max_rows={self.max_rows}, "
                             f"max_pending={self.max_pending}: need max_items <= max_rows <= max_pending "
                             "(an object is at least one model row; a request must fit the queue whole)")

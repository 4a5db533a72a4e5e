"""The settings of `harness serve`, apart from the server so that `--help` needs no server library."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeConfig:
    """Limits and batching of `harness serve` (key=value settings)."""

    max_batch: int = 32  # requests per batch, at most
    # A batch's encodings run sorted by length in onnxruntime calls of this many, so that a short
    # request is padded only to its neighbours' length (reports/results/serve-load.md measured it).
    onnx_batch: int = 8
    batch_wait_ms: float = 0.0  # how long a batch's first request waits for others (0: not at all)
    max_pending: int = 1024  # waiting requests beyond this get 503
    max_body_bytes: int = 1 << 20  # larger bodies get 413
    max_items: int = 64  # objects in one request's list
    max_text_chars: int = 20_000  # characters per text (a SQuAD context included)
    threads: int = 0  # onnxruntime intra-op threads (0: one per core)
    access_log: bool = False  # a log line per request (uvicorn's); off, it costs time under load

    def __post_init__(self):
        positive = ("max_batch", "onnx_batch", "max_pending", "max_body_bytes", "max_items", "max_text_chars")
        small = [f"{name}={getattr(self, name)}" for name in positive if getattr(self, name) < 1]
        small += [f"{name}={getattr(self, name)}" for name in ("batch_wait_ms", "threads")
                  if getattr(self, name) < 0]
        if small:
            raise ValueError(f"{', '.join(small)}: the limits must be at least 1, batch_wait_ms and threads "
                             "at least 0")

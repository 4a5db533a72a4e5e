"""The settings of `harness serve`, apart from the server so that `--help` needs no server library."""

from __future__ import annotations

from dataclasses import dataclass

from pretrain.infra.settings import setting


@dataclass(frozen=True)
class ServeConfig:
    """Limits and batching of `harness serve` (key=value settings; `harness settings serve` explains them)."""

    max_batch: int = setting(32, kind="runtime", help="requests a batch, at most")
    onnx_batch: int = setting(8, kind="runtime", help=(
        "a batch's encodings run sorted by length in onnxruntime calls of this many, so that a short "
        "request is padded only to its neighbours' length (reports/results/serve-load.md measured it)"))
    batch_wait_ms: float = setting(0.0, kind="runtime", help=(
        "how long a batch's first request waits for others (0: not at all)"))
    max_pending: int = setting(1024, kind="runtime", help="waiting requests beyond this get 503")
    max_body_bytes: int = setting(1 << 20, kind="runtime", help="larger request bodies get 413")
    max_items: int = setting(64, kind="runtime", help="objects in one request's list, at most")
    max_text_chars: int = setting(20_000, kind="runtime", help="characters a text (a SQuAD context included)")
    threads: int = setting(0, kind="runtime", help="onnxruntime intra-op threads (0: one per core)")
    access_log: bool = setting(False, kind="output", help=(
        "a log line per request (uvicorn's); off, as it costs time under load"))

    def __post_init__(self):
        positive = ("max_batch", "onnx_batch", "max_pending", "max_body_bytes", "max_items", "max_text_chars")
        small = [f"{name}={getattr(self, name)}" for name in positive if getattr(self, name) < 1]
        small += [f"{name}={getattr(self, name)}" for name in ("batch_wait_ms", "threads")
                  if getattr(self, name) < 0]
        if small:
            raise ValueError(f"{', '.join(small)}: the limits must be at least 1, batch_wait_ms and threads "
                             "at least 0")

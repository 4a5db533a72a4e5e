"""A search target that trains nothing, and a fast directory for the SQLite stores of search tests."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from pathlib import Path


def fake_target(calls=None):
    """Dev scores peak at learning_rate 1e-3 and rise with epochs; above 8e-3 the loss "diverges"."""
    from harness.search.targets import dev_score
    from harness.search.trials import SearchTarget
    from tasks.finetune import FinetuneResult

    def train(config, on_epoch):
        if calls is not None:
            calls.append(config)
        if config.learning_rate > 8e-3:
            raise FloatingPointError("training loss became nan at step 3; lower learning_rate")
        if config.batch_size == 64:
            raise RuntimeError("CUDA out of memory")
        quality = 1 - abs(math.log10(config.learning_rate) + 3) / 2
        history = []
        for epoch in range(1, config.num_epochs + 1):
            score = quality * (0.5 + 0.5 * epoch / config.num_epochs)
            history.append({"epoch": epoch, "train_loss": 1 / epoch, "validation_accuracy": score,
                            "validation_score": score})
            on_epoch(epoch, history[-1])
        return FinetuneResult(history=history, metrics={"validation": {"score": score}}, outputs={},
                              num_train_steps=4, train_time_s=0.1, train_examples_per_s=160.0,
                              train_tokens_per_s=1000.0, train_examples_seen=16)
    return SearchTarget("glue", "rte", "fake", "small", 3, train, dev_score)


@contextlib.contextmanager
def fast_dir(fallback: Path):
    """A fresh directory on tmpfs when there is one: SQLite's fsyncs on a busy disk cost seconds a trial."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield fallback
        return
    path = Path(tempfile.mkdtemp(dir=shm, prefix="harness-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)

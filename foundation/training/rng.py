"""Every random generator a process draws from, saved and restored, so that a resumed run draws what an
unbroken one would have. Shared by pre-training's checkpoints and fine-tuning's seed states.

Part of the training kit (CONTRIBUTING.md): imports nothing else of ours.
"""

from __future__ import annotations

import random

import numpy as np
import torch


def rng_state() -> dict:
    """Every random generator this process draws from, as tensors and plain values (weights_only-safe)."""
    numpy_state = np.random.get_state(legacy=False)
    key, pos = numpy_state["state"]["key"], numpy_state["state"]["pos"]
    numpy_state["state"] = {"key": key.tolist(), "pos": int(pos)}  # an ndarray would need full unpickling
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict) -> None:
    random.setstate(state["python"])
    numpy_state = dict(state["numpy"])
    numpy_state["state"] = {"key": np.array(numpy_state["state"]["key"], dtype=np.uint32),
                            "pos": numpy_state["state"]["pos"]}
    np.random.set_state(numpy_state)
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])

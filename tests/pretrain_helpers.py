"""Pre-training the micro preset (conftest.MICRO) in tests: its configs, a kill at a step, the weights a
run ends with, and the `harness pretrain` command line, in-process or launched."""

from __future__ import annotations

from pathlib import Path

import torch

from pretrain.config import PretrainConfig, resolve
from tests.conftest import MICRO

# A `harness` entry point for subprocesses (torchrun, an image-like interpreter): the micro preset is
# the test suite's, so the process registers it before the CLI parses its arguments.
LAUNCHER = """import sys
from foundation.models.presets import PRESETS
from tests.conftest import MICRO
PRESETS[MICRO.name] = MICRO
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


class Killed(Exception):
    """Stands for a kill of the process, raised from on_log (see killed_at)."""


def killed_at(step: int):
    """An on_log that kills the run once it has logged `step`."""
    def on_log(at, metrics):
        if at >= step:
            raise Killed
    return on_log


def micro_config(tmp_path: Path, corpus: Path, name: str = "out", **settings) -> PretrainConfig:
    values = {"preset": MICRO.name, "corpus": (str(corpus),), "output_dir": str(tmp_path / name),
              "tokenizer": "train", "train_vocab_size": 200, "cache_dir": str(tmp_path.parent / "cache"),
              "precision": "fp32", "log_every_steps": 5, "max_steps": 10, **settings}
    return PretrainConfig(**values)


def micro_setup(**settings):
    """`build_setup` of the micro preset on the CPU, with a 60-word stand-in tokenizer (no corpus)."""
    from types import SimpleNamespace

    from foundation.training.distributed import Context
    from pretrain.prepare import build_setup

    class Tokenizer(SimpleNamespace):
        def __len__(self):
            return 60

    tokenizer = Tokenizer(pad_token_id=0, cls_token_id=2, sep_token_id=3, mask_token_id=4)
    config = PretrainConfig(preset=MICRO.name, max_steps=1, precision="fp32", device="cpu", **settings)
    return build_setup(resolve(config), Context(0, 1, torch.device("cpu")), tokenizer)


def final_weights(out: Path) -> dict[str, torch.Tensor]:
    """The model's weights and Adam's moments at a run's last checkpoint."""
    step = max(int(p.name.split("-")[1]) for p in (out / "checkpoints").iterdir())
    state = torch.load(out / "checkpoints" / f"step-{step}" / "training_state.pt", weights_only=True)
    moments = state["optimizer"]["state"]
    return state["model"] | {f"optimizer.{k}": v["exp_avg"] for k, v in moments.items()} | \
        {f"optimizer.{k}.squares": v["exp_avg_sq"] for k, v in moments.items()}


def pretrain_args(tmp_path, corpus_path, *extra, name="out") -> list[str]:
    """`harness pretrain` of the micro preset on `corpus_path`, writing under tmp_path."""
    return ["pretrain", "--preset", MICRO.name, "--corpus", str(corpus_path), "--output",
            str(tmp_path / name), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *extra,
            "tokenizer=train", "train_vocab_size=200", "precision=fp32", f"cache_dir={tmp_path / 'cache'}"]

"""One fine-tuning seed's latest state on disk, so that a killed or stopped seed goes on where it was.

OUT/checkpoints/{task}-seed{seed}.pt holds what the loop needs to go on exactly as if it had never
stopped: model, optimiser and schedule, every RNG, the sampler's state at the start of the epoch in
progress and the steps taken in it, the counters, and the epochs' history. A seed trained by several
processes (tasks/data_parallel.py) is saved by rank 0, with every process's RNGs, and every process
reads it to resume. It is written (atomically,
replacing the last one) after each epoch but the last, and when a signal stops the seed
(foundation/training/stop.py); the caller deletes it once the seed's record is in results.json, so a run
directory keeps at most one per seed being trained.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from foundation.infra import atomic
from foundation.infra.errors import UserError
from foundation.training import distributed, stop
from foundation.training.rng import restore_rng, rng_state

STATE_FORMAT = 1
FOLDER = "checkpoints"
# What a seed's state restores, by name: "model", "optimizer", "schedule", and fp16's "scaler"; each part
# has state_dict() and load_state_dict().
Parts = Mapping[str, Any]


def seed_path(output_dir: Path, task: str, seed: int) -> Path:
    """Where a seed's state lives in a run directory."""
    return Path(output_dir) / FOLDER / f"{task}-seed{seed}.pt"


@dataclass
class LoopPoint:
    """Where the loop is: what tasks/finetune.py carries from one step to the next."""

    epoch: int = 0  # the epoch in progress, from 0
    epoch_steps: int = 0  # steps taken in it
    step: int = 0
    examples: int = 0
    tokens: int = 0
    train_time_s: float = 0.0
    loss_sum: torch.Tensor | float = 0.0  # the epoch's summed losses so far (its train_loss's numerator)
    history: list[dict[str, float]] = field(default_factory=list)
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)

    def running(self, epoch: int, device: torch.device) -> tuple[torch.Tensor, int]:
        """The loss sum and step count `epoch` starts from: zero, or the saved ones of a resumed epoch."""
        if epoch != self.epoch:
            return torch.zeros((), device=device), 0
        return torch.as_tensor(self.loss_sum, dtype=torch.float32).to(device), self.epoch_steps


class SeedState:
    """A seed's saved state (`path`; None keeps nothing) as the loop reads and writes it.

    `identity` (the model path and the resolved settings) must match the saved one's: a state is
    resumed only by the run that wrote it.
    """

    def __init__(self, path: Path | None, identity: dict[str, Any] | None = None):
        self.path, self.identity = path, identity or {}
        self.saved = _load(path, self.identity) if path is not None and path.is_file() else None
        self.point = LoopPoint(**self.saved["point"]) if self.saved else LoopPoint()
        self._generator: torch.Generator | None = None  # the sampler's, which draws each epoch's order
        self._replicas = distributed.Context(0, 1, torch.device("cpu"))  # the processes training the seed
        self._epoch_order: torch.Tensor | None = None  # its state at the current epoch's start

    @property
    def resumes(self) -> list[dict[str, int]]:
        """Each point this seed was resumed from, this invocation's last; [] for a fresh seed."""
        if self.saved is None:
            return []
        return [*self.saved["resumes"], {"epoch": self.point.epoch, "step": self.point.step}]

    def start(self, parts: Parts, replicas: distributed.Context | None = None) -> LoopPoint:
        """The saved state restored into the parts (the RNGs follow in `batches`), and the point to go on
        from (a fresh seed: LoopPoint()); from here a signal stops the seed at a step boundary, with its
        state saved. A part the state lacks (fp16's scaler, in a state saved before it was kept) starts
        afresh. `replicas`: the processes training the seed under torchrun (one without)."""
        self._replicas = replicas or self._replicas
        if self.path is not None:
            stop.arm()
        if self.saved is not None:
            for name, part in parts.items():
                if name in self.saved:
                    part.load_state_dict(self.saved[name])
        return self.point

    def batches(self, loader: DataLoader, epoch: int) -> Iterator[dict[str, torch.Tensor]]:
        """`epoch`'s batches in the order an unbroken run draws them; a resumed epoch skips those trained on.

        The sampler's generator draws the epoch's order. Creating the iterator draws a worker seed from
        the global RNG (dropout's) at each epoch's start, with persistent workers at the first only: the
        saved RNGs are restored where the unbroken run stood when they were taken.
        """
        self._generator = loader.sampler.generator  # RandomSampler's and LengthGroupedSampler's alike
        resumed = self.saved is not None and epoch == self.point.epoch
        if resumed:
            self._generator.set_state(self.saved["epoch_order"])
        self._epoch_order = self._generator.get_state()
        before_iterator = resumed and not self.point.epoch_steps and not (loader.persistent_workers and epoch)
        if before_iterator:
            self._restore_rng()
        iterator = iter(loader)
        if resumed:
            for _ in range(self.point.epoch_steps):  # collated and dropped: data only, no random draws
                next(iterator)
            if not before_iterator:
                self._restore_rng()
        yield from iterator

    def _restore_rng(self) -> None:
        """This process's saved generators: rank 0's are "rng", rank r's "rank_rngs"[r - 1]. A state saved
        by another number of processes has none for rank r: it draws afresh from its own seeded stream
        advanced by the step (dropout's masks then differ from an unbroken run's, as another seed's do)."""
        rank = self._replicas.rank
        others = self.saved.get("rank_rngs", [])
        if not rank:
            restore_rng(self.saved["rng"])
        elif len(others) == self._replicas.world_size - 1:
            restore_rng(others[rank - 1])
        else:
            torch.manual_seed(torch.initial_seed() + self.point.step)

    def save(self, parts: Parts, point: LoopPoint) -> None:
        """Write `point` (with the parts' states and the RNGs) over the seed's last state, atomically."""
        if self.path is None:
            return
        rngs = distributed.gather(self._replicas, rng_state())  # every process calls save
        if self._replicas.is_main:
            # At an epoch's end the generator already stands at the next epoch's start.
            order = self._epoch_order if point.epoch_steps else self._generator.get_state()
            saved = {"format": STATE_FORMAT, "identity": self.identity, "resumes": self.resumes,
                     "point": _plain(point), **{name: part.state_dict() for name, part in parts.items()},
                     "rng": rngs[0], "epoch_order": order} | ({"rank_rngs": rngs[1:]} if rngs[1:] else {})
            with atomic.staged_file(self.path) as temporary:
                torch.save(saved, temporary)
        # the others wait for the file: one that went on and exited (a stop) would make torchrun end rank 0
        distributed.barrier(self._replicas)

    def stop(self, parts: Parts, point: LoopPoint) -> None:
        """A signal asked for a stop at this step boundary: save, then raise stop.Stopped."""
        self.save(parts, point)
        kept = f"its state is {str(self.path)!r}" if self.path is not None else "its state is not kept"
        raise stop.stopped(f"at step {point.step} (epoch {point.epoch + 1}); {kept}")


def discard(path: Path) -> None:
    """A finished seed's state, no longer needed. The folder stays: a seed run side by side into the same
    output directory may be writing its own state into it at this moment."""
    path.unlink(missing_ok=True)


def _plain(point: LoopPoint) -> dict:
    """The point as plain Python values and one tensor: a metric may be a numpy float, which
    torch.load(weights_only=True) refuses."""
    values = dataclasses.asdict(dataclasses.replace(point, loss_sum=0.0))
    return json.loads(json.dumps(values, default=lambda value: value.tolist())) | {
        "loss_sum": torch.as_tensor(point.loss_sum).detach().cpu()}


def _load(path: Path, identity: dict[str, Any]) -> dict:
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated by hand, or not ours: say so in one line
        raise UserError(f"{str(path)!r} is not a readable fine-tuning state ({type(error).__name__}); delete "
                        "it to train that seed afresh") from error
    if not isinstance(saved, dict) or saved.get("format") != STATE_FORMAT:
        raise UserError(f"{str(path)!r} is not a format-{STATE_FORMAT} fine-tuning state; delete it to train "
                        "that seed afresh")
    # Refused rather than started afresh: deleting a state is the user's call (it may be the only copy
    # of hours of training, written by another version); the message says how.
    parts = {"identity": dict, "point": dict, "resumes": list, "rng": dict, "epoch_order": torch.Tensor}
    lacking = [key for key, expected in parts.items() if not isinstance(saved.get(key), expected)]
    lacking += [] if isinstance(saved.get("rank_rngs", []), list) else ["rank_rngs"]
    if not lacking:
        try:
            LoopPoint(**saved["point"])
        except TypeError:
            lacking = ["point"]
    if lacking:
        raise UserError(f"{str(path)!r} is a damaged fine-tuning state (its {', '.join(lacking)} "
                        f"{'is' if len(lacking) == 1 else 'are'} missing or malformed); delete it to train "
                        "that seed afresh")
    differences = [f"{key}: {saved['identity'].get(key)!r} -> {value!r}" for key, value in identity.items()
                   if saved["identity"].get(key) != value]
    if differences:
        raise UserError(f"{str(path)!r} holds a stopped seed trained with other settings "
                        f"({'; '.join(differences)}); resume it with the same settings, or delete it to "
                        "train that seed afresh")
    return saved

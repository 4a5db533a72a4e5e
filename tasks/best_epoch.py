"""select_epoch=best: the epoch whose dev score is highest, its model state kept (a CPU copy) to restore at
the end of the seed, so its predictions, test predictions and saved model are that epoch's.

A departure from ELECTRA's recipe, which reports the last epoch: choosing on dev inflates dev scores
(reports/recipe.py names it on every row that shows one). The holder is one of the loop's saved parts
(tasks/finetune_state.py), so a stopped seed resumes with its best-so-far.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import torch

from foundation.infra.errors import UserError


def epoch_score(metrics: dict[str, dict[str, float]]) -> float:
    """What an epoch is chosen by: the mean over the dev splits of each split's `score` (reports'
    task_score, the score the seed is ranked by); every kind's scores are higher-is-better."""
    if not metrics or any("score" not in values for values in metrics.values()):
        raise UserError("select_epoch=best chooses the epoch by its dev score, and this task scores no dev "
                        "split each epoch; leave select_epoch=last")
    return statistics.fmean(values["score"] for values in metrics.values())


class BestEpoch:
    """The best epoch so far (1-based; 0: none yet), its score and model state."""

    def __init__(self):
        self.epoch, self.score, self.model_state = 0, -math.inf, {}

    def offer(self, epoch: int, metrics: dict[str, dict[str, float]], model: torch.nn.Module) -> None:
        """Keep this epoch if it scores above the best so far (a tie keeps the earlier epoch)."""
        score = epoch_score(metrics)
        if score > self.score or not self.epoch:
            self.epoch, self.score = epoch, score
            self.model_state = {name: tensor.detach().to("cpu", copy=True)
                                for name, tensor in model.state_dict().items()}

    def restore(self, model: torch.nn.Module, last_epoch: int) -> bool:
        """Put the best epoch's weights back into `model`; False where the last epoch is the best."""
        if self.epoch in (0, last_epoch):
            return False
        model.load_state_dict(self.model_state)
        return True

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "score": self.score, "model": self.model_state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.score, self.model_state = int(state["epoch"]), float(state["score"]), state["model"]

"""The optimiser's settings, declared once for both loops: PretrainConfig and FinetuneConfig each place
them with `optimizer_setting(name)` where their field order has them, so results.json, MLflow params
and `harness settings` keep their order, and the help, role and `before` of each is one declaration.

The settings whose defaults differ between the loops (learning_rate, warmup_fraction) are each loop's own.
Torch-free: the CLI builds its help from these without loading torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from foundation.infra.settings import declared, described, setting

Optimizer = Literal["electra", "adamw"]


@dataclass(frozen=True)
class OptimizerSettings:
    """The declarations themselves; a run's config holds the values."""

    optimizer: Optimizer = setting("electra", role="recipe", before="adamw", help=(
        "electra: ELECTRA's Adam without bias correction, warmup multiplied into the decay (the official "
        "code's); adamw: torch's AdamW, warmup then decay (what runs before this setting used)"))
    weight_decay: float = setting(0.01, role="recipe", help="decoupled, not on biases and norm weights")
    adam_epsilon: float = setting(1e-6, role="recipe", help="Adam's epsilon (the official code's 1e-6)")
    max_grad_norm: float = setting(1.0, role="recipe", help=(
        "clip the gradient's global norm to this (the official code's 1.0)"))


def optimizer_setting(name: str) -> Any:
    """A fresh field for the optimiser setting `name`: its default and its one Setting."""
    field = OptimizerSettings.__dataclass_fields__[name]
    return declared(field.default, described(field))


def optimizer_errors(config: Any) -> list[str]:
    """What both optimisers refuse, said before a run starts rather than when the optimiser is built."""
    return [f"{name} must be 0 or more (got {getattr(config, name)})"
            for name in ("weight_decay", "adam_epsilon") if getattr(config, name) < 0]

"""Budgets, the learning-rate schedule and per-step FLOPs.

A run stops at the first budget reached (steps, tokens, wall time, FLOPs). The schedule is a
function of the fraction of the budget used, so warmup and decay scale with the run whatever
the budget's unit. Wall time counts towards the schedule only when it is the sole budget: beside a
steps, tokens or FLOPs budget it is a safety stop, since a schedule following the clock would make
the same seed and settings train a different model on a busier machine. With `optimizer=electra`,
ELECTRA's: linear decay to zero (polynomial decay of power 1) multiplied by a linear warmup over
`warmup_fraction`; with `adamw`, warmup then decay (foundation/training/optimization.py, fine-tuning's
schedule too, there over steps).
Two-stage runs give each stage its own warmup and decay.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from foundation.models.flops import TRAIN_TO_FORWARD_RATIO, train_step_flops
from foundation.training.optimization import scheduled_rate
from pretrain.config import BUDGETS, PretrainConfig


@dataclass
class BudgetCounters:
    """What the budgets count; saved in every checkpoint."""

    step: int = 0
    tokens: int = 0  # real (non-padding) tokens in all processes' batches
    flops: float = 0.0  # paper convention, summed over steps
    elapsed_s: float = 0.0  # training wall time, resumed runs included
    stage: int = 1  # two-stage only

    def state_dict(self) -> dict:
        return asdict(self)


def budget_fraction(config: PretrainConfig, counters: BudgetCounters) -> float:
    """Fraction of the budget used: the largest over the budgets that are set."""
    used = [counters.step / config.max_steps if config.max_steps else 0.0,
            counters.tokens / config.max_tokens if config.max_tokens else 0.0,
            counters.elapsed_s / config.max_time_s if config.max_time_s else 0.0,
            counters.flops / config.max_flops if config.max_flops else 0.0]
    return max(used)


def schedule_fraction(config: PretrainConfig, counters: BudgetCounters) -> float:
    """Fraction the schedule follows: the largest over the budgets other than time, or time alone."""
    work = [counters.step / config.max_steps if config.max_steps else None,
            counters.tokens / config.max_tokens if config.max_tokens else None,
            counters.flops / config.max_flops if config.max_flops else None]
    work = [used for used in work if used is not None]
    if work:
        return max(work)
    return counters.elapsed_s / config.max_time_s if config.max_time_s else 0.0


def stopped_by(config: PretrainConfig, counters: BudgetCounters) -> str | None:
    """The budget that ended the run (the first spent, in BUDGETS order), or None while it goes on."""
    used = {"max_steps": counters.step / config.max_steps if config.max_steps else 0.0,
            "max_tokens": counters.tokens / config.max_tokens if config.max_tokens else 0.0,
            "max_time_s": counters.elapsed_s / config.max_time_s if config.max_time_s else 0.0,
            "max_flops": counters.flops / config.max_flops if config.max_flops else 0.0}
    spent = [key for key in BUDGETS if used[key] >= 1.0]
    if "max_time_s" in spent and len(spent) > 1:  # the work budget was met; the clock did not cut it
        spent.remove("max_time_s")
    return spent[0] if spent else None


def stage_fraction(config: PretrainConfig, fraction: float, stage: int) -> float:
    """Progress within the current stage (the whole run unless two-stage)."""
    if config.objective != "two-stage":
        return fraction
    switch = config.two_stage_switch
    if stage == 1:
        return fraction / switch if switch else 1.0
    return (fraction - switch) / (1 - switch) if switch < 1 else 1.0


def learning_rate(config: PretrainConfig, fraction: float) -> float:
    """The rate at `fraction` of the budget: the training kit's schedule over a budget of 1."""
    return scheduled_rate(config.learning_rate, fraction, 1.0, config.warmup_fraction, config.optimizer)


def step_flops(objective: str, stage: int, discriminator, generator, batch_size: int, seq_len: int) -> float:
    """Paper-convention FLOPs of one step of `batch_size` examples padded to `seq_len`.

    replace-mlm and all-tokens-mlm are costed as an MLM main model plus the generator; the
    all-tokens variant's vocabulary softmax over every position is not counted (an underestimate).
    """
    if objective == "mlm":
        return train_step_flops(discriminator, None, batch_size, seq_len)
    generator_alone = train_step_flops(generator, None, batch_size, seq_len)
    if objective in ("replace-mlm", "all-tokens-mlm"):
        return train_step_flops(discriminator, None, batch_size, seq_len) + generator_alone
    if objective == "two-stage" and stage == 1:
        return generator_alone
    both = train_step_flops(discriminator, generator, batch_size, seq_len)
    if objective == "two-stage":  # frozen generator: forward only
        return both - generator_alone * (1 - 1 / TRAIN_TO_FORWARD_RATIO)
    return both

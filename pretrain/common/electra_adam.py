"""ELECTRA's optimiser and schedule in torch: Adam without bias correction, warmup times linear decay.

google-research/electra `model/optimization.py`, `AdamWeightDecayOptimizer._apply_gradients`:

    m = beta1·m + (1 − beta1)·g          v = beta2·v + (1 − beta2)·g²
    update = m / (sqrt(v) + eps) + weight_decay·param      (weight decay only where the group has it)
    param = param − lr·update

Without bias correction, under a steady gradient step t moves (1 − beta1^t)/sqrt(1 − beta2^t) times
as far as torch's AdamW at the same lr: 3.2x at step 1, 6.5x at step 10, 3.2x at 100, 1.3x at 1,000.
ELECTRA's learning rates were tuned with these larger early steps. Weight decay is decoupled and
scaled by lr, from the parameter before the step, as in torch's AdamW.

`create_optimizer` there multiplies the warmup into the decay: lr(step) = peak·(1 − step/T)·min(1,
step/W), W = T·warmup_fraction (a float, not rounded), so step 0 has lr 0, and the rate never reaches
the peak (at step W it is peak·(1 − W/T)). Used for fine-tuning and pre-training alike. Imports only torch.
"""

from __future__ import annotations

import torch

OPTIMIZERS = ("electra", "adamw")  # the `optimizer` setting's choices; "electra" is this module


def electra_lr_factor(step: float, num_steps: float, warmup_steps: float) -> float:
    """Multiplier of the peak rate at `step`: (1 − step/T)·min(1, step/W), zero past T."""
    decay = max(0.0, 1.0 - step / num_steps) if num_steps > 0 else 0.0
    warmup = min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0
    return decay * warmup


class ElectraAdam(torch.optim.Optimizer):
    """AdamWeightDecayOptimizer: Adam moments without bias correction, decoupled weight decay.

    Param groups take `lr`, `betas`, `eps` and `weight_decay` as torch's AdamW groups do, so the
    layer-wise groups of tasks/optim.py and pre-training's decay/no-decay split work unchanged.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.0):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"bad ElectraAdam settings: lr={lr}, betas={betas}, eps={eps}, "
                             f"weight_decay={weight_decay}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            for p in params:
                if not self.state[p]:
                    self.state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    self.state[p]["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            means = [self.state[p]["exp_avg"] for p in params]
            squares = [self.state[p]["exp_avg_sq"] for p in params]
            beta1, beta2 = group["betas"]
            torch._foreach_mul_(means, beta1)
            torch._foreach_add_(means, grads, alpha=1 - beta1)
            torch._foreach_mul_(squares, beta2)
            torch._foreach_addcmul_(squares, grads, grads, value=1 - beta2)
            denominators = torch._foreach_sqrt(squares)
            torch._foreach_add_(denominators, group["eps"])
            updates = torch._foreach_div(means, denominators)
            if group["weight_decay"]:
                torch._foreach_add_(updates, params, alpha=group["weight_decay"])
            torch._foreach_add_(params, updates, alpha=-group["lr"])
        return loss

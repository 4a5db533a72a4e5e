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
        """One update of every parameter with a gradient, all groups in one pass of foreach kernels:
        a fine-tuning model's ~28 layer-wise groups cost no more launches than one (on a GPU the step
        is bound by launches, not arithmetic)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for (beta1, beta2, eps), bucket in self._buckets().items():
            params, grads = bucket["params"], bucket["grads"]
            means, squares = bucket["means"], bucket["squares"]
            torch._foreach_mul_(means, beta1)
            torch._foreach_add_(means, grads, alpha=1 - beta1)
            torch._foreach_mul_(squares, beta2)
            torch._foreach_addcmul_(squares, grads, grads, value=1 - beta2)
            denominators = torch._foreach_sqrt(squares)
            torch._foreach_add_(denominators, eps)
            updates = torch._foreach_div(means, denominators)
            for decay, indices in bucket["decays"].items():  # one call per distinct weight decay
                torch._foreach_add_([updates[i] for i in indices], [params[i] for i in indices], alpha=decay)
            torch._foreach_mul_(updates, [-rate for rate in bucket["rates"]])
            torch._foreach_add_(params, updates)
        return loss

    def _buckets(self) -> dict[tuple[float, float, float], dict]:
        """Parameters with a gradient, their state and their group's lr and weight decay, by (betas, eps)."""
        buckets: dict[tuple[float, float, float], dict] = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                bucket = buckets.setdefault((*group["betas"], group["eps"]), {
                    "params": [], "grads": [], "means": [], "squares": [], "rates": [], "decays": {}})
                if group["weight_decay"]:
                    bucket["decays"].setdefault(group["weight_decay"], []).append(len(bucket["params"]))
                bucket["params"].append(p)
                bucket["grads"].append(p.grad)
                bucket["means"].append(state["exp_avg"])
                bucket["squares"].append(state["exp_avg_sq"])
                bucket["rates"].append(group["lr"])
        return buckets

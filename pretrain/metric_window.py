"""Training metrics over a logging window, summed across processes before they are reported."""

from __future__ import annotations

import time

import torch

from foundation.training import distributed as dist

# (metric, numerator, denominator) for ratios of summed counts.
RATIOS = (("generator_accuracy", "generator_correct", "masked_total"),
          ("mlm_accuracy", "mlm_correct", "masked_total"),
          ("disc_accuracy_replaced", "replaced_correct", "replaced_total"),
          ("disc_accuracy_original", "original_correct", "original_total"),
          ("replaced_fraction", "replaced_total_all", "tokens_total"),
          ("replaced_of_masked", "replaced_total_all", "masked_total"))
MEANS = ("loss", "generator_loss", "mlm_loss", "discriminator_loss", "disc_auc", "grad_norm")
PROBES = ("disc_auc_unigram", "position_cosine")  # pretrain/probe.py
FINAL_KEYS = MEANS[:5] + tuple(name for name, _, _ in RATIOS) + PROBES


class MetricWindow:
    """Sums per-step losses and counts on the device; `flush` turns them into metrics."""

    def __init__(self):
        self.last: dict[str, float] = {}
        self._reset()

    def _reset(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.steps, self.tokens, self.start = 0, 0, time.perf_counter()

    def add(self, loss: torch.Tensor, stats: dict[str, torch.Tensor], tokens: int, grad_norm) -> None:
        for key, value in {**stats, "loss": loss, "grad_norm": grad_norm}.items():
            # a copy: outputs of a CUDA-graphed step are overwritten by the next step
            value = value.detach().to(torch.float64, copy=True)
            self.sums[key] = self.sums[key] + value if key in self.sums else value
        self.steps += 1
        self.tokens += tokens

    def flush(self, context: dist.Context, counters, lr: float, fraction: float) -> dict[str, float]:
        """Metrics of the window (every process must call this), then start a new window."""
        keys = sorted(self.sums)
        totals = dist.sum_across(context, torch.stack([self.sums[k] for k in keys])) if keys else []
        summed = dict(zip(keys, (float(t) for t in totals), strict=True))
        seconds = time.perf_counter() - self.start
        metrics = {name: summed[name] / (self.steps * context.world_size) for name in MEANS if name in summed}
        metrics.update({name: summed[num] / summed[den] for name, num, den in RATIOS
                        if num in summed and summed.get(den)})
        metrics.update({"learning_rate": lr, "tokens": counters.tokens, "train_flops": counters.flops,
                        "tokens_per_s": self.tokens / seconds if seconds else 0.0,
                        "elapsed_s": counters.elapsed_s, "progress": fraction})
        self._reset()
        self.last = metrics
        return metrics


def merge_slices(parts: list[tuple[float, torch.Tensor, dict[str, torch.Tensor]]]):
    """One step's (loss, stats) from its accumulation slices' (share of the batch, loss, stats): the
    losses and other MEANS weighted by share, the counts summed, as the whole batch would give them."""
    loss = sum(share * part_loss for share, part_loss, _ in parts)
    stats = {key: sum((share if key in MEANS else 1) * part[key] for share, _, part in parts)
             for key in parts[0][2]}
    return loss, stats


def final_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """The subset of the last window's metrics that goes into pretrain_meta.json."""
    return {k: v for k, v in metrics.items() if k in FINAL_KEYS or k == "tokens_per_s"}

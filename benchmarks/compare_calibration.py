"""How often `harness compare` calls two draws of one model different, and how well its intervals cover,
with the dev-set variance as it is now (seed-by-example noise counted once) and as it was (twice).

RTE-sized dev sets (277 examples) of 0/1 answers: a latent example difficulty shared by every run
(the pairing), a small seed effect and seed-by-example noise, as tests/simulation.py simulates, so
per-seed scores spread ~2 points. A and B are two draws of the same model (null); B' is B with a
true 4.9-point lower expected accuracy. Fresh examples and seeds in every draw.

    python benchmarks/compare_calibration.py [--draws 1000]
    python benchmarks/compare_calibration.py --ranges [--draws 20000]

--ranges: one run's interval where it can reach past the metric's range. Seeds of a fine-tuning that
collapses half the time to the majority class (SST-2's 50.9% here) and otherwise reaches 85%, as
the demo's runs do: per-seed accuracies on an 872-example dev set, the dev-set variance binomial. Three
intervals of the seed mean, as `reports/stats.py` had it (raw), as it has it now (cut to [0, 1]), and on
the logit scale (delta method, back-transformed): coverage of the expected accuracy, how often the
interval leaves [0, 1], and its median width.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports import stats  # noqa: E402
from tasks import metrics  # noqa: E402
from tests.simulation import simulated  # noqa: E402

N, SEED_SD, NOISE_SD, THRESHOLD, SHIFT = 277, 0.03, 0.6, 0.3, 0.15


def seed_mean_only(per_seed: stats.Statistic) -> stats.Statistic:
    return lambda indices: per_seed(indices).mean(0, keepdims=True)


def difference(a, b, draw: int, double_count: bool) -> stats.Estimate:
    """A - B as harness compare computes it; double_count: the dev-set term as before the fix."""
    ones = np.ones(N, dtype=int)
    per_seed = [stats.seed_statistic(metrics.batched_accuracy, answers, ones) for answers in (a, b)]
    if double_count:  # one "seed" holding the seed mean: nothing is taken out of the bootstrap variance
        per_seed = [seed_mean_only(statistic) for statistic in per_seed]
    dev_var = stats.dev_variance(per_seed, N, (1, -1), n_resamples=300, seed=draw)
    return stats.paired_difference(a.mean(1), b.mean(1), dev_var, bounds=(0.0, 1.0))  # as harness compare


COLLAPSED, LEARNED, DEV = 0.509, 0.85, 872  # SST-2's majority share and dev set


def logit_interval(seed_scores: np.ndarray, dev_var: float) -> tuple[float, float]:
    """The seed mean's interval on the logit scale (its se by the delta method), back-transformed."""
    raw = stats.interval(list(seed_scores), dev_var)
    value = min(max(raw.value, 1e-6), 1 - 1e-6)
    se = raw.se / (value * (1 - value))
    half = stats.quantile(0.5 + stats.CONFIDENCE / 2, raw.df) * se
    centre = math.log(value / (1 - value))
    return tuple(1 / (1 + math.exp(-x)) for x in (centre - half, centre + half))


def ranges(draws: int) -> None:
    truth = (COLLAPSED + LEARNED) / 2
    print(f"{draws} draws; a seed collapses to {COLLAPSED:.3f} or learns {LEARNED:.3f} (even odds): "
          f"expected accuracy {truth:.4f}; {DEV} dev examples")
    print("seeds | interval | coverage | outside [0, 1] | median width (points)")
    for seeds in (2, 3, 5):
        rng = np.random.default_rng(seeds)
        found = {name: {"cover": 0, "outside": 0, "widths": []}
                 for name in ("raw (before)", "cut (now)", "logit")}
        for _ in range(draws):
            expected = np.where(rng.random(seeds) < 0.5, COLLAPSED, LEARNED)
            scores = rng.binomial(DEV, expected) / DEV
            dev_var = float(np.mean(expected * (1 - expected))) / DEV / seeds
            raw = stats.interval(list(scores), dev_var)
            cut = stats.interval(list(scores), dev_var, bounds=(0.0, 1.0))
            for name, (low, high) in zip(found, [(raw.low, raw.high), (cut.low, cut.high),
                                                 logit_interval(scores, dev_var)], strict=True):
                found[name]["cover"] += low <= truth <= high
                found[name]["outside"] += low < 0 or high > 1
                found[name]["widths"].append(100 * (high - low))
        for name, tally in found.items():
            print(f"{seeds} | {name} | {tally['cover'] / draws:.3f} | {tally['outside'] / draws:.3f} | "
                  f"{np.median(tally['widths']):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=None, help="1000 (comparisons) or 20000 (--ranges)")
    parser.add_argument("--ranges", action="store_true", help="one run's interval against the metric's range")
    args = parser.parse_args()
    if args.ranges:
        ranges(args.draws or 20000)
        return
    args.draws = args.draws or 1000
    total_sd = math.sqrt(SEED_SD ** 2 + 1 + NOISE_SD ** 2)
    truth = scipy_stats.norm.sf(THRESHOLD / total_sd) - scipy_stats.norm.sf((THRESHOLD + SHIFT) / total_sd)
    print(f"{args.draws} draws, {N} dev examples, true difference {100 * truth:.2f} points")
    print("seeds | dev-set term | false positives (nominal 5%) | coverage | power | seeds for 1 point: "
          "answered, median")
    for seeds in (3, 5):
        rng = np.random.default_rng(seeds)
        found = {flag: {"fp": 0, "cover": 0, "power": 0, "seeds": []} for flag in (True, False)}
        for draw in range(args.draws):
            effects = rng.normal(0, 1, N)
            a, b, shifted = (simulated(rng, seeds, N, SEED_SD, effects, THRESHOLD + extra, NOISE_SD)
                             for extra in (0, 0, SHIFT))
            for flag, tally in found.items():
                null, real = difference(a, b, draw, flag), difference(a, shifted, draw, flag)
                tally["fp"] += stats.compare(null).p_value < 0.05
                tally["cover"] += real.low <= truth <= real.high
                tally["power"] += stats.compare(real).p_value < 0.05
                tally["seeds"].append(stats.seeds_needed(null, 0.01))
        for flag, tally in found.items():
            answered = [s for s in tally["seeds"] if s is not None]
            median = f"{np.median(answered):.0f}" if answered else "-"
            print(f"{seeds} | {'counted twice (before)' if flag else 'counted once (now)'} | "
                  f"{tally['fp'] / args.draws:.3f} | {tally['cover'] / args.draws:.3f} | "
                  f"{tally['power'] / args.draws:.3f} | {len(answered)}/{args.draws}, {median}")


if __name__ == "__main__":
    main()

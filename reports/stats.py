"""Confidence intervals and paired comparisons of dev scores over fine-tuning seeds and dev examples.

Pure functions of arrays; every resampling is seeded. A run's score on a task is estimated by the
mean over its seeds of the task metric (the table shows the paper's median beside it). Its variance
has two parts, estimated separately and added:

- seeds: the between-seed variance of the per-seed scores over S (s^2 / S). All seeds score the same
  dev set, so this part holds no sampling noise of the dev set's examples; it does hold how the seeds
  disagree example by example (the seed-by-example interaction, I / S).
- the dev set: the variance of the seed-mean score over bootstrap resamples of the dev examples
  (scipy.stats.bootstrap), recomputing the metric on resampled predictions (MCC, F1 and Spearman
  are not means of per-example scores). One resample is shared by every seed, and by both runs in
  a comparison, because they all score the same examples: resampling each seed's examples on their
  own would shrink this part by 1/S. Over resamples the seed mean varies by B + I / S (B: the
  examples' shared difficulty); one seed's score by B + I. The I / S already in the seed part is
  taken out, estimated from the same resamples as (mean over seeds of Var(seed) - Var(seed mean)) /
  (S - 1), so only B remains (dev_variance). Counting it twice made intervals too wide, tests too
  timid (about 1-3% false positives at a nominal 5%) and "seeds needed" unreachable.

The interval is value +- t * se with Welch-Satterthwaite degrees of freedom (S-1 for the seed part,
infinite for the dev part): with three seeds and seed noise dominant, t is ~4.3, not 1.96. With one
seed there is no seed part; the interval covers the dev set only, and `covers` says so.

Where the metric's range is known (`bounds`: accuracy and F1 in [0, 1], correlations in [-1, 1], a
difference of two such in [lo - hi, hi - lo]), the interval is cut to it: with two seeds t is 12.7
and value +- t * se reached past 100% accuracy. The expected score lies in the range, so cutting the
interval there never makes it miss the expected score more often (coverage is unchanged), and an
interval inside the range is left exactly as it was; the t test and p-value are untouched. A transform
(logit, Fisher z) would keep it inside too, but moves every interval and leans on the delta method at
the two or three seeds runs have (reports/results/compare-calibration.md measures both).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
POWER = 0.80  # for minimum detectable differences and seeds needed
N_RESAMPLES = 1000
SEED = 0
BATCH = 100  # resamples scored at once: bounds memory at BATCH x seeds x examples values
BOTH = "seeds and dev examples"
DEV_ONLY = "dev examples only (1 seed)"

# statistic(indices) -> (seeds, resamples) per-seed scores: indices has shape (resamples, n) of dev-example
# positions.
Statistic = Callable[[np.ndarray], np.ndarray]
# scorer(predictions (..., n), references (n,)) -> (...,): a batched task metric.
Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]
Bounds = tuple[float, float] | None  # the values a score can take (None: any)


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds (or a difference or mean of such) with its interval and what it covers."""

    value: float
    low: float
    high: float
    se: float
    df: float  # math.inf when only the dev set contributes
    seed_var: float  # variance of `value` from fine-tuning seeds
    seed_df: float
    dev_var: float  # variance of `value` from the finite dev set
    seeds: int  # seeds per run (the fewest, for a difference or a mean)
    covers: str
    per_seed_var: float = 0.0  # variance of one seed's score (summed over both runs of a difference)
    bounds: Bounds = None  # the metric's range, which [low, high] is cut to

    def as_dict(self) -> dict:
        finite = lambda x: None if math.isinf(x) else x  # noqa: E731 (JSON has no infinity)
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high, "se": self.se,
                "df": finite(self.df), "seed_var": self.seed_var, "seed_df": finite(self.seed_df),
                "dev_var": self.dev_var, "seeds": self.seeds, "covers": self.covers,
                "per_seed_var": self.per_seed_var, "confidence": CONFIDENCE}


def seed_statistic(scorer: Scorer, predictions: np.ndarray, references: np.ndarray) -> Statistic:
    """indices -> (seeds, resamples): each seed's score on those dev examples; predictions is (seeds, n)."""
    return lambda indices: scorer(predictions[:, indices], references[indices])


def dev_variance(per_seed: Sequence[Statistic], num_examples: int, weights: Sequence[float] | None = None,
                 n_resamples: int = N_RESAMPLES, seed: int = SEED) -> float:
    """The dev-set variance of sum_r weights[r] * (run r's seed mean), all runs scoring the same examples.

    Its variance over bootstrap resamples of the examples (scipy.stats.bootstrap, one resample shared
    by every run and seed: the pairing), less each run's seed-by-example part weights[r]^2 * I_r / S_r,
    which the run's seed part already counts (module docstring); never below zero. A run of one seed
    has no seed part, and keeps its I. weights: 1 for one run (the default), (1, -1) for A - B.
    """
    weights = tuple(weights) if weights is not None else (1.0,) * len(per_seed)
    seeds = [np.shape(statistic(np.arange(num_examples)[None]))[0] for statistic in per_seed]

    def rows(indices, axis=-1):
        indices = np.asarray(indices, dtype=np.intp)
        scores = [np.asarray(statistic(indices), dtype=float) for statistic in per_seed]
        means = [run.mean(0) for run in scores]
        combined = sum(w * mean for w, mean in zip(weights, means, strict=True))
        return np.vstack([combined[None], *(mean[None] for mean in means), *scores])

    result = stats.bootstrap((np.arange(num_examples),), rows, n_resamples=n_resamples, vectorized=True,
                             batch=BATCH, method="percentile", rng=np.random.default_rng(seed))
    variances = np.asarray(result.standard_error, dtype=float) ** 2
    runs = len(per_seed)
    total, start = float(variances[0]), 1 + runs
    for r, (count, weight) in enumerate(zip(seeds, weights, strict=True)):
        one_seed = variances[start:start + count]
        start += count
        if count > 1:  # I_r / S_r from one seed's variance (B + I) and the seed mean's (B + I / S)
            interaction = max(0.0, float(one_seed.mean() - variances[1 + r]) / (count - 1))
            total -= weight ** 2 * interaction
    return max(0.0, total)


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """Degrees of freedom of a sum of independent variance estimates, given as (variance, df)."""
    total = sum(v for v, _ in parts)
    denominator = sum(v * v / df for v, df in parts if not math.isinf(df) and v > 0)
    return math.inf if denominator == 0 else total * total / denominator


def quantile(probability: float, df: float) -> float:
    """The normal quantile, or Student's t for finite df."""
    return float(stats.norm.ppf(probability) if math.isinf(df) else stats.t.ppf(probability, df))


def _estimate(value: float, seed_parts: list[tuple[float, float]], dev_var: float, seeds: int,
              covers: str, confidence: float, per_seed_var: float, bounds: Bounds = None) -> Estimate:
    seed_var = sum(v for v, _ in seed_parts)
    seed_df = satterthwaite(seed_parts)
    se = math.sqrt(seed_var + dev_var)
    df = satterthwaite([(seed_var, seed_df), (dev_var, math.inf)])
    half = quantile(0.5 + confidence / 2, df) * se
    low, high = within(value - half, value + half, bounds)
    return Estimate(value, low, high, se, df, seed_var, seed_df, dev_var, seeds, covers, per_seed_var, bounds)


def within(low: float, high: float, bounds: Bounds) -> tuple[float, float]:
    """[low, high] cut to the metric's range (module docstring); as it is without one."""
    if bounds is None:
        return low, high
    return max(low, bounds[0]), min(high, bounds[1])


def mean_bounds(all_bounds: Sequence[Bounds]) -> Bounds:
    """The range of a mean of scores with these ranges (None if one has none)."""
    if not all_bounds or any(b is None for b in all_bounds):
        return None
    return (float(np.mean([b[0] for b in all_bounds])), float(np.mean([b[1] for b in all_bounds])))


def difference_bounds(a: Bounds, b: Bounds) -> Bounds:
    """The range of A - B."""
    return None if a is None or b is None else (a[0] - b[1], a[1] - b[0])


def _seed_part(seed_scores: Sequence[float]) -> tuple[float, float]:
    """(variance of the seed mean, its df); (0, inf) for one seed: no seed part can be measured."""
    scores = np.asarray(seed_scores, dtype=float)
    if len(scores) < 2:
        return 0.0, math.inf
    return float(scores.var(ddof=1) / len(scores)), float(len(scores) - 1)


def _covers(seeds: int) -> str:
    return BOTH if seeds > 1 else DEV_ONLY


def interval(seed_scores: Sequence[float], dev_var: float, confidence: float = CONFIDENCE,
             bounds: Bounds = None) -> Estimate:
    """The seed-mean score with its interval, from per-seed scores and the dev-set variance."""
    seeds = len(seed_scores)
    part = _seed_part(seed_scores)
    return _estimate(float(np.mean(seed_scores)), [part], dev_var, seeds, _covers(seeds), confidence,
                     part[0] * seeds, bounds)


def mean_of(estimates: Sequence[Estimate], confidence: float = CONFIDENCE) -> Estimate:
    """The mean of independent estimates: the GLUE average, each task being fine-tuned on its own."""
    k = len(estimates)
    seeds = min(e.seeds for e in estimates)
    return _estimate(float(np.mean([e.value for e in estimates])),
                     [(e.seed_var / k ** 2, e.seed_df) for e in estimates],
                     sum(e.dev_var for e in estimates) / k ** 2, seeds, _covers(seeds), confidence,
                     sum(e.per_seed_var for e in estimates) / k ** 2,
                     mean_bounds([e.bounds for e in estimates]))


@dataclass(frozen=True)
class Comparison:
    """Run A minus run B: the difference with its interval, a p-value and what could be detected."""

    difference: Estimate
    p_value: float  # two-sided, H0: no difference in expected score
    detectable: float  # the smallest true difference found with POWER probability at this sample size

    def as_dict(self) -> dict:
        return self.difference.as_dict() | {"p_value": self.p_value, "detectable": self.detectable,
                                            "power": POWER}


def paired_difference(scores_a: Sequence[float], scores_b: Sequence[float], dev_var: float,
                      confidence: float = CONFIDENCE, bounds: Bounds = None) -> Estimate:
    """Seed-mean A minus seed-mean B; dev_var is the variance of the difference over shared resamples."""
    seeds = min(len(scores_a), len(scores_b))
    covers = BOTH if seeds > 1 else DEV_ONLY if max(len(scores_a), len(scores_b)) == 1 else \
        "dev examples, and seeds of the run with several"
    value = float(np.mean(scores_a) - np.mean(scores_b))
    parts = [_seed_part(scores_a), _seed_part(scores_b)]
    return _estimate(value, parts, dev_var, seeds, covers, confidence,
                     parts[0][0] * len(scores_a) + parts[1][0] * len(scores_b),
                     difference_bounds(bounds, bounds))


def difference_of(a: Estimate, b: Estimate, dev_var: float, confidence: float = CONFIDENCE) -> Estimate:
    """a - b for estimates built by mean_of (GLUE averages); dev_var: of the paired difference."""
    seeds = min(a.seeds, b.seeds)
    return _estimate(a.value - b.value, [(a.seed_var, a.seed_df), (b.seed_var, b.seed_df)], dev_var, seeds,
                     _covers(seeds), confidence, a.per_seed_var + b.per_seed_var,
                     difference_bounds(a.bounds, b.bounds))


def compare(difference: Estimate, confidence: float = CONFIDENCE, power: float = POWER) -> Comparison:
    """The t test of a difference estimate, and its minimum detectable difference.

    Minimum detectable difference: (q(1 - alpha/2) + q(power)) * se, t quantiles at the estimate's
    df (2.80 * se with normal ones, alpha 0.05, power 0.8): the smallest true difference a two-sided
    test at this level finds with that probability, assuming the seed and dev-set variances measured.
    """
    se, value, df = difference.se, difference.value, difference.df
    if se == 0:  # identical predictions everywhere: nothing varies
        p_value = 1.0 if value == 0 else 0.0
    else:
        tail = stats.norm.sf(abs(value) / se) if math.isinf(df) else stats.t.sf(abs(value) / se, df)
        p_value = float(2 * tail)
    detectable = (quantile(0.5 + confidence / 2, df) + quantile(power, df)) * se
    return Comparison(difference, min(p_value, 1.0), detectable)


def seeds_needed(difference: Estimate, target: float, confidence: float = CONFIDENCE,
                 power: float = POWER, most: int = 100_000) -> int | None:
    """Seeds per run for `target` to be the minimum detectable difference; None if no count will do.

    Assumes both runs get the same number of seeds S, keep the per-seed variances measured here and
    are scored on the same dev set, whose variance no seed count reduces. t quantiles at the
    Satterthwaite df such runs would have (2(S - 1) for the seed part), as `compare` uses. None: the
    dev-set variance alone puts the target out of reach, or it needs more than `most` seeds.
    """
    def detectable(seeds: int) -> float:
        seed_var = difference.per_seed_var / seeds
        df = satterthwaite([(seed_var, 2.0 * (seeds - 1)), (difference.dev_var, math.inf)])
        k = quantile(0.5 + confidence / 2, df) + quantile(power, df)
        return k * math.sqrt(seed_var + difference.dev_var)

    if detectable(most) > target:
        return None
    low, high = 1, most  # detectable falls as seeds grow (smaller se, more df): bisect
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if detectable(middle) <= target else (middle, high)
    return high

"""Intervals and paired comparisons (reports/stats.py) against known answers and simulated coverage."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from reports import stats
from tasks import metrics
from tests.simulation import simulated


def accuracy_estimate(correct, n_resamples, seed):
    references = np.ones(correct.shape[1], dtype=int)
    statistic = stats.seed_statistic(metrics.batched_accuracy, correct, references)
    dev_var = stats.dev_variance([statistic], correct.shape[1], n_resamples=n_resamples, seed=seed)
    return stats.interval(list(correct.mean(1)), dev_var)


def paired(a, b, n_resamples=stats.N_RESAMPLES, seed=stats.SEED, scorer=metrics.batched_accuracy,
           references=None):
    """A - B for (seeds, n) predictions of two runs on the same examples (all-correct references by default)."""
    references = np.ones(a.shape[1], dtype=int) if references is None else references
    per_seed = [stats.seed_statistic(scorer, run, references) for run in (a, b)]
    dev_var = stats.dev_variance(per_seed, a.shape[1], (1, -1), n_resamples=n_resamples, seed=seed)
    return stats.paired_difference(scorer(a, references), scorer(b, references), dev_var)


def test_worked_interval():
    # Seeds 0.6, 0.7, 0.8 and dev-set variance 1e-4: mean 0.7, s^2 = 0.01, seed part 0.01/3;
    # df = (0.01/3 + 1e-4)^2 / ((0.01/3)^2 / 2) = 2 * 1.03^2 = 2.1218; t(0.975, 2.1218) = 4.0744.
    found = stats.interval([0.6, 0.7, 0.8], 1e-4)
    assert found.value == pytest.approx(0.7)
    assert found.seed_var == pytest.approx(0.01 / 3) and found.dev_var == 1e-4
    assert found.se == pytest.approx(math.sqrt(0.01 / 3 + 1e-4))
    assert found.df == pytest.approx(2 * 1.03 ** 2)
    half = scipy_stats.t.ppf(0.975, 2 * 1.03 ** 2) * math.sqrt(0.01 / 3 + 1e-4)
    assert half == pytest.approx(0.23874, abs=1e-5)
    assert (found.low, found.high) == pytest.approx((0.7 - half, 0.7 + half))
    assert found.covers == stats.BOTH and found.per_seed_var == pytest.approx(0.01)


def test_one_seed_covers_the_dev_set_only():
    found = stats.interval([0.5], 0.0004)  # se 0.02, normal quantile 1.95996
    assert found.covers == stats.DEV_ONLY and math.isinf(found.df)
    assert (found.low, found.high) == pytest.approx((0.5 - 1.959964 * 0.02, 0.5 + 1.959964 * 0.02))


def test_dev_variance_of_an_accuracy_is_its_binomial_variance():
    # One seed right on 300 of 400 examples: the bootstrap variance of the accuracy is ~ p(1-p)/n.
    correct = np.zeros((1, 400), dtype=int)
    correct[0, :300] = 1
    statistic = stats.seed_statistic(metrics.batched_accuracy, correct, np.ones(400, dtype=int))
    assert stats.dev_variance([statistic], 400, n_resamples=2000, seed=0) == pytest.approx(0.75 * 0.25 / 400, rel=0.1)
    # Seeded: the same seed gives the same number.
    assert stats.dev_variance([statistic], 400, n_resamples=200, seed=3) == \
        stats.dev_variance([statistic], 400, n_resamples=200, seed=3)


def test_dev_variance_leaves_out_what_the_seed_part_already_counts():
    # For an accuracy the bootstrap variances tend to their plug-in values: a seed's p_s(1 - p_s)/n,
    # the seed mean's var_i(mean_s x_si)/n. The seed-by-example part I/S = (mean_s var_s - var_mean)/(S - 1)
    # comes off; what remains is the examples' shared difficulty, B = var_mean - I/S.
    rng = np.random.default_rng(4)
    n, seeds = 500, 3
    correct = (rng.normal(0, 1, (1, n)) + rng.normal(0, 1, (seeds, n)) > 0).astype(int)
    per_example = correct.mean(0)
    one_seed = (correct.mean(1) * (1 - correct.mean(1))).mean() / n
    seed_mean = per_example.var() / n
    shared = seed_mean - (one_seed - seed_mean) / (seeds - 1)
    assert 0 < shared < seed_mean * 0.8
    statistic = stats.seed_statistic(metrics.batched_accuracy, correct, np.ones(n, dtype=int))
    assert stats.dev_variance([statistic], n, n_resamples=4000, seed=0) == pytest.approx(shared, rel=0.1)
    # Each seed right on other examples, the seed mean the same on every example: nothing is shared.
    alternating = np.array([[i % 2 == s for i in range(n)] for s in range(2)], dtype=int)
    statistic = stats.seed_statistic(metrics.batched_accuracy, alternating, np.ones(n, dtype=int))
    assert stats.dev_variance([statistic], n, n_resamples=200) == 0.0


def test_a_known_difference_is_covered_and_significant():
    # B is A with 40 of each seed's right answers turned wrong: accuracy exactly 0.10 lower on every seed.
    rng = np.random.default_rng(0)
    n = 400
    references = rng.integers(0, 2, n)
    a = np.where(rng.random((4, n)) < 0.8, references, 1 - references)
    b = a.copy()
    for seed in range(4):
        right = np.flatnonzero(a[seed] == references)[:40]
        b[seed, right] = 1 - references[right]
    difference = paired(a, b, references=references)
    found = stats.compare(difference)
    assert difference.value == pytest.approx(0.10)
    assert difference.low < 0.10 < difference.high
    assert found.p_value < 1e-4 and found.detectable < 0.10


def test_identical_runs_give_p_one_and_an_interval_at_zero():
    rng = np.random.default_rng(1)
    references = rng.integers(0, 2, 200)
    predictions = rng.integers(0, 2, (3, 200))
    found = stats.compare(paired(predictions, predictions, scorer=metrics.batched_mcc, references=references))
    assert found.difference.dev_var == 0 and found.p_value == 1.0
    # Same seeds' scores on both sides: the seed part is still there (the runs are not known to be one).
    assert found.difference.value == 0 and found.difference.low == -found.difference.high


def test_two_draws_of_the_same_model_show_no_difference():
    rng = np.random.default_rng(2)
    effects = rng.normal(0, 1, 300)
    a = simulated(rng, 3, 300, 0.2, effects, 0.3)
    b = simulated(rng, 3, 300, 0.2, effects, 0.3)
    found = stats.compare(paired(a, b))
    assert found.p_value > 0.05 and found.difference.low < 0 < found.difference.high


# With three seeds and seed noise dominant, Welch-Satterthwaite's estimated df runs a little short even
# for normal scores: 92.2% coverage where the dev part is an eighth of the seed part (worked by
# simulation of s^2 ~ chi2(2)/2, 200,000 draws; exact 95% only at either extreme). So 0.90 there.
# Release tier (tox -e release), not CI: 300 simulated runs a case, what
# benchmarks/compare_calibration.py measures; the intervals' arithmetic is checked above on worked values.
@pytest.mark.release
@pytest.mark.parametrize(("seeds", "seed_sd", "lowest"), [(1, 0.0, 0.92), (3, 0.3, 0.90), (5, 1.0, 0.92)])
def test_intervals_cover_the_true_score_95_percent_of_the_time(seeds, seed_sd, lowest):
    # 300 simulated runs (fresh dev set and seeds each): seed, example and seed-by-example noise.
    rng = np.random.default_rng(seeds)
    threshold, n = 0.3, 300
    truth = scipy_stats.norm.sf(threshold / math.sqrt(seed_sd ** 2 + 1 + 1))
    hits = 0
    for draw in range(300):
        correct = simulated(rng, seeds, n, seed_sd, rng.normal(0, 1, n), threshold)
        found = accuracy_estimate(correct, 200, draw)
        hits += found.low <= truth <= found.high
    assert lowest <= hits / 300 <= 0.98


# Release tier (tox -e release), not CI: a 300-draw simulation.
@pytest.mark.release
def test_paired_difference_intervals_cover_the_true_difference():
    # A and B share each example's difficulty (the pairing); B's threshold is higher.
    rng = np.random.default_rng(7)
    n, total_sd = 300, math.sqrt(0.3 ** 2 + 1 + 1)
    truth = scipy_stats.norm.sf(0.2 / total_sd) - scipy_stats.norm.sf(0.4 / total_sd)
    hits = 0
    for draw in range(300):
        effects = rng.normal(0, 1, n)
        a, b = simulated(rng, 3, n, 0.3, effects, 0.2), simulated(rng, 3, n, 0.3, effects, 0.4)
        found = paired(a, b, 200, draw)
        hits += found.low <= truth <= found.high
    assert 0.92 <= hits / 300 <= 0.98


# Release tier (tox -e release), not CI: 1,000 simulated comparisons a case.
@pytest.mark.release
@pytest.mark.parametrize("seeds", [3, 5])
def test_comparisons_keep_their_false_positive_rate_and_coverage(seeds):
    """RTE-sized dev sets (277 examples), per-seed scores ~2 points apart: two draws of the same model
    are called different about 5% of the time (nominal 5%), and the interval of a true 4.9-point
    difference covers it about 95% of the time. Fresh examples and seeds in each of 1,000 draws."""
    n, seed_sd, noise_sd, threshold, shift = 277, 0.03, 0.6, 0.3, 0.15
    total_sd = math.sqrt(seed_sd ** 2 + 1 + noise_sd ** 2)
    truth = scipy_stats.norm.sf(threshold / total_sd) - scipy_stats.norm.sf((threshold + shift) / total_sd)
    rng = np.random.default_rng(seeds)
    draws, false_positives, hits, spread = 1000, 0, 0, []
    for draw in range(draws):
        effects = rng.normal(0, 1, n)
        a, b, b_shifted = (simulated(rng, seeds, n, seed_sd, effects, threshold + extra, noise_sd)
                           for extra in (0, 0, shift))
        spread.append(a.mean(1).std(ddof=1))
        false_positives += stats.compare(paired(a, b, 300, draw)).p_value < 0.05
        found = paired(a, b_shifted, 300, draw)
        hits += found.low <= truth <= found.high
    assert 0.015 < np.mean(spread) < 0.03  # the per-seed sd the issue names: ~2 points
    assert 0.03 <= false_positives / draws <= 0.07
    assert 0.92 <= hits / draws <= 0.98


def test_seeds_needed_uses_t_quantiles():
    # Per-seed variance 8e-4 over both runs (2 points each), no dev-set part, a 1-point target: the
    # smallest S with (t(0.975, 2S-2) + t(0.8, 2S-2)) * sqrt(8e-4 / S) <= 0.01. S = 64: 1.9790 + 0.8446
    # = 2.8236, times sqrt(1.25e-5) = 0.009983; S = 63: 2.8241 * 0.010079 = 0.01001 (normal quantiles: 63).
    difference = stats.paired_difference([0.0, 0.02], [0.0, 0.02], 0.0)
    difference = dataclasses.replace(difference, per_seed_var=8e-4)
    assert stats.seeds_needed(difference, 0.01) == 64
    # A dev-set part alone wider than the target: no seed count will do.
    assert stats.seeds_needed(dataclasses.replace(difference, dev_var=(0.01 / 2.7) ** 2), 0.01) is None
    # A reachable target with a dev-set part: more seeds than without it.
    assert stats.seeds_needed(dataclasses.replace(difference, dev_var=1e-6), 0.01) > 64


def test_mean_of_independent_tasks():
    # Two tasks, seed parts 0.01/3 (df 2) and 0.04/3 (df 2), dev parts 1e-4 and 3e-4: the mean's
    # variance is their sum over 4.
    a, b = stats.interval([0.6, 0.7, 0.8], 1e-4), stats.interval([0.2, 0.4, 0.6], 3e-4)
    found = stats.mean_of([a, b])
    assert found.value == pytest.approx(0.55)
    assert found.se ** 2 == pytest.approx((0.01 / 3 + 0.04 / 3 + 4e-4) / 4)
    seed_df = (0.05 / 3) ** 2 / ((0.01 / 3) ** 2 / 2 + (0.04 / 3) ** 2 / 2)
    assert found.seed_df == pytest.approx(seed_df)


def test_seeds_needed_and_the_detectable_difference():
    # Per-seed variances 1e-4 in each run, dev-set variance 1e-5, target 0.01 (one point). Normal
    # quantiles would give 73: k = 2.80158, (0.01 / k)^2 - 1e-5 = 2.7408e-6, 2e-4 / that = 72.97. With t
    # quantiles at the Satterthwaite df: S = 73, df 3113.6, k = 2.80246, k * se = 0.0100028 > 0.01;
    # S = 74, df 3225.1, k = 2.80243, k * se = 0.0099881: 74 seeds.
    difference = stats.paired_difference([0.70, 0.71, 0.72, 0.71], [0.70, 0.70, 0.71, 0.69], 1e-5)
    assert difference.per_seed_var == pytest.approx(np.var([0.70, 0.71, 0.72, 0.71], ddof=1)
                                                    + np.var([0.70, 0.70, 0.71, 0.69], ddof=1))
    worked = stats.Estimate(0.0, 0.0, 0.0, 0.0, math.inf, 0.0, math.inf, 1e-5, 4, stats.BOTH, 2e-4)
    assert stats.seeds_needed(worked, 0.01) == 74
    assert stats.seeds_needed(worked, 0.008) is None  # (0.008/2.8)^2 < 1e-5: no seed count will do
    found = stats.compare(stats.interval([0.5], 0.0001))
    assert found.detectable == pytest.approx((1.959964 + 0.841621) * 0.01, rel=1e-5)


def test_an_interval_is_cut_to_its_metrics_range_and_left_alone_inside_it():
    """Two seeds at 0 and 65% accuracy: mean 32.5%, se = sqrt(0.21125 / 2) = 0.325, t(1 df) = 12.706, so
    value +- t * se is [-380%, 445%]; cut to [0, 1]. Spearman seeds -0.75 and -0.79: se 0.02, half-width
    0.254: [-1.024, -0.516] is cut to [-1, -0.516]. Three seeds well inside [0, 1] keep their interval."""
    wide = stats.interval([0.0, 0.65], 0.0, bounds=(0.0, 1.0))
    assert (wide.value, wide.low, wide.high) == (0.325, 0.0, 1.0)
    assert wide.se == pytest.approx(0.325)
    raw = stats.interval([0.0, 0.65], 0.0)
    assert raw.low == pytest.approx(0.325 - 12.7062 * 0.325, abs=1e-3) and raw.high > 4.4
    spearman = stats.interval([-0.75, -0.79], 0.0, bounds=(-1.0, 1.0))
    assert spearman.low == -1.0 and spearman.high == pytest.approx(-0.77 + 12.7062 * 0.02, abs=1e-4)
    inside, free = (stats.interval([0.80, 0.82, 0.84], 1e-5, bounds=b) for b in ((0.0, 1.0), None))
    assert (inside.low, inside.high) == (free.low, free.high)
    # the t test is not touched: the same se and df, so the same p-value
    assert (wide.se, wide.df) == (raw.se, raw.df)


def test_a_difference_and_a_mean_of_ranged_scores_have_the_ranges_worked_by_hand():
    """A - B of two accuracies lies in [-1, 1]; the mean of an accuracy and an MCC in [-0.5, 1]; an
    accuracy less an MCC in [0 - 1, 1 - (-1)]."""
    difference = stats.paired_difference([0.9, 0.1], [0.1, 0.9], 0.0, bounds=(0.0, 1.0))
    assert difference.value == 0.0 and (difference.low, difference.high) == (-1.0, 1.0)
    accuracy = stats.interval([0.5, 0.6], 0.0, bounds=(0.0, 1.0))
    mcc = stats.interval([0.1, 0.2], 0.0, bounds=(-1.0, 1.0))
    assert stats.mean_of([accuracy, mcc]).bounds == (-0.5, 1.0)
    assert stats.difference_of(accuracy, mcc, 0.0).bounds == (0.0 - 1.0, 1.0 - -1.0)
    assert stats.mean_of([accuracy, stats.interval([0.1, 0.2], 0.0)]).bounds is None


def test_each_metric_has_its_range():
    assert [metrics.metric_range(name) for name in ("accuracy", "mcc", "spearman", "HasAns_exact", "f1_NP",
                                                    "micro_f1", "mse")] == [
        (0.0, 1.0), (-1.0, 1.0), (-1.0, 1.0), (0.0, 1.0), (0.0, 1.0), (0.0, 1.0), None]


def test_the_tables_footer_says_which_interval_it_is():
    """Several seeds: the expected score over seeds; one seed: this seed's, the dev set only (the
    footer once called a one-seed interval "of the seed mean")."""
    from harness.finetuning.table import interval_note

    def note(covers):
        return interval_note({"summary": {"t": {"accuracy": {"mean": 0.5, "ci_covers": covers}}}})

    assert note(stats.BOTH).startswith("95% CI: of the expected score (mean over fine-tuning seeds), "
                                       "covering seeds and dev examples;")
    one = note(stats.DEV_ONLY)
    assert "no seed variance in it" in one and "covering dev examples only (1 seed)" in one
    assert "seed mean" not in one and one.endswith("cut to the metric's range")
    assert interval_note({"summary": {"t": {"accuracy": {"mean": 0.5}}}}) is None

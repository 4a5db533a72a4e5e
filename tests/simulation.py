"""Simulated per-(seed, example) correctness with a known expected accuracy: tests/test_stats.py checks
the intervals against it and benchmarks/compare_calibration.py measures their coverage with it."""

from __future__ import annotations


def simulated(rng, seeds, n, seed_sd, example_effects, threshold, noise_sd=1.0):
    """0/1 correctness per (seed, example): seed effect + example effect + noise above a threshold.

    Its expected accuracy over seeds and examples is P(N(0, total_sd^2) > threshold), known exactly.
    """
    u = rng.normal(0, seed_sd, (seeds, 1))
    return (u + example_effects[None, :] + rng.normal(0, noise_sd, (seeds, n)) > threshold).astype(int)

"""Hyperparameter search (`harness search`): the space, the per-benchmark targets, Optuna studies."""

"""Hyperparameter search (`harness search`): the space, each kind's targets, Optuna studies."""

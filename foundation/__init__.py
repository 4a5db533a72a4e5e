"""The base both features stand on: pre-training (pretrain/) and fine-tuning (tasks/) side by side.

infra/ (errors, atomic files, settings, secrets, confined names), training/ (the kit both training loops
are made of) and models/ (model identity: shapes, presets, checkpoints, the paper's FLOPs). Nothing here
imports pretrain, tasks, reports or harness (tests/test_imports.py).
"""

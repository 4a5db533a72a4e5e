"""The kit both training loops (fine-tuning's tasks/finetune.py, pre-training's pretrain/train.py) are
made of: optimization (ELECTRA's optimiser, its parameter groups and schedule), optimizer_settings (its
settings, declared once for both configs), placement (device,
precision, attention, batch slices), rng (every generator's state saved and restored), stop (SIGTERM and
Ctrl-C end a loop at a step with its state saved), console (the one bar-or-lines progress rule) and quiet
(the libraries' bars off while we load and save).

It imports only foundation/infra/. Fine-tuning imports this kit and infra, never pre-training itself nor
model identity (tests/test_imports.py).
"""

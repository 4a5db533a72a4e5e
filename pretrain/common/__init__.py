"""The foundation every package shares: the lowest layer, importing nothing else of ours.

errors (UserError), models (the model registry and pre-training output layout), flops (the paper's
FLOPs formulas), atomic (the one atomic writer), placement (device, precision and attention rule),
quiet (library bars off while we load and save), console (the one bar-or-lines progress rule),
optimization (the parameter groups, schedule and optimiser of fine-tuning and pre-training alike).

It sits inside pretrain/ because the top level (harness, tasks, pretrain, reports) is the user's
map of the project, and these modules began as pre-training's own; its own folder says they are
everyone's. tests/test_imports.py gives every module under pretrain/common/ the foundation layer by
its location: a module added here is foundation, and may import nothing outside it.
"""

"""Where does a fine-tuning's gradient go? One SST-2 run of `harness run glue`, traced step by step.

For issue 22's open question (why the demo's pre-trained encoder cannot fit SST-2 in 141 steps while
random weights can): every LOG steps it prints the training loss, the spread of the logit margin over
the batch, and the gradient's norm reaching the word embeddings, each encoder layer and the head,
before the clip (the loop clips the batch-summed loss's gradient at 1.0, so only ratios between
models mean anything). The harness's own loop runs unchanged: the script only wraps the
`clip_grad_norm_` it calls and reads the model's outputs through hooks.

Usage: python scripts/finetune_trace.py MODEL_DIR [setting=value ...]
(the demo's subsample of 1,500 training examples, seed 0; data from SHARED_DIR or ../shared)
"""

import os
import sys
import tempfile
from pathlib import Path

import torch

import harness.finetuning.orchestration as orchestration
from harness import cli

LOG = 10
shared = Path(os.environ.get("SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
_finetune, _clip = orchestration.finetune, torch.nn.utils.clip_grad_norm_


def traced(model, task, config, collate, **kwargs):
    """The loop's finetune with its clip wrapped: the clip is where every step's gradients are whole."""
    layers = model.base_model.encoder.layer
    named = dict(model.named_parameters())
    groups = {"embeddings": [p for n, p in named.items() if ".embeddings." in n]}
    groups |= {f"layer {i}": list(layer.parameters()) for i, layer in enumerate(layers)}
    groups["head"] = [p for n, p in named.items() if n.startswith("classifier")]
    seen = {}
    model.register_forward_hook(lambda module, args, output: seen.update(output=output))
    step = 0
    print("step  loss   margin sd  " + "  ".join(f"{name:>10}" for name in groups), flush=True)

    def clip(parameters, max_norm, *args, **kw):
        nonlocal step
        step += 1
        if step == 1 or step % LOG == 0:
            output = seen["output"]
            margin = (output.logits[:, 1] - output.logits[:, 0]).float()
            grads = [[p.grad for p in ps if p.grad is not None] for ps in groups.values()]
            norms = "  ".join(f"{float(torch.nn.utils.get_total_norm(g)):10.2f}" for g in grads)
            print(f"{step:4d}  {float(output.loss):.3f}  {float(margin.std()):9.3f}  {norms}", flush=True)
        return _clip(parameters, max_norm, *args, **kw)

    torch.nn.utils.clip_grad_norm_ = clip
    try:
        return _finetune(model, task, config, collate, **kwargs)
    finally:
        torch.nn.utils.clip_grad_norm_ = _clip


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    orchestration.finetune = traced
    with tempfile.TemporaryDirectory() as scratch:
        sys.exit(cli.main([
            "run", "glue", "--model", sys.argv[1], "--tasks", "sst2", "--seeds", "1",
            "--data-dir", str(shared / "data/glue"), "--output-dir", f"{scratch}/glue",
            "--tracking-uri", f"sqlite:///{scratch}/mlflow.db",
            "max_train_examples=1500", "predict_test=false", "save_models=false", *sys.argv[2:]]))

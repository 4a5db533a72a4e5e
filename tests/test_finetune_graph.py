"""A demo's fine-tunings on the GPU compile once per task, not per seed or arm: each (task, seed, arm)
builds a fresh model and compiles it, and the padding buckets give each a few batch shapes; if they all
counted against dynamo's recompile limit (8 per function), later fine-tunings would fall back to eager.
Rehearsed on the CPU with the GPU's bucketed batches and the aot_eager backend (inductor's own code
generation is the GPU's business; what recompiles is decided before it)."""

from __future__ import annotations

import pytest

from tests.conftest import write_glue_dir


@pytest.mark.slow
def test_seeds_and_arms_reuse_the_tasks_graphs(tiny_model, tmp_path, monkeypatch):
    import torch._dynamo
    import transformers
    from torch._dynamo.utils import counters

    from foundation.training import placement
    from tasks import batching, glue
    from tasks.config import FinetuneConfig
    from tasks.finetune import LoopIO, finetune
    from tasks.glue_data import load_glue
    from tasks.registry import GLUE_TASKS

    compile_ = torch.compile
    monkeypatch.setattr(placement.torch, "compile", lambda module, **how: compile_(module, backend="eager"))
    monkeypatch.setattr(batching, "for_device", lambda collate, max_length, accelerator:
                        batching.bucketed(collate, max_length))  # the GPU's four padding lengths
    data = write_glue_dir(tmp_path / "glue", n_train=40, n_dev=12)  # lengths in more than one bucket
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    torch._dynamo.reset()
    counters.clear()
    graphs = {}
    for name in ("rte", "stsb"):
        task = GLUE_TASKS[name]
        built = glue.build_task(task, load_glue(task, data), tokenizer, max_length=64)
        for seed in (0, 1):  # seed 1 stands for every later seed and for the other arm: a fresh model
            config = FinetuneConfig(precision="fp32", compile="on", batch_size=8, eval_batch_size=16,
                                    max_length=64, num_epochs=1, seed=seed).resolved("small", 1)
            transformers.set_seed(seed)
            model = glue.load_model(str(tiny_model), task, "sdpa")
            with torch._dynamo.config.patch(error_on_recompile=seed > 0):
                finetune(model, built, config, batching.collator(tokenizer), LoopIO(progress=False))
        graphs[name] = counters["stats"]["unique_graphs"] - sum(graphs.values())
    # a task's train and eval graphs (a regression head is another model: its own)
    assert graphs == {"rte": 2, "stsb": 2}

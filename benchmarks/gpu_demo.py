"""The GPU check's demo part: `harness demo` on its GPU plan, or the same plan shrunk to a micro model.

    python benchmarks/gpu_demo.py gpu OUTPUT [DEMO ARGS]    # harness demo --device cuda --tracking-uri none
    python benchmarks/gpu_demo.py micro OUTPUT [DEMO ARGS]  # the same command and stages, micro sizes

`micro` is the CPU rehearsal (benchmarks/gpu_check.sh demo micro, tests/test_gpu_check.py): the GPU
plan's tasks, seeds and settings with a 32-wide model, a few hundred thousand FLOPs of pre-training
and a dozen training examples per task, through the very command the GPU runs. Data come from
SHARED_DIR (data/glue, data/corpus/gutenberg, models/electra-small-discriminator) as for the demo.
"""

from __future__ import annotations

import dataclasses
import sys

from foundation.models.presets import PRESETS, ModelPreset
from foundation.models.shapes import TransformerShape
from harness.cli import main
from harness.experiments import demo

MICRO = ModelPreset("check-micro", "electra", "small",
                    TransformerShape(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                                     embedding_size=16), pretrain_batch_size=8, pretrain_seq_len=32,
                    pretrain_learning_rate=2e-3, max_position_embeddings=64)


def micro_plan(plan: demo.DemoPlan) -> demo.DemoPlan:
    """`plan` with the micro model and sizes; its tasks, seeds and the rest of its settings kept."""
    return dataclasses.replace(
        plan, machine=f"{plan.machine} (micro rehearsal)", preset=MICRO.name, budget_flops=3e8,
        train_examples=12, stage_s=(10.0, 20.0, 20.0, 10.0), measured_on="a guess",
        pretrain_settings=(*plan.pretrain_settings, "precision=fp32", "max_time_s=120"),
        finetune_settings=(*plan.finetune_settings, "num_epochs=1", "batch_size=8", "precision=fp32",
                           "max_length=64"))  # the micro model has 64 positions


def run_demo(plan_name: str, output: str, *extra: str) -> int:
    args = ["demo", "--device", "cuda", "--output", output, "--tracking-uri", "none", *extra]
    if plan_name == "micro":  # the GPU plan's command and stages, on whatever device torch has
        PRESETS[MICRO.name] = MICRO
        demo.GPU = micro_plan(demo.GPU)
    return main(args)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("gpu", "micro"):
        sys.exit(f"usage: {sys.argv[0]} gpu|micro OUTPUT [harness demo arguments]")
    sys.exit(run_demo(*sys.argv[1:]))

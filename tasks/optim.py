"""Fine-tuning's optimiser: the training kit's grouping rule (foundation/training/optimization.py) with
ELECTRA's layer-wise learning-rate decay over the model's own list of layers (tasks/layers.py).

`optimizer="electra"` (the default) is ELECTRA's own Adam without bias correction; "adamw" is torch's
fused AdamW. The schedule is the training kit's `build_schedule` (foundation/training/optimization.py).
"""

from __future__ import annotations

import torch

from foundation.infra.errors import UserError
from foundation.training import optimization
from tasks.layers import encoder_layers


def parameter_groups(model: torch.nn.Module, learning_rate: float, decay: float, weight_decay: float,
                     depth_rule: str = "electra") -> list[dict]:
    """Groups with lr·decay^(head_depth - depth).

    ELECTRA's released code puts the head at depth L+2, one past the top layer's L, so the top
    encoder layer trains at lr·decay² ("electra", the published scores' setting); "corrected" puts
    the head at L+1 so the top layer gets lr·decay.
    """
    num_layers = model.config.num_hidden_layers
    head_depth = num_layers + 2 if depth_rule == "electra" else num_layers + 1
    layers = encoder_layers(model)
    if layers is None and decay != 1.0:
        raise UserError(f"layer-wise learning-rate decay needs the model's list of layers, and "
                        f"{type(model).__name__} has no module list of its {num_layers} layers; pass "
                        "layerwise_lr_decay=1.0 to train every layer at one learning rate")
    depths = optimization.layer_depths(model, layers, head_depth) if layers is not None else {}
    return optimization.parameter_groups(model, weight_decay, lambda name: depths.get(name, head_depth),
                                         lambda depth: decay ** (head_depth - depth), peak=learning_rate)


def build_optimizer(model: torch.nn.Module, learning_rate: float, decay: float, weight_decay: float,
                    epsilon: float, depth_rule: str, algorithm: str = "electra") -> torch.optim.Optimizer:
    """ElectraAdam ("electra", ELECTRA's AdamWeightDecayOptimizer) or fused AdamW ("adamw")."""
    groups = parameter_groups(model, learning_rate, decay, weight_decay, depth_rule)
    # fused: AdamW's update of every parameter in one kernel, faster per step than the default foreach
    # kernels; torch has it on CPU and CUDA alike.
    return optimization.build_optimizer(groups, algorithm, learning_rate, epsilon, fused=True)

"""ELECTRA's GLUE head, trained as the official code does and saved as a standard transformers head.

ELECTRA's `finetune/classification/classification_tasks.py` (`get_prediction_module`): the [CLS]
vector → dropout (keep_prob 0.9) → one dense layer to the labels (`tf.layers.dense`: Glorot-uniform
kernel, zero bias); STS-B learns targets scaled to 0..1, (score − 0) / 5 (`RegressionTask._add_features`).
transformers' ElectraForSequenceClassification head is deeper: dropout → dense(hidden) → GELU →
dropout → out_proj. No transformers class puts ELECTRA's discriminator under a single dense layer, so
the official head trains in place of transformers' one and is then written into it, exactly: since
GELU(z) − GELU(−z) = z, a dense layer with rows +w_k and −w_k followed by out_proj row k = (+1, −1)
computes w_k·x. The saved checkpoint is a plain ElectraForSequenceClassification that predicts what
the trained head predicted (STS-B on the 0..5 scale) and loads, and exports to ONNX, with no code of ours.
"""

from __future__ import annotations

import torch
from transformers import ElectraForSequenceClassification
from transformers.models.electra.modeling_electra import ElectraClassificationHead

from foundation.infra.errors import UserError

DROPOUT = 0.1  # ELECTRA: tf.nn.dropout(reprs, keep_prob=0.9)


class ElectraHead(torch.nn.Module):
    """[CLS] → dropout → linear, with outputs on the target scale (STS-B: score / 5)."""

    def __init__(self, hidden_size: int, num_labels: int):
        super().__init__()
        self.dropout = torch.nn.Dropout(DROPOUT)
        self.out_proj = torch.nn.Linear(hidden_size, num_labels)
        torch.nn.init.xavier_uniform_(self.out_proj.weight)  # tf.layers.dense's default initialiser
        torch.nn.init.zeros_(self.out_proj.bias)

    def forward(self, features: torch.Tensor, **kwargs) -> torch.Tensor:
        return self.out_proj(self.dropout(features[:, 0]))


def use_electra_head(model: torch.nn.Module) -> torch.nn.Module:
    """Put ELECTRA's head in place of transformers' (fresh weights, from the global RNG)."""
    if not isinstance(model, ElectraForSequenceClassification):
        raise UserError(f"head=electra needs an ELECTRA discriminator, not a {type(model).__name__}; "
                        "pass head=hf to keep the model's own classification head")
    model.classifier = ElectraHead(model.config.hidden_size, model.config.num_labels)
    return model


def to_standard_head(model: torch.nn.Module, target_scale: float = 1.0) -> torch.nn.Module:
    """The model with its ElectraHead written into transformers' head, outputs times target_scale.

    A model whose head is already transformers' is returned as it is.
    """
    head = model.classifier
    if not isinstance(head, ElectraHead):
        return model
    weight, bias = head.out_proj.weight.detach(), head.out_proj.bias.detach()  # labels x hidden
    num_labels, hidden_size = weight.shape
    if 2 * num_labels > hidden_size:
        raise ValueError(f"{num_labels} labels need a hidden size of at least {2 * num_labels}")
    standard = ElectraClassificationHead(model.config).to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        standard.dense.weight.zero_()
        standard.dense.bias.zero_()
        standard.out_proj.weight.zero_()
        for k in range(num_labels):
            standard.dense.weight[2 * k] = weight[k]
            standard.dense.weight[2 * k + 1] = -weight[k]
            standard.out_proj.weight[k, 2 * k] = target_scale
            standard.out_proj.weight[k, 2 * k + 1] = -target_scale
        standard.out_proj.bias.copy_(bias * target_scale)
    model.classifier = standard
    return model

"""Layer-wise learning-rate decay and the warmup schedule, pinned."""

import pytest
import torch
import transformers

from tasks.optim import build_optimizer, build_schedule, parameter_groups


@pytest.fixture(scope="module")
def model():
    config = transformers.ElectraConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=32, num_labels=2)
    return transformers.ElectraForSequenceClassification(config)


def lr_of(groups, model, name):
    parameter = dict(model.named_parameters())[name]
    (lr,) = {g["lr"] for g in groups if any(p is parameter for p in g["params"])}
    return lr


def test_electra_depths_give_top_layer_decay_squared(model):
    groups = parameter_groups(model, 1.0, 0.5, 0.01, "electra")
    assert lr_of(groups, model, "classifier.out_proj.weight") == 1.0
    assert lr_of(groups, model, "electra.encoder.layer.1.output.dense.weight") == 0.25
    assert lr_of(groups, model, "electra.encoder.layer.0.output.dense.weight") == 0.125
    assert lr_of(groups, model, "electra.embeddings.word_embeddings.weight") == 0.0625
    assert lr_of(groups, model, "electra.embeddings_project.weight") == 0.0625


def test_corrected_depths_give_top_layer_one_decay(model):
    groups = parameter_groups(model, 1.0, 0.5, 0.01, "corrected")
    assert lr_of(groups, model, "electra.encoder.layer.1.output.dense.weight") == 0.5
    assert lr_of(groups, model, "electra.embeddings.word_embeddings.weight") == 0.125


def test_no_weight_decay_on_bias_and_layernorm(model):
    groups = parameter_groups(model, 1.0, 0.8, 0.01, "electra")
    named = {id(p): n for n, p in model.named_parameters()}
    for group in groups:
        for parameter in group["params"]:
            name = named[id(parameter)]
            expected = 0.0 if ("bias" in name or "LayerNorm" in name) else 0.01
            assert group["weight_decay"] == expected, name
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_warmup_then_linear_decay(model):
    optimizer = build_optimizer(model, 1.0, 1.0, 0.0, 1e-6, "electra")
    schedule = build_schedule(optimizer, num_steps=10, warmup_fraction=0.1)
    seen = []
    for _ in range(10):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    # one warmup step from 0, then (10 - step) / 9
    assert seen == pytest.approx([0.0, 1.0, 8 / 9, 7 / 9, 6 / 9, 5 / 9, 4 / 9, 3 / 9, 2 / 9, 1 / 9])
    assert isinstance(optimizer, torch.optim.AdamW)

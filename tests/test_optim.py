"""Layer-wise learning-rate decay and the warmup schedule, pinned."""

import copy

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


@pytest.mark.parametrize("name, lr, weight_decay", [
    ("classifier.out_proj.weight", 1e-2, 0.1),  # the head: full lr, decayed
    ("electra.encoder.layer.1.output.dense.weight", 2.5e-3, 0.1),  # lr·0.5²
    ("electra.encoder.layer.0.attention.output.LayerNorm.weight", 1.25e-3, 0.0),  # lr·0.5³, no decay
    ("electra.embeddings.word_embeddings.weight", 6.25e-4, 0.1),  # lr·0.5⁴
])
def test_one_step_is_adamw_with_each_groups_lr_decay_and_epsilon(model, name, lr, weight_decay):
    model = copy.deepcopy(model)
    optimizer = build_optimizer(model, 1e-2, 0.5, 0.1, 1e-6, "electra")
    parameter = dict(model.named_parameters())[name]
    before = parameter.detach().clone()
    for p in model.parameters():
        p.grad = torch.full_like(p, 1e-6)  # a gradient the size of epsilon: g / (|g| + eps) = 1/2
    optimizer.step()
    # AdamW's first step: bias-corrected m/sqrt(v) is g/|g|, decay is decoupled: p(1 - lr·wd) - lr·g/(|g| + eps)
    expected = before * (1 - lr * weight_decay) - lr * 0.5
    torch.testing.assert_close(parameter.detach(), expected, rtol=1e-6, atol=1e-8)

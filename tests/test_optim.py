"""Layer-wise learning-rate decay, ELECTRA's optimiser and both schedules, pinned on worked numbers; one
grouping rule and one schedule for fine-tuning and pre-training alike."""

import copy

import pytest
import torch
import transformers

from foundation.training.optimization import ElectraAdam, build_schedule, electra_lr_factor
from pretrain.budget import learning_rate
from pretrain.config import PretrainConfig
from pretrain.prepare import make_optimizer
from tasks.config import FinetuneConfig
from tasks.optim import build_optimizer, parameter_groups


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


def rates(model, optimizer_name, num_steps, warmup_fraction):
    optimizer = build_optimizer(copy.deepcopy(model), 1.0, 1.0, 0.0, 1e-6, "electra", optimizer_name)
    schedule = build_schedule(optimizer, num_steps=num_steps, warmup_fraction=warmup_fraction,
                              shape=optimizer_name)
    seen = []
    for _ in range(num_steps):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return seen


def test_adamw_schedule_is_warmup_then_linear_decay(model):
    # one warmup step from 0, then (10 - step) / 9
    assert rates(model, "adamw", 10, 0.1) == pytest.approx([0.0, 1.0, 8 / 9, 7 / 9, 6 / 9, 5 / 9, 4 / 9, 3 / 9, 2 / 9, 1 / 9])


@pytest.mark.parametrize("name, lr, weight_decay", [
    ("classifier.out_proj.weight", 1e-2, 0.1),  # the head: full lr, decayed
    ("electra.encoder.layer.1.output.dense.weight", 2.5e-3, 0.1),  # lr·0.5²
    ("electra.encoder.layer.0.attention.output.LayerNorm.weight", 1.25e-3, 0.0),  # lr·0.5³, no decay
    ("electra.embeddings.word_embeddings.weight", 6.25e-4, 0.1),  # lr·0.5⁴
])
def test_adamw_one_step_with_each_groups_lr_decay_and_epsilon(model, name, lr, weight_decay):
    model = copy.deepcopy(model)
    optimizer = build_optimizer(model, 1e-2, 0.5, 0.1, 1e-6, "electra", "adamw")
    parameter = dict(model.named_parameters())[name]
    before = parameter.detach().clone()
    for p in model.parameters():
        p.grad = torch.full_like(p, 1e-6)  # a gradient the size of epsilon: g / (|g| + eps) = 1/2
    optimizer.step()
    # AdamW's first step: bias-corrected m/sqrt(v) is g/|g|, decay is decoupled: p(1 - lr·wd) - lr·g/(|g| + eps)
    expected = before * (1 - lr * weight_decay) - lr * 0.5
    torch.testing.assert_close(parameter.detach(), expected, rtol=1e-6, atol=1e-8)


def test_electra_schedule_multiplies_warmup_into_decay(model):
    # model/optimization.py: lr·(1 - step/T)·min(1, step/W), W = T·warmup (not rounded): T=10, W=2.5
    assert rates(model, "electra", 10, 0.25) == pytest.approx(
        [0.0, 0.9 * 0.4, 0.8 * 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1])
    # without warmup the decay alone; the peak itself is never reached once warmup is on
    assert electra_lr_factor(0, 10, 0) == 1.0 and electra_lr_factor(12, 10, 2) == 0.0


def test_electra_adam_two_worked_steps():
    # AdamWeightDecayOptimizer by hand: p = 1, lr 0.1, weight decay 0.01, eps 1e-6, gradients 0.5 then -1.
    # step 1: m = 0.05, v = 0.00025, sqrt(v) = 0.0158114; update = 0.05/0.0158124 + 0.01·1 = 3.172078
    #         p = 1 - 0.1·3.172078 = 0.6827922   (torch's AdamW, bias-corrected, would give 0.899)
    # step 2: m = 0.9·0.05 - 0.1 = -0.055, v = 0.999·0.00025 + 0.001 = 0.00124975, sqrt(v) = 0.0353518
    #         update = -0.055/0.0353528 + 0.01·0.6827922 = -1.548919; p = 0.6827922 + 0.1548919 = 0.8376841
    decayed = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    plain = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    optimizer = ElectraAdam([{"params": [decayed], "weight_decay": 0.01}, {"params": [plain]}], lr=0.1)
    seen = []
    for gradient in (0.5, -1.0):
        decayed.grad = torch.tensor([gradient], dtype=torch.float64)
        plain.grad = torch.tensor([gradient], dtype=torch.float64)
        optimizer.step()
        seen.append((decayed.item(), plain.item()))
    # without decay: 1 - 0.3162078 = 0.6837922, then + 0.1·1.5557465 = 0.8393669
    assert seen == [pytest.approx((0.6827922, 0.6837922), abs=1e-7),
                    pytest.approx((0.8376841, 0.8393669), abs=1e-7)]
    state = optimizer.state[decayed]
    assert state["exp_avg"].item() == pytest.approx(-0.055)
    assert state["exp_avg_sq"].item() == pytest.approx(0.00124975)


def test_electra_adams_rate_step_rounds_as_the_official_code():
    # model/optimization.py:132-133 rounds twice in float32: update_with_lr = learning_rate * update, then
    # param - update_with_lr. torch's add_(update, alpha=-lr) rounds once (a fused multiply-add on this
    # CPU), which moves about 1 element in 1,200 by one ulp. From the optimiser's own moments, the official
    # float32 sequence (:119, :132-133) must give its weights bit for bit.
    torch.manual_seed(0)
    param = torch.nn.Parameter(torch.randn(100_000))
    start, grad = param.detach().clone(), torch.randn(100_000)
    lr = torch.tensor(3e-4).item()  # a float32 value, as the official learning rate tensor
    optimizer = ElectraAdam([param], lr=lr)
    param.grad = grad.clone()
    optimizer.step()
    state = optimizer.state[param]
    update = state["exp_avg"] / (state["exp_avg_sq"].sqrt() + 1e-6)
    official = start - lr * update
    assert torch.equal(param.detach(), official)
    fused = start.clone().add_(update, alpha=-lr)  # the form before one pass of foreach kernels
    assert not torch.equal(fused, official)  # so the check above can tell the two roundings apart


def _first_step(model, algorithm: str) -> list[float]:
    """How far one step with all-ones gradients moves each parameter (lr 1e-3, no decays)."""
    model = copy.deepcopy(model)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = build_optimizer(model, 1e-3, 1.0, 0.0, 1e-6, "electra", algorithm)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    optimizer.step()
    return [(old - p.detach()).abs().max().item() for old, p in zip(before, model.parameters(), strict=True)]


def test_the_recipe_default_takes_electras_uncorrected_first_step(model):
    # Without bias correction the first update is lr * 0.1 / sqrt(0.001) = 3.16 lr; AdamW's is lr.
    electra, adamw = _first_step(model, FinetuneConfig().optimizer), _first_step(model, "adamw")
    assert electra == pytest.approx([3.1623e-3] * len(electra), rel=1e-3)
    assert adamw == pytest.approx([1e-3] * len(adamw), rel=1e-3)


def test_electra_adam_resumed_from_its_state_dict_steps_as_if_never_stopped(model):
    straight, resumed = copy.deepcopy(model), copy.deepcopy(model)

    def step(net, optimizer, scale):
        for p in net.parameters():
            p.grad = torch.full_like(p, scale)
        optimizer.step()

    optimizer = build_optimizer(straight, 1e-3, 0.8, 0.01, 1e-6, "electra")
    step(straight, optimizer, 1.0)
    step(straight, optimizer, -2.0)
    first = build_optimizer(resumed, 1e-3, 0.8, 0.01, 1e-6, "electra")
    step(resumed, first, 1.0)
    again = build_optimizer(resumed, 1e-3, 0.8, 0.01, 1e-6, "electra")  # a new process, after a resume
    again.load_state_dict(first.state_dict())
    step(resumed, again, -2.0)
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _fine_tunings_adam(model, compiled: bool) -> ElectraAdam:
    """ElectraAdam over fine-tuning's layer-wise groups (each its own rate), compiled or not."""
    return ElectraAdam(parameter_groups(model, 1e-2, 0.8, 0.01, "electra"), eps=1e-6, compiled=compiled)


def _train_steps(model, optimizer, schedule, steps: range) -> None:
    """Steps of a classifier on batches (and dropout) drawn from the step's number, the schedule moving the
    rates."""
    for step in steps:
        torch.manual_seed(step)
        generator = torch.Generator().manual_seed(step)
        loss = model(input_ids=torch.randint(0, 50, (4, 10), generator=generator),
                     labels=torch.randint(0, 2, (4,), generator=generator)).loss
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()


@pytest.mark.slow  # an Inductor compilation: 6.3 s alone with -n 2
def test_electra_adams_compiled_update_takes_the_eager_steps_and_compiles_once(model, monkeypatch):
    """Compiled (aot_eager: the graph dynamo captures, run op by op), the update gives the eager update's
    bits while the schedule changes every group's rate every step, in one graph that never recompiles:
    the rates are tensors on the device, not constants of the graph. The groups' `lr` stay floats, and a
    compiled optimiser resumed from an eager one's state dict goes on as the eager one does."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **how: compile_(fn, fullgraph=True, backend="aot_eager"))
    twins = {}
    torch._dynamo.reset()
    counters.clear()
    for compiled in (False, True):
        net = twins[compiled] = copy.deepcopy(model)
        optimizer = _fine_tunings_adam(net, compiled)
        schedule = build_schedule(optimizer, num_steps=8, warmup_fraction=0.3)
        _train_steps(net, optimizer, schedule, range(1))
        with torch._dynamo.config.patch(error_on_recompile=True):
            _train_steps(net, optimizer, schedule, range(1, 4))
        assert all(type(group["lr"]) is float for group in optimizer.param_groups)
        if not compiled:
            eager_state = (copy.deepcopy(net), copy.deepcopy(optimizer.state_dict()),
                           copy.deepcopy(schedule.state_dict()))
    assert counters["stats"]["unique_graphs"] == 1
    assert len(optimizer.param_groups) > 4  # layer-wise rates: each its own tensor
    copied = copy.deepcopy(optimizer)  # torch's Optimizer pickles its defaults, groups and state only
    assert copied.compiled and copied.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()
    for a, b in zip(twins[False].parameters(), twins[True].parameters(), strict=True):
        assert torch.equal(a, b)
    # resumed: an eager run's state, continued compiled, beside the eager run continued
    resumed = eager_state[0]
    optimizer = _fine_tunings_adam(resumed, compiled=True)
    optimizer.load_state_dict(copy.deepcopy(eager_state[1]))  # loading keeps the tensors it is given
    assert optimizer.compiled  # torch's load_state_dict goes through __setstate__
    schedule = build_schedule(optimizer, num_steps=8, warmup_fraction=0.3)
    schedule.load_state_dict(eager_state[2])
    _train_steps(resumed, optimizer, schedule, range(4, 6))
    straight = twins[False]
    eager = _fine_tunings_adam(straight, compiled=False)
    eager.load_state_dict(copy.deepcopy(eager_state[1]))
    schedule = build_schedule(eager, num_steps=8, warmup_fraction=0.3)
    schedule.load_state_dict(eager_state[2])
    _train_steps(straight, eager, schedule, range(4, 6))
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)


def _inductor_against_eager(model, steps) -> None:
    """`steps` of `model` (a classifier) with ElectraAdam over fine-tuning's layer-wise groups, eager and
    compiled by Inductor (its fused kernels, what a GPU runs; here its C++ ones) in one graph: the same
    weights within float rounding (reordered arithmetic, not another formula)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    twins = {}
    for compiled in (False, True):
        net = twins[compiled] = copy.deepcopy(model)
        optimizer = _fine_tunings_adam(net, compiled)
        _train_steps(net, optimizer, build_schedule(optimizer, num_steps=steps, warmup_fraction=0.3),
                     range(steps))
    moved = max(float((a - b).abs().max()) for a, b in zip(model.parameters(), twins[False].parameters(), strict=True))
    assert moved > 1e-3  # the steps did move the weights
    assert counters["stats"]["unique_graphs"] == 1  # the compiled update did run compiled
    for a, b in zip(twins[False].parameters(), twins[True].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.slow  # Inductor's C++ compiles: ~6 s with its cache warm, ~20 s cold
def test_electra_adams_update_compiled_by_inductor_matches_eager_on_a_one_layer_model():
    """CI's Inductor check, its compile small: one layer, still one rate per depth (head, layer,
    embeddings), decayed and undecayed groups, a schedule moving the rates; 1e-6 allowed."""
    config = transformers.ElectraConfig(vocab_size=50, embedding_size=4, hidden_size=8, num_hidden_layers=1,
                                        num_attention_heads=1, intermediate_size=8, num_labels=2)
    net = transformers.ElectraForSequenceClassification(config)
    assert len(_fine_tunings_adam(net, compiled=False).param_groups) >= 4  # head, layer, embeddings
    _inductor_against_eager(net, steps=3)


# Release tier (tox -e release), not CI: Inductor against eager over the whole two-layer fine-tuning
# groups (~7 s warm, ~23 s cold); the one-layer test above checks the same update in CI.
@pytest.mark.release
def test_electra_adams_update_compiled_by_inductor_matches_eager(model):
    """The fine-tuning classifier's every group: 1.2e-7 measured, 1e-6 allowed."""
    _inductor_against_eager(model, steps=5)


def _optimizer_ops(groups: int) -> int:
    """Device operations (aten calls) of one ElectraAdam step over 24 parameters split into `groups`."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Ops.count += 1
            return func(*args, **(kwargs or {}))

    params = [torch.nn.Parameter(torch.ones(4)) for _ in range(24)]
    size = len(params) // groups
    optimizer = ElectraAdam([{"params": params[i:i + size], "lr": 0.1 / (1 + i), "weight_decay": 0.01 * (i % 2)}
                             for i in range(0, len(params), size)])
    for p in params:
        p.grad = torch.ones(4)
    optimizer.step()  # the first creates the moments
    with Ops():
        optimizer.step()
    return Ops.count


def test_electra_adam_updates_all_groups_in_one_pass_of_foreach_kernels():
    """Fine-tuning's ~28 layer-wise groups cost what one group does: a GPU step is bound by launches.
    (Looping over groups, as it did, took 206 operations for 24 groups.)"""
    assert _optimizer_ops(24) <= _optimizer_ops(1) + 1 <= 12  # + 1: a second weight decay value


def _families():
    """Tiny classifiers of three families, each naming its norms its own way."""
    return {"electra": transformers.ElectraConfig(vocab_size=20, embedding_size=8, hidden_size=8, num_hidden_layers=2,
                                                  num_attention_heads=2, intermediate_size=16),
            "distilbert": transformers.DistilBertConfig(vocab_size=20, dim=8, n_layers=2, n_heads=2, hidden_dim=16),
            "modernbert": transformers.ModernBertConfig(
                vocab_size=20, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16,
                pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)}


def _decayed(groups, model) -> dict[str, float]:
    named = {id(p): n for n, p in model.named_parameters()}
    return {named[id(p)]: group["weight_decay"] for group in groups for p in group["params"]}


@pytest.mark.parametrize("family", ["electra", "distilbert", "modernbert"])
def test_both_loops_spare_the_same_parameters_weight_decay(family):
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_config(_families()[family])
    finetuning = _decayed(parameter_groups(model, 1e-3, 1.0, 0.01), model)
    pretraining = make_optimizer(model, PretrainConfig(learning_rate=1e-3, weight_decay=0.01), torch.device("cpu"))
    assert _decayed(pretraining.param_groups, model) == finetuning
    spared = {name for name, decay in finetuning.items() if decay == 0.0}
    # biases and every norm: ELECTRA's "LayerNorm", DistilBERT's "sa_layer_norm", ModernBERT's "mlp_norm"
    assert spared == {name for name, _ in model.named_parameters()
                      if name.endswith("bias") or "norm" in name.lower()}
    assert any("norm" in name.lower() for name in spared)
    assert set(finetuning.values()) == {0.0, 0.01}


def _pretraining_model() -> torch.nn.Module:
    """Pre-training's names: the discriminator's layers and head, its embeddings, the generator."""
    def part(**children):
        return torch.nn.ModuleDict(children)

    return part(discriminator=part(electra=part(embeddings=torch.nn.Embedding(3, 2), encoder=torch.nn.Linear(2, 2)),
                                   discriminator_predictions=torch.nn.Linear(2, 1)),
                generator=part(generator_predictions=part(LayerNorm=torch.nn.LayerNorm(2),
                                                          dense=torch.nn.Linear(2, 2))))


def test_pretrainings_groups_keep_the_order_its_checkpoints_hold():
    # A saved optimiser state pairs groups by position: decaying first, the discriminator's layers first.
    model = _pretraining_model()
    p = dict(model.named_parameters())
    config = PretrainConfig(learning_rate=1e-3, weight_decay=0.01, disc_layers_lr_scale=0.5)
    groups = make_optimizer(model, config, torch.device("cpu")).param_groups
    assert [(g["weight_decay"], g["lr_scale"], g["params"]) for g in groups] == [
        (0.01, 0.5, [p["discriminator.electra.encoder.weight"], p["discriminator.discriminator_predictions.weight"]]),
        (0.01, 1.0, [p["discriminator.electra.embeddings.weight"], p["generator.generator_predictions.dense.weight"]]),
        (0.0, 0.5, [p["discriminator.electra.encoder.bias"], p["discriminator.discriminator_predictions.bias"]]),
        (0.0, 1.0, [p["generator.generator_predictions.LayerNorm.weight"],
                    p["generator.generator_predictions.LayerNorm.bias"], p["generator.generator_predictions.dense.bias"]])]
    one_rate = make_optimizer(model, PretrainConfig(learning_rate=1e-3), torch.device("cpu")).param_groups
    assert [(g["weight_decay"], g["lr_scale"], len(g["params"])) for g in one_rate] == [(0.01, 1.0, 4), (0.0, 1.0, 5)]


@pytest.mark.parametrize("num_steps, warmup_fraction", [(10, 0.1), (7, 0.3), (1, 0.5), (5, 0.0), (4, 1.0), (0, 0.1)])
def test_adamw_schedule_is_transformers_to_the_bit(num_steps, warmup_fraction):
    def rates(make_schedule):
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=3e-4)
        schedule = make_schedule(optimizer)
        seen = []
        for _ in range(num_steps + 2):
            seen.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
        return seen

    ours = rates(lambda optimizer: build_schedule(optimizer, num_steps, warmup_fraction, "adamw"))
    assert ours == rates(lambda optimizer: transformers.get_linear_schedule_with_warmup(
        optimizer, round(num_steps * warmup_fraction), num_steps))


@pytest.mark.parametrize("optimizer_name, by_hand", [
    ("electra", [0.0, 0.9 * 0.5, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]),  # (1 - s/10)·min(1, s/2)
    ("adamw", [0.0, 0.5, 1.0, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8, 0.0]),  # s/2, then (10 - s)/8
])
def test_one_schedule_over_fine_tunings_steps_and_pre_trainings_budget(model, optimizer_name, by_hand):
    # ten steps, warmup 0.2: fine-tuning's rate at step s is pre-training's at fraction s/10
    finetuning = rates(model, optimizer_name, 10, 0.2) + [0.0]
    config = PretrainConfig(learning_rate=1.0, warmup_fraction=0.2, optimizer=optimizer_name)
    pretraining = [learning_rate(config, step / 10) for step in range(11)]
    assert finetuning == pytest.approx(by_hand) and pretraining == pytest.approx(by_hand)


def test_electra_adam_on_a_cpu_updates_piece_by_piece_to_the_same_bits(monkeypatch):
    """On a CPU the update runs over pieces of at most CPU_PIECE elements (a large weight in slices,
    small ones together), so that its ten passes find their piece in cache: the same operations on each
    element, so the same bits as one pass over the whole model. Here pieces of 50 elements, against
    weights of 1 to 130 elements, decaying and not, one of them not contiguous (it goes whole)."""
    from foundation.training import optimization

    torch.manual_seed(0)
    shapes = [(130,), (7, 9), (1,), (50,), (3, 17), (20,), (64,)]
    start = [torch.randn(shape, dtype=torch.float32) for shape in shapes]
    start.append(torch.randn(9, 11).t())  # a transposed view: not contiguous
    grads = [[torch.randn_like(p) for p in start] for _ in range(3)]

    def three_steps(piece: int) -> list[torch.Tensor]:
        monkeypatch.setattr(optimization, "CPU_PIECE", piece)
        params = [torch.nn.Parameter(p.clone()) if p.is_contiguous() else
                  torch.nn.Parameter(p.t().clone().t()) for p in start]
        optimizer = ElectraAdam([{"params": params[:4], "lr": 0.1, "weight_decay": 0.01},
                                 {"params": params[4:6], "lr": 0.03},
                                 {"params": params[6:], "lr": 0.05, "weight_decay": 0.02}])
        for step in grads:
            for p, g in zip(params, step, strict=True):
                p.grad = g.clone() if p.is_contiguous() else g.t().clone().t()
            optimizer.step()
        moments = [optimizer.state[p][key] for p in params for key in ("exp_avg", "exp_avg_sq")]
        return [p.detach() for p in params] + moments

    whole, pieces = three_steps(10 ** 9), three_steps(50)
    assert not pieces[7].is_contiguous()  # the transposed weight stayed as it was, and went whole
    assert all(torch.equal(a, b) for a, b in zip(whole, pieces, strict=True))
    assert not torch.equal(whole[0], start[0])  # the steps moved the weights


def test_pieces_cut_large_weights_and_gather_small_ones():
    from foundation.training.optimization import _pieces

    sizes = [130, 10, 20, 45]
    tensors = [torch.zeros(n) for n in sizes]
    bucket = {"params": tensors, "grads": tensors, "means": tensors, "squares": tensors,
              "rates": [0.1, 0.2, 0.3, 0.4], "decays": {0.01: [1]}}
    pieces = list(_pieces(bucket, 50))
    # 130 -> 50, 50, 30; the 30 takes the 10 and fills up with nothing more (30 + 10 + 20 > 50);
    # then 20 (+ 45 > 50), then 45
    assert [[p.numel() for p in piece["params"]] for piece in pieces] == [[50], [50], [30, 10], [20], [45]]
    assert [piece["rates"] for piece in pieces] == [[0.1], [0.1], [0.1, 0.2], [0.3], [0.4]]
    assert [piece["decays"] for piece in pieces] == [{}, {}, {0.01: [1]}, {}, {}]

"""The one loop on a tiny random ELECTRA: it learns, and the same seed gives the same result."""

import dataclasses

import numpy as np
import pytest
import torch
import transformers

from tasks import batching, glue
from tasks.config import FinetuneConfig
from tasks.glue_data import load_glue
from tasks.registry import GLUE_TASKS
from tests.conftest import finetune_glue as _train
from tests.conftest import write_glue_dir


@pytest.mark.slow
def test_loss_falls_and_outputs_cover_every_split(tiny_model, tmp_path):
    # A random 0.02-std ELECTRA sits at ln 2 for a few epochs before it breaks through; 64 examples
    # and 10 epochs at 2e-3 get well past that (the words decide the label, so it is learnable).
    data = write_glue_dir(tmp_path / "glue", n_train=64, n_dev=16)
    result, _, built = _train(tiny_model, data, "rte", learning_rate=2e-3, num_epochs=10, batch_size=8,
                              layerwise_lr_decay=1.0)
    losses = [row["train_loss"] for row in result.history]
    assert len(losses) == 10 and losses[-1] < 0.6 * losses[0]
    assert result.metrics["validation"]["accuracy"] >= 0.75
    assert result.num_train_steps == 10 * 8  # 64 examples, batch 8
    assert result.train_examples_seen == 10 * 64
    assert set(result.outputs) == {"validation", "test"}
    assert len(result.outputs["test"]) == 6 and result.outputs["validation"][0].shape == (2,)
    assert set(result.metrics["validation"]) == {"accuracy", "score"}
    assert [row["epoch"] for row in result.history] == list(range(1, 11))


def test_examples_seen_counts_a_fractional_last_epoch(tiny_model, glue_data):
    # 1.5 epochs of the fixture's training set in batches of 4: whole steps of the half epoch.
    result, _, built = _train(tiny_model, glue_data, "rte", num_epochs=1.5)
    steps_per_epoch = -(-len(built.train) // 4)
    assert result.num_train_steps == -(-steps_per_epoch * 3 // 2)
    full, rest = divmod(result.num_train_steps, steps_per_epoch)
    assert result.train_examples_seen == full * len(built.train) + 4 * rest


@pytest.mark.slow
def test_regression_task_trains(tiny_model, glue_data):
    result, _, built = _train(tiny_model, glue_data, "stsb", learning_rate=2e-3, num_epochs=4)
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert set(result.metrics["validation"]) == {"pearson", "spearman", "score"}
    assert len(built.label_strings(result.outputs["test"])) == 6
    # The server's file clips scores to STS-B's 0..5: outputs past either end, as a model can give.
    raw = [np.array([value / built.target_scale], dtype=np.float32) for value in (-0.75, 2.5, 6.25)]
    assert built.label_strings(raw) == ["0.000", "2.500", "5.000"]


def test_same_seed_same_result_other_seed_differs(tiny_model, glue_data):
    first, model_a, _ = _train(tiny_model, glue_data, "rte", seed=3, num_epochs=1)
    again, model_b, _ = _train(tiny_model, glue_data, "rte", seed=3, num_epochs=1)
    other, model_c, _ = _train(tiny_model, glue_data, "rte", seed=4, num_epochs=1)
    assert first.history == again.history
    np.testing.assert_array_equal(np.stack(first.outputs["test"]), np.stack(again.outputs["test"]))
    weights = [m.classifier.out_proj.weight for m in (model_a, model_b, model_c)]
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])


def test_eval_outputs_keep_dataset_order(tiny_model, glue_data):
    # batches are sorted by length for speed; outputs must come back in the file's order
    result, model, built = _train(tiny_model, glue_data, "rte", num_epochs=1)
    single = dataclasses.replace(FinetuneConfig(precision="fp32"), eval_batch_size=1)
    from contextlib import nullcontext

    from tasks.finetune import predict

    one_by_one = predict(model, built, {"test": built.evals["test"]}, single,
                         batching.collator(transformers.AutoTokenizer.from_pretrained(tiny_model)), nullcontext())
    np.testing.assert_allclose(np.stack(one_by_one["test"]), np.stack(result.outputs["test"]), atol=1e-5)
    assert len(set(batching.lengths(built.evals["test"]))) > 1  # the order really was shuffled


def test_nan_loss_stops_with_advice(tiny_model, glue_data):
    with pytest.raises(FloatingPointError, match="lower learning_rate"):
        _train(tiny_model, glue_data, "rte", learning_rate=1e30, num_epochs=1)


def test_buckets_pad_to_a_few_lengths(tiny_model):
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    for max_length, expected in ((128, {32, 64, 96, 128}), (100, {24, 48, 72, 96, 100}), (6, {6})):
        collate = batching.bucketed(batching.collator(tokenizer), max_length)
        lengths = {collate([{"input_ids": [1] * n}])["input_ids"].shape[1] for n in range(1, max_length + 1)}
        assert lengths == expected


# Release tier (tox -e release), not CI: Inductor compiles of the fine-tuning step over two
# epochs of padding buckets; a GPU runs this comparison in tests/test_cuda.py.
@pytest.mark.release
def test_compiled_and_eager_fine_tuning_agree(tiny_model, glue_data):
    """The same seed gives the same losses and outputs with torch.compile (inductor on the CPU), up to
    fp32 rounding: compiled kernels sum in another order."""
    eager, _, _ = _train(tiny_model, glue_data, "rte", num_epochs=2, learning_rate=2e-3, compile="off")
    compiled, _, _ = _train(tiny_model, glue_data, "rte", num_epochs=2, learning_rate=2e-3, compile="on")
    losses = [[row["train_loss"] for row in result.history] for result in (eager, compiled)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)
    np.testing.assert_allclose(np.stack(compiled.outputs["test"]), np.stack(eager.outputs["test"]), atol=1e-4)
    # dropout drew eager's numbers through the compilation's own option, which left the process's alone
    assert torch._inductor.config.fallback_random is False


def test_worker_loader_gives_the_same_batches_in_the_same_order(tiny_model, glue_data):
    """The GPU loader (two workers, pinned memory where there is an accelerator) changes no batch."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    built = glue.build_task(GLUE_TASKS["rte"], load_glue(GLUE_TASKS["rte"], glue_data), tokenizer, max_length=32)
    plain, workers = (list(batching.train_loader(built.train, 4, 7, True, batching.collator(tokenizer),
                                                 accelerator=flag)) for flag in (False, True))
    assert len(plain) == len(workers) > 1
    for a, b in zip(plain, workers, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _check_both_orders(built, train, tokenizer):
    n = len(train)
    assert built.double_unordered and len(built.train) == 2 * n
    for i in range(n):
        a, b = train[i]["text_a"], train[i]["text_b"]
        assert built.train[i]["input_ids"] == tokenizer(a, b, truncation=True, max_length=32)["input_ids"]
        assert built.train[n + i]["input_ids"] == tokenizer(b, a, truncation=True, max_length=32)["input_ids"]
        assert built.train[n + i]["labels"] == built.train[i]["labels"] == train[i]["label"]


def test_stsb_trains_on_both_orders(tiny_model, glue_data):
    task = GLUE_TASKS["stsb"]
    assert task.double_unordered and FinetuneConfig().double_unordered  # ELECTRA's defaults
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    splits = load_glue(task, glue_data)
    built = glue.build_task(task, splits, tokenizer, max_length=32, double_unordered=True)
    _check_both_orders(built, splits["train"], tokenizer)
    # dev is scored in its own order, once, as in ELECTRA (double_unordered applies to split == "train")
    assert len(built.evals["validation"]) == len(splits["validation"])
    single = glue.build_task(task, splits, tokenizer, max_length=32, max_train_examples=5, double_unordered=False)
    assert not single.double_unordered and len(single.train) == 5


def test_mrpc_trains_on_both_orders_of_each_kept_example(tiny_model, shared):
    task = GLUE_TASKS["mrpc"]
    assert task.double_unordered
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    splits = load_glue(task, shared / "data" / "glue")
    built = glue.build_task(task, splits, tokenizer, max_length=32, max_train_examples=6, double_unordered=True)
    _check_both_orders(built, splits["train"].shuffle(seed=0).select(range(6)), tokenizer)


def test_ordered_pairs_stay_single_whatever_the_setting(tiny_model, glue_data):
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    task = GLUE_TASKS["rte"]
    assert not task.double_unordered
    splits = load_glue(task, glue_data)
    built = glue.build_task(task, splits, tokenizer, max_length=32, double_unordered=True)
    assert not built.double_unordered and len(built.train) == len(splits["train"])


def test_the_recipe_clips_the_batch_sums_gradient_as_the_official_code(tiny_model, glue_data, monkeypatch):
    """run_finetuning.py minimises the batch-summed loss and clips its gradient at norm 1: the clip sees
    batch_size times the mean's gradient (here 4x, and so clips where the mean's would not)."""
    norms = {}
    clip = torch.nn.utils.clip_grad_norm_

    def recorded(parameters, max_norm, *args, **kwargs):
        total = clip(parameters, max_norm, *args, **kwargs)
        norms.setdefault(reduction, float(total))  # the first step's norm, before clipping
        return total

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recorded)
    for reduction in ("mean", "sum"):
        _train(tiny_model, glue_data, "rte", num_epochs=1, batch_size=4, loss_reduction=reduction)
    assert FinetuneConfig().loss_reduction == "sum"
    assert norms["sum"] == pytest.approx(4 * norms["mean"], rel=1e-5)
    assert norms["mean"] < 1.0 < norms["sum"]


def test_reinit_layers_draws_the_top_layers_afresh_and_nothing_else(tiny_model, glue_data):
    """Zhang et al.'s remedy: before the first step the top layer is the initialiser's (std 0.02, zero
    biases), the layer below keeps the checkpoint's weights."""
    from tasks.finetune import reinit_top_layers

    transformers.set_seed(0)
    model = glue.load_model(str(tiny_model), GLUE_TASKS["rte"], attn_implementation="eager")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.electra.encoder.layer[1].output.dense.bias.fill_(5.0)
    reinit_top_layers(model, 1)
    after = model.state_dict()
    changed = {k.split(".")[3] for k in before if "encoder.layer" in k and not torch.equal(before[k], after[k])}
    assert changed == {"1"}
    assert float(model.electra.encoder.layer[1].output.dense.bias.abs().max()) == 0.0
    assert model.electra.encoder.layer[1].intermediate.dense.weight.std().item() == pytest.approx(0.02, rel=0.2)
    assert all(torch.equal(before[k], after[k]) for k in before if "encoder.layer" not in k)
    from foundation.infra.errors import UserError
    with pytest.raises(UserError, match="reinit_layers=3 but the model has 2 layers"):
        reinit_top_layers(model, 3)
    result, _, _ = _train(tiny_model, glue_data, "rte", num_epochs=1, reinit_layers=2)
    assert np.isfinite(result.history[0]["train_loss"])


def test_glue_benchmark_keeps_nothing_and_builds_from_a_plan_alone(tiny_model, glue_data, tmp_path):
    from harness.finetuning import model_setup
    from harness.finetuning.glue_finetuning import GlueFinetuning, GlueInvocation

    invocation = GlueInvocation(model=str(tiny_model), tasks=(GLUE_TASKS["rte"], GLUE_TASKS["stsb"]),
                                output_dir=tmp_path / "out", config=FinetuneConfig(max_length=32),
                                data_dir=str(glue_data))
    setup = model_setup.load(str(tiny_model), "fp32")
    preparer = GlueFinetuning(invocation)
    kept = dict(vars(preparer))
    plan = preparer.prepare(setup)
    assert vars(preparer) == kept  # prepare stored nothing: everything it read is in the plan
    assert plan.tasks == ("rte", "stsb") and set(plan.data) == {"rte", "stsb"}
    assert plan.configs["stsb"].max_length == 32 and plan.configs["stsb"].num_epochs == 10  # STS-B's epochs
    # A benchmark that never prepared builds the same features from the plan alone.
    built = GlueFinetuning(invocation).build(plan, "rte", setup)
    again = preparer.build(plan, "rte", setup)
    assert built.train["input_ids"] == again.train["input_ids"] and len(built.train) == 16
    assert max(len(ids) for ids in built.train["input_ids"]) <= 32
    assert set(built.evals) == {"validation", "test"}  # predict_test's default: the test split too

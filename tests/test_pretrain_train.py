"""The training loop end to end on a 2-layer, 32-wide ELECTRA and a few hundred made-up sentences:
losses fall, outputs load with plain transformers, resumption is exact, budgets stop the run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from foundation.infra.errors import UserError
from foundation.models import pretrain_meta
from foundation.models.presets import PRESETS
from foundation.models.pretrain_meta import PretrainMeta
from pretrain.budget import BudgetCounters, budget_fraction, learning_rate
from pretrain.config import PretrainConfig, config_differences, resolve
from pretrain.train import pretrain
from tests.conftest import MICRO
from tests.pretrain_helpers import Killed, final_weights, killed_at, micro_config, micro_setup


def test_learning_rate_schedule_pinned():
    config = resolve(PretrainConfig(preset="electra-small", max_steps=1000, warmup_fraction=0.1,
                                    optimizer="adamw"))
    rates = [learning_rate(config, f) for f in (0.0, 0.05, 0.1, 0.55, 1.0)]
    assert rates == pytest.approx([0.0, 2.5e-4, 5e-4, 2.5e-4, 0.0])


def test_electra_schedule_multiplies_warmup_into_decay():
    config = resolve(PretrainConfig(preset="electra-small", max_steps=1000, warmup_fraction=0.1))
    assert config.optimizer == "electra"
    rates = [learning_rate(config, f) for f in (0.0, 0.05, 0.1, 0.55, 1.0)]
    # 5e-4·(1 - f)·min(1, f/0.1): the peak is never reached (0.9·5e-4 at the end of warmup)
    assert rates == pytest.approx([0.0, 5e-4 * 0.95 * 0.5, 5e-4 * 0.9, 5e-4 * 0.45, 0.0])


def test_runs_saved_before_the_optimizer_setting_resume_as_adamw():
    saved = dataclasses.asdict(resolve(PretrainConfig(optimizer="adamw")))
    del saved["optimizer"]
    assert config_differences(saved, resolve(PretrainConfig(optimizer="adamw"))) == []
    assert config_differences(saved, resolve(PretrainConfig())) == ["optimizer: 'adamw' -> 'electra'"]
    del saved["disc_layers_lr_scale"]  # added later still: runs before it used one rate for everything
    assert config_differences(saved, resolve(PretrainConfig(optimizer="adamw"))) == []
    assert config_differences(saved, resolve(PretrainConfig(optimizer="adamw", disc_layers_lr_scale=0.5))) == \
        ["disc_layers_lr_scale: 1.0 -> 0.5"]


def test_a_corpus_named_by_another_path_to_it_is_the_same_setting(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    saved = dataclasses.asdict(resolve(PretrainConfig(corpus=(str(tmp_path / "data"),))))
    monkeypatch.chdir(tmp_path)
    assert config_differences(saved, resolve(PretrainConfig(corpus=("data",)))) == []
    assert config_differences(saved, resolve(PretrainConfig(corpus=("other",)))) != []


def test_the_first_budget_reached_stops():
    config = PretrainConfig(max_steps=100, max_tokens=1000, max_time_s=60.0, max_flops=1e12)
    assert budget_fraction(config, BudgetCounters(step=10, tokens=500, elapsed_s=6, flops=2e11)) == 0.5
    later = BudgetCounters(step=10, tokens=100, elapsed_s=6, flops=3e11)
    assert budget_fraction(config, later) == pytest.approx(0.3)


# ELECTRA's optimiser takes larger early steps (no bias correction): at the micro preset's 2e-3 its
# generator gets good so fast that the detector falls back to "original" everywhere (replaced-token
# accuracy 0.12 -> 0.02 in 120 steps); at ELECTRA's own Small rate, 5e-4, both learn.
@pytest.mark.slow
@pytest.mark.parametrize("optimizer, learning_rate", [("electra", 5e-4), ("adamw", 2e-3)])
def test_tiny_model_losses_fall(tmp_path, micro, corpus, optimizer, learning_rate):
    logged = []
    meta = pretrain(micro_config(tmp_path, corpus, max_steps=120, log_every_steps=20, warmup_fraction=0.05,
                                 optimizer=optimizer, learning_rate=learning_rate),
                    on_log=lambda step, metrics: logged.append(metrics))
    first, last = logged[0], logged[-1]
    assert last["generator_loss"] < first["generator_loss"] - 1.0
    assert last["discriminator_loss"] < first["discriminator_loss"]
    assert last["disc_accuracy_replaced"] > first["disc_accuracy_replaced"] + 0.1
    assert meta["steps"] == 120 and meta["metrics"]["generator_loss"] == last["generator_loss"]
    # The detector on the fixed unigram corruption is logged beside disc_auc and kept in the meta.
    assert all(0.0 <= m["disc_auc_unigram"] <= 1.0 for m in logged)
    assert meta["metrics"]["disc_auc_unigram"] == last["disc_auc_unigram"]
    # So is the collapse probe: the mean cosine between a sequence's positions in the last layer.
    assert all(-1.0 <= m["position_cosine"] <= 1.0 for m in logged)
    assert meta["metrics"]["position_cosine"] == last["position_cosine"]


def test_position_cosine_worked_values():
    """Sequence 1: real positions (1, 0), (0, 1), padding; pairs (self included) give (1 + 0 + 0 + 1)/4
    = 0.5. Sequence 2: (2, 0), (3, 0), (-1, 0): of the 9 ordered pairs, 5 have cosine +1 and the 4 that
    pair the last with another -1, so (5 - 4)/9 = 1/9. Mean (0.5 + 1/9)/2 = 0.30556; padding is never read."""
    from pretrain.probe import position_cosine

    hidden = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [7.0, 7.0]], [[2.0, 0.0], [3.0, 0.0], [-1.0, 0.0]]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert position_cosine(hidden, mask) == pytest.approx((0.5 + 1 / 9) / 2)


def test_output_loads_with_plain_transformers(tmp_path, micro, corpus):
    from transformers import (
        AutoTokenizer,
        ElectraForMaskedLM,
        ElectraForPreTraining,
        ElectraForSequenceClassification,
    )

    config = micro_config(tmp_path, corpus, max_steps=4)
    meta = pretrain(config)
    out = Path(config.output_dir)
    discriminator = ElectraForPreTraining.from_pretrained(out / "discriminator")
    classifier = ElectraForSequenceClassification.from_pretrained(out / "discriminator", num_labels=3)
    generator = ElectraForMaskedLM.from_pretrained(out / "generator")
    tokenizer = AutoTokenizer.from_pretrained(out / "discriminator")
    state = torch.load(out / "checkpoints" / "step-4" / "training_state.pt", weights_only=True)["model"]
    for name, tensor in discriminator.state_dict().items():
        assert torch.equal(tensor, state[f"discriminator.{name}"]), name
    assert torch.equal(classifier.electra.encoder.layer[1].output.dense.weight,
                       discriminator.electra.encoder.layer[1].output.dense.weight)
    assert torch.equal(generator.electra.embeddings.word_embeddings.weight,  # shared embeddings
                       discriminator.electra.embeddings.word_embeddings.weight)
    inputs = tokenizer("the cat sees the river.", return_tensors="pt")
    assert discriminator(**inputs).logits.shape == inputs["input_ids"].shape
    saved = pretrain_meta.read(out / "pretrain_meta.json")
    assert saved == json.loads(json.dumps(meta))
    assert sorted(saved) == sorted(set(PretrainMeta.__annotations__) - {"seed"})  # the schema, every key
    assert saved["objective"] == "electra" and saved["steps"] == 4
    assert saved["generator_shape"]["hidden_size"] == 8 and saved["discriminator_shape"]["hidden_size"] == 32
    assert saved["train_flops"] > 0 and saved["tokens_seen"] > 0


def test_disc_layers_lr_scale_holds_the_discriminators_layers_and_trains_the_rest(tmp_path, micro, corpus):
    config = micro_config(tmp_path, corpus, max_steps=4, optimizer="adamw", disc_layers_lr_scale=0.0,
                          checkpoint_every_steps=1, keep_checkpoints=4)
    pretrain(config)
    out = Path(config.output_dir) / "checkpoints"
    first, last = (torch.load(out / f"step-{step}" / "training_state.pt", weights_only=True)["model"]
                   for step in (1, 4))
    layers = [name for name in first if name.startswith(("discriminator.electra.encoder.",
                                                         "discriminator.discriminator_predictions."))]
    rest = [name for name in first if name not in layers]
    assert layers and all(torch.equal(first[name], last[name]) for name in layers)
    moved = {name for name in rest if not torch.equal(first[name], last[name])}
    assert "discriminator.electra.embeddings.word_embeddings.weight" in moved  # shared: the generator's
    assert any(name.startswith("generator.electra.encoder.") for name in moved)


@pytest.mark.parametrize("prior", [None, 0.15])
def test_disc_bias_prior_starts_the_detector_at_that_replaced_rate(micro, prior):
    """Before any step, an untrained detector says "replaced" with probability near the prior (0.5
    without one: the paper's zero bias)."""
    setup = micro_setup(disc_bias_prior=prior)
    ids = torch.randint(10, 60, (8, 32))
    with torch.no_grad():
        logits = setup.model.discriminator(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert torch.sigmoid(logits).mean().item() == pytest.approx(prior or 0.5, abs=0.02)


@pytest.mark.parametrize("settings, message", [({"disc_layers_lr_scale": 1.5}, "between 0 and 1"),
                                               ({"disc_layers_lr_scale": 0.5, "objective": "mlm"}, "has none"),
                                               ({"disc_bias_prior": 1.0}, "strictly between 0 and 1"),
                                               ({"disc_bias_prior": 0.15, "objective": "mlm"}, "leave it unset"),
                                               ({"disc_bias_prior": 0.15, "objective": "electra-15"},
                                                "leave it unset")])
def test_the_discriminator_levers_are_checked(tmp_path, micro, corpus, settings, message):
    with pytest.raises(ValueError, match=message):
        micro_config(tmp_path, corpus, **settings)


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["electra", "two-stage"])
def test_resume_after_a_kill_matches_an_uninterrupted_run(tmp_path, micro, corpus, objective):
    settings = {"max_steps": 12, "checkpoint_every_steps": 5, "objective": objective}
    whole = micro_config(tmp_path, corpus, "whole", **settings)
    pretrain(whole)

    broken = micro_config(tmp_path, corpus, "broken", log_every_steps=1, **settings)
    with pytest.raises(Killed):  # after the step-5 checkpoint: steps 6 and 7 are lost and redone
        pretrain(broken, on_log=killed_at(7))
    resumed_meta = pretrain(broken)
    expected, got = final_weights(Path(whole.output_dir)), final_weights(Path(broken.output_dir))
    assert expected.keys() == got.keys()
    assert [k for k in expected if not torch.equal(expected[k], got[k])] == []
    whole_meta = json.loads((Path(whole.output_dir) / "pretrain_meta.json").read_text())
    assert resumed_meta["tokens_seen"] == whole_meta["tokens_seen"]
    assert resumed_meta["train_flops"] == whole_meta["train_flops"]


def test_wall_time_adds_up_over_a_kill_and_its_resume(tmp_path, micro, corpus, monkeypatch):
    """A clock ticking 1 s per read (one read per step): the resumed run adds its 7 s to the 5 s saved
    with the step-5 checkpoint; the killed attempt at steps 6 and 7 is redone and counted once."""
    import types

    from pretrain import train as loop

    ticks = iter(range(10_000))
    monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=lambda: float(next(ticks))))

    config = micro_config(tmp_path, corpus, max_steps=12, checkpoint_every_steps=5, log_every_steps=1)
    with pytest.raises(Killed):
        pretrain(config, on_log=killed_at(7))
    saved = json.loads((Path(config.output_dir) / "checkpoints" / "step-5" / "pretrain_meta.json").read_text())
    assert saved["wall_time_s"] == 5.0
    assert pretrain(config)["wall_time_s"] == 5.0 + 7.0


def slow_clock(monkeypatch, reads):
    """Replaces the loop's clock with one returning `reads` in turn (then the last one for ever)."""
    import types

    from pretrain import train as loop

    values = iter(reads)
    last = [0.0]

    def perf_counter() -> float:
        last[0] = float(next(values, last[0]))
        return last[0]

    monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=perf_counter))


def test_a_time_stop_beside_a_step_budget_does_not_change_the_model(tmp_path, micro, corpus, monkeypatch):
    """A busy machine: the first step takes 60% of max_time_s, so the clock's share of its budget runs
    ahead of the steps'. The schedule follows the steps, so the model is the one an unloaded run gives."""
    unloaded = micro_config(tmp_path, corpus, "unloaded", max_steps=8, warmup_fraction=0.25)
    pretrain(unloaded)
    slow_clock(monkeypatch, [0.0, 60.0])  # loop start, then every later read: 60 s of 100
    loaded = micro_config(tmp_path, corpus, "loaded", max_steps=8, warmup_fraction=0.25, max_time_s=100.0)
    meta = pretrain(loaded)
    expected, got = final_weights(Path(unloaded.output_dir)), final_weights(Path(loaded.output_dir))
    assert [k for k in expected if not torch.equal(expected[k], got[k])] == []
    assert meta["steps"] == 8 and meta["stopped_by"] == "max_steps" and meta["schedule_completed"] == 1.0


def test_a_time_stop_that_cuts_the_budget_short_is_said_and_recorded(tmp_path, micro, corpus, monkeypatch):
    from harness.pretraining.orchestration import time_stop_note

    slow_clock(monkeypatch, range(10_000))  # 1 s per step
    config = micro_config(tmp_path, corpus, max_steps=10, max_time_s=4.0, log_every_steps=1)
    logged = []
    meta = pretrain(config, on_log=lambda step, metrics: logged.append(metrics["learning_rate"]))
    assert meta["steps"] == 4 and meta["stopped_by"] == "max_time_s"
    assert meta["schedule_completed"] == pytest.approx(0.4)
    # the steps' schedule (ELECTRA's 2e-3 · (1 - done/10), warmup 1%), not the clock's (done/4)
    assert logged == pytest.approx([0.0, 2e-3 * 0.9, 2e-3 * 0.8, 2e-3 * 0.7])
    saved = json.loads((Path(config.output_dir) / "pretrain_meta.json").read_text())
    assert (saved["stopped_by"], saved["schedule_completed"]) == ("max_time_s", pytest.approx(0.4))
    assert time_stop_note(saved, config.output_dir) == (
        f"note: max_time_s=4 stopped {config.output_dir} at step 4, 40% of the way through its budget: its "
        "learning rate had not decayed to 0 and it is not the model that budget gives (pretrain_meta.json: "
        "stopped_by, schedule_completed); run it again with a larger max_time_s to finish it")
    whole = pretrain(micro_config(tmp_path, corpus, "whole", max_steps=3))
    assert whole["stopped_by"] == "max_steps" and time_stop_note(whole, "whole") is None


def test_resume_refuses_other_settings_and_foreign_directories(tmp_path, micro, corpus):
    pretrain(micro_config(tmp_path, corpus, max_steps=2))
    with pytest.raises(UserError, match=r"learning_rate: 0.002 -> 0.001"):
        pretrain(micro_config(tmp_path, corpus, max_steps=2, learning_rate=1e-3))
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="no pre-training checkpoint"):
        pretrain(micro_config(tmp_path, corpus, "foreign", max_steps=2))


@pytest.mark.slow
def test_resume_never_unpickles_code(tmp_path, micro, corpus):
    """training_state.pt loads with weights_only=True; an old (numpy-holding) or hostile one is refused."""
    import os

    import numpy as np

    config = micro_config(tmp_path, corpus, max_steps=4, checkpoint_every_steps=2, log_every_steps=1)
    with pytest.raises(Killed):
        pretrain(config, on_log=killed_at(3))
    path = Path(config.output_dir) / "checkpoints" / "step-2" / "training_state.pt"
    state = torch.load(path, weights_only=True)
    assert state["format"] == 2 and len(state["rng"][0]["numpy"]["state"]["key"]) == 624

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {tmp_path / 'ran'}",)

    message = (f"{str(path)!r} is in an old checkpoint format (or not ours): reading it would need full "
               "unpickling, which can run code, so it is not resumed; finish that run with the harness "
               "version that wrote it, or start a new --output")
    old = state | {"rng": [{**state["rng"][0], "numpy": np.random.get_state()}]}  # format 1 kept an ndarray
    old.pop("format")
    for written in (old, state | {"payload": Payload()}):
        torch.save(written, path)
        with pytest.raises(UserError) as caught:
            pretrain(config)
        assert str(caught.value) == message
    assert not (tmp_path / "ran").exists()


def test_a_finished_run_resumed_changes_nothing(tmp_path, micro, corpus):
    config = micro_config(tmp_path, corpus, max_steps=3)
    first = pretrain(config)
    again = pretrain(config)
    assert again["steps"] == 3 and again["metrics"] == first["metrics"]


def test_a_finished_run_continues_to_a_raised_budget(tmp_path, micro, corpus):
    config = micro_config(tmp_path, corpus, max_steps=4, log_every_steps=1)
    first = pretrain(config)
    logged = []
    more = pretrain(dataclasses.replace(config, max_steps=8),
                    on_log=lambda step, metrics: logged.append((step, metrics["learning_rate"])))
    # Steps 1-4 are not redone; the rate, decayed to 0 at step 4, follows the schedule over 8 steps
    # (2e-3 · (1 - step/8), warmup long past) from there.
    assert [step for step, _ in logged] == [5, 6, 7, 8]
    assert [rate for _, rate in logged] == pytest.approx([2e-3 * (1 - done / 8) for done in (4, 5, 6, 7)])
    assert first["extended"] == [] and more["steps"] == 8 and more["tokens_seen"] > first["tokens_seen"]
    assert more["extended"] == [{"at_step": 4, "from": {"max_steps": 4}, "to": {"max_steps": 8},
                                 "learning_rate_before": 0.0, "learning_rate_after": pytest.approx(1e-3)}]
    assert more["config"]["max_steps"] == 8 and more["wall_time_s"] > first["wall_time_s"]
    assert json.loads((Path(config.output_dir) / "pretrain_meta.json").read_text()) == json.loads(json.dumps(more))
    with pytest.raises(UserError) as caught:
        pretrain(dataclasses.replace(config, max_steps=6))
    assert str(caught.value) == (f"{config.output_dir!r} holds a run at step 8, where max_steps=6 is already "
                                 "spent; raise it to continue that run, or choose a new --output")
    again = pretrain(dataclasses.replace(config, max_steps=9))
    assert again["steps"] == 9 and [e["at_step"] for e in again["extended"]] == [4, 8]


def test_a_two_stage_run_cannot_move_its_switch_behind_it(tmp_path):
    from pretrain.checkpoint import budget_change

    saved = resolve(PretrainConfig(objective="two-stage", max_steps=10, output_dir=str(tmp_path / "out")))
    folder = tmp_path / "out" / "checkpoints" / "step-10"
    pretrain_meta.write(folder / "pretrain_meta.json", PretrainMeta(
        config=dataclasses.asdict(saved), steps=10, tokens_seen=100, train_flops=1.0, wall_time_s=5.0, stage=2))
    with pytest.raises(UserError) as caught:
        budget_change(folder, dataclasses.replace(saved, max_steps=40))  # would switch at step 20
    assert str(caught.value) == (
        f"{str(tmp_path / 'out')!r} holds a two-stage run past its switch to the discriminator (step 10); the "
        "new budget would put the switch (two_stage_switch=0.5 of it) after that step; choose a smaller "
        "budget or a new --output")
    change = budget_change(folder, dataclasses.replace(saved, max_steps=16))  # switch at step 8: passed
    # stage 2 is (10/16 - 0.5) / 0.5 = 1/4 done: ELECTRA's factor (1 - 1/4) · min(1, 0.25/0.01)
    assert change["learning_rate_after"] == pytest.approx(saved.learning_rate * 0.75)
    assert change["learning_rate_before"] == 0.0


def test_flops_budget_counts_the_paper_convention(tmp_path, micro, corpus):
    from foundation.models.flops import train_step_flops
    from foundation.models.shapes import generator_shape, shape_of

    shape = shape_of(PRESETS[MICRO.name])
    meta = pretrain(micro_config(tmp_path, corpus, max_steps=None, max_flops=1e9))
    vocab = meta["discriminator_shape"]["vocab_size"]
    disc = type(shape)(**{**vars(shape), "vocab_size": vocab})
    per_step = train_step_flops(disc, generator_shape(disc, 0.25), 8, 32)
    assert meta["steps"] == int(1e9 // per_step) + 1  # stops at the first step reaching the budget
    assert meta["train_flops"] == pytest.approx(meta["steps"] * per_step)  # all batches are full width


@pytest.mark.parametrize("objective,sharing", [("mlm", None), ("electra-15", None), ("replace-mlm", None),
                                               ("all-tokens-mlm", None), ("electra", "gdes"),
                                               ("electra", "tied")])
def test_every_objective_and_sharing_writes_loadable_models(tmp_path, micro, corpus, objective, sharing):
    from transformers import ElectraForMaskedLM, ElectraForSequenceClassification

    config = micro_config(tmp_path, corpus, objective=objective, embedding_sharing=sharing, max_steps=2)
    meta = pretrain(config)
    out = Path(config.output_dir)
    ElectraForSequenceClassification.from_pretrained(out / "discriminator", num_labels=2)
    generator = ElectraForMaskedLM.from_pretrained(out / "generator")
    expected_width = 32 if objective == "mlm" or sharing == "tied" else 8
    assert generator.config.hidden_size == expected_width
    assert meta["objective"] == objective


def test_default_vocabulary_is_the_shared_bert_vocab(tmp_path, micro, corpus, shared):
    meta = pretrain(micro_config(tmp_path, corpus, tokenizer=None, max_steps=1))
    assert meta["discriminator_shape"]["vocab_size"] == 30522


# Release tier (tox -e release), not CI: two Inductor compiles of the whole pre-training step.
# CI keeps Inductor's check of ELECTRA's Adam (test_optim.py) and the compiled step's graphs
# (test_pretrain_graph.py, aot_eager); a GPU runs this comparison in tests/test_cuda.py.
@pytest.mark.release
def test_compiled_and_eager_steps_agree(tmp_path, micro, corpus):
    """The same seed gives the same losses with torch.compile (inductor on the CPU) as without."""
    runs = {"off": [], "on": []}
    for setting, logged in runs.items():
        meta = pretrain(micro_config(tmp_path, corpus, name=setting, compile=setting, max_steps=6,
                                     log_every_steps=2), on_log=lambda step, metrics, into=logged: into.append(metrics))
        assert meta["compiled"] == (setting == "on")
    for key in ("loss", "generator_loss", "discriminator_loss", "disc_auc", "replaced_fraction"):
        assert [m[key] for m in runs["on"]] == pytest.approx([m[key] for m in runs["off"]], rel=1e-4), key


def test_large_masks_a_quarter_of_tokens_as_electras_large():
    # configure_pretraining.py, the Large settings: mask_prob = 0.25; the rest keep 0.15
    assert resolve(PretrainConfig(preset="electra-large")).mask_prob == 0.25
    assert resolve(PretrainConfig(preset="electra-small")).mask_prob == 0.15
    assert resolve(PretrainConfig(preset="electra-large", mask_prob=0.15)).mask_prob == 0.15


def test_the_unigram_probe_scores_replaced_tokens_and_leaves_the_rng_alone(micro):
    """A detector that sees exactly which tokens changed scores AUC 1 on the probe's corruption, its
    opposite 0; the probe draws from its own generator, so the run's random numbers do not move."""
    from types import SimpleNamespace

    from pretrain import probe

    setup = micro_setup()
    ids = torch.randint(10, 60, (8, 32))
    ids[:, 0], ids[:, -1] = 2, 3
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}

    class Changed(torch.nn.Module):  # hidden state: 1 where the token differs from the batch's
        def forward(self, input_ids, attention_mask, token_type_ids):
            return SimpleNamespace(last_hidden_state=(input_ids != ids).float()[..., None])

    class Head(torch.nn.Module):
        def __init__(self, sign):
            super().__init__()
            self.sign = sign

        def forward(self, hidden):
            return self.sign * (2 * hidden[..., 0] - 1)

    def detector(sign):
        setup.model.discriminator.electra = Changed()
        setup.model.discriminator.discriminator_predictions = Head(sign)

    rng = torch.get_rng_state()
    detector(1.0)
    assert probe.unigram_auc(setup, batch) == 1.0
    detector(-1.0)
    assert probe.unigram_auc(setup, batch) == 0.0
    assert torch.equal(torch.get_rng_state(), rng)
    setup.config = dataclasses.replace(setup.config, objective="mlm")
    assert probe.unigram_auc(setup, batch) is None  # no detector head to probe

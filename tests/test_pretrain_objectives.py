"""The objective's mechanics: masking rates, Gumbel sampling, labels, losses, gradient isolation,
and embedding sharing, on a 2-layer, 32-wide ELECTRA built in memory."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from foundation.models.shapes import TransformerShape, generator_shape
from pretrain import objectives as obj
from pretrain.networks import GDESEmbeddings, build_networks, discriminator_state, network_config
from pretrain.objective_model import MAIN_MLM, PretrainingModel

PAD, UNK, CLS, SEP, MASK = range(5)
VOCAB = 60
SETTINGS = obj.MaskingSettings(mask_id=MASK, special_ids=(CLS, SEP, PAD, MASK), vocab_size=VOCAB,  # the paper's rates
                               mask_prob=0.15, mask_token_fraction=0.85, random_token_fraction=0.0)


def random_batch(batch_size=8, length=24, seed=0):
    """[CLS] words [SEP] words [SEP] [PAD]... with varied lengths."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB, (batch_size, length), generator=g)
    attention_mask = torch.zeros_like(input_ids)
    token_type_ids = torch.zeros_like(input_ids)
    for row in range(batch_size):
        n = int(torch.randint(8, length + 1, (1,), generator=g))
        input_ids[row, 0], input_ids[row, n // 2], input_ids[row, n - 1] = CLS, SEP, SEP
        input_ids[row, n:] = PAD
        attention_mask[row, :n] = 1
        token_type_ids[row, n // 2 + 1:n] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def test_official_slot_count_and_candidates_over_many_draws():
    batch = random_batch(batch_size=64, length=128)
    candidates = batch["attention_mask"].bool() & (batch["input_ids"] > MASK)
    real = batch["attention_mask"].sum(1)
    assert obj.max_predictions(0.15, 128) == 19  # int((0.15 + 0.005) * 128), the official value
    g = torch.Generator().manual_seed(1)
    drawn = torch.zeros(64, 128)
    for _ in range(50):
        positions, weights = obj.choose_masked(batch["input_ids"], batch["attention_mask"], SETTINGS, g)
        assert positions.shape == weights.shape == (64, 19)  # fixed shapes whatever the lengths
        used = weights.bool()
        assert candidates.gather(1, positions)[used].all()  # never [CLS], [SEP] or padding
        assert (positions[~used] == 0).all()
        assert torch.equal(weights.sum(1), torch.round(real * 0.15).clamp(1, 19).float())
        drawn += obj.scatter_any(used, positions, 128)
    # k uniform draws with replacement from c candidates hit a given one with p = 1 - (1 - 1/c)^k
    # (the official sampling: ~7% fewer distinct positions than k at length 128)
    k, c = torch.round(real * 0.15).clamp(1, 19), candidates.sum(1)
    expected = (1 - (1 - 1 / c) ** k)[:, None].expand(-1, 128)[candidates]
    assert abs(float(drawn[candidates].mean() / 50 - expected.mean())) < 0.003


def test_slot_count_worked_values():
    input_ids = torch.full((4, 24), 9)
    input_ids[:, 0] = CLS
    attention_mask = torch.zeros_like(input_ids)
    for row, n in enumerate((24, 20, 3, 2)):
        attention_mask[row, :n] = 1
        input_ids[row, n - 1] = SEP
    # 24 real tokens: round(3.6) = 4, at most int(0.155 * 24) = 3 slots; 20: 3; 3: round(0.45) -> at
    # least 1; [CLS] [SEP] only: nothing to mask
    positions, weights = obj.choose_masked(input_ids, attention_mask, SETTINGS)
    assert weights.sum(1).tolist() == [3, 3, 1, 0]


def test_mask_85_15_split_over_many_draws():
    batch = random_batch(batch_size=64, length=128)
    positions = torch.arange(1, 7).repeat(64, 1)  # distinct, always real words
    weights = torch.ones(64, 6)
    g = torch.Generator().manual_seed(1)
    shown_as_mask = unchanged = 0
    for _ in range(50):
        new_ids = obj.apply_mask(batch["input_ids"], positions, weights, SETTINGS, g)
        assert torch.equal(new_ids[:, 7:], batch["input_ids"][:, 7:])
        shown = new_ids[:, 1:7]
        shown_as_mask += int((shown == MASK).sum())
        unchanged += int((shown == batch["input_ids"][:, 1:7]).sum())
    # 19,200 slots: the standard error of the share is ~0.003, so 0.01 is a loose bound.
    assert abs(shown_as_mask / 19200 - 0.85) < 0.01
    assert shown_as_mask + unchanged == 19200  # no random tokens by default (the paper's code)


def test_unused_slots_mask_nothing():
    input_ids = torch.tensor([[CLS, 10, 11, 12, SEP]])
    positions, weights = torch.tensor([[2, 0, 0]]), torch.tensor([[1.0, 0.0, 0.0]])
    settings = dataclasses.replace(SETTINGS, mask_token_fraction=1.0)
    assert obj.apply_mask(input_ids, positions, weights, settings).tolist() == [[CLS, 10, MASK, 12, SEP]]


def test_bert_style_random_tokens_when_asked():
    settings = dataclasses.replace(SETTINGS, mask_token_fraction=0.8, random_token_fraction=0.1)
    batch = random_batch(batch_size=64, length=128)
    positions, weights = torch.arange(1, 7).repeat(64, 1), torch.ones(64, 6)
    new_ids = obj.apply_mask(batch["input_ids"], positions, weights, settings, torch.Generator().manual_seed(2))
    original = batch["input_ids"][:, 1:7]
    shown = new_ids[:, 1:7]
    assert abs((shown == MASK).float().mean() - 0.8) < 0.04
    assert abs(((shown != MASK) & (shown != original)).float().mean() - 0.1 * (1 - 1 / VOCAB)) < 0.03


def test_samples_follow_the_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -float("inf")]]).repeat(20000, 1)
    samples = obj.softmax_sample(logits, 1.0, torch.Generator().manual_seed(3))
    frequencies = torch.bincount(samples, minlength=5).float() / len(samples)
    assert torch.allclose(frequencies, logits[0].softmax(-1), atol=0.01)
    assert frequencies[4] == 0  # probability 0 (the last entry): never drawn, even at the top of a row
    sharp = obj.softmax_sample(logits[:100], temperature=0.01)
    assert (sharp == 0).all()
    # a [batch, slots, vocabulary] tensor samples per slot, as the generator's logits do
    assert obj.softmax_sample(logits[:6].view(2, 3, 5)).shape == (2, 3)


def test_labels_are_replaced_exactly_where_tokens_differ():
    input_ids = torch.tensor([[CLS, 10, 11, 12, 13, SEP], [CLS, 20, 21, 22, SEP, PAD]])
    positions = torch.tensor([[1, 2, 4, 0], [1, 3, 3, 0]])  # row 2 drew position 3 twice
    weights = torch.tensor([[1.0, 1, 1, 0], [1, 1, 1, 0]])
    samples = torch.tensor([[10, 30, 31, 50], [40, 22, 7, 50]])  # 10 equals its original; 50 unused
    corrupted, replaced = obj.corrupt(input_ids, positions, weights, samples)
    # the unused slots change nothing; of the two samples for one position the larger id wins
    assert corrupted.tolist() == [[CLS, 10, 30, 12, 31, SEP], [CLS, 40, 21, 22, SEP, PAD]]
    assert replaced.tolist() == [[False, False, True, False, True, False],
                                 [False, True, False, False, False, False]]
    assert torch.equal(replaced, corrupted != input_ids)


def test_weighted_mlm_loss_ignores_unused_slots():
    logits = torch.tensor([[[0.0, 0.0], [100.0, -100.0]]])
    loss = obj.mlm_loss(logits, torch.tensor([[0, 1]]), torch.tensor([[1.0, 0.0]]))
    assert loss.item() == pytest.approx(math.log(2))


def test_detection_counts_worked_example():
    logits = torch.tensor([[2.0, -1.0, 0.5, -3.0, 9.0]])  # predicts replaced, orig, replaced, orig, (pad)
    labels = torch.tensor([[True, True, False, False, True]])
    weights = torch.tensor([[1, 1, 1, 1, 0]])
    counts = {k: int(v) for k, v in obj.detection_counts(logits, labels, weights).items()}
    assert counts == {"replaced_correct": 1, "replaced_total": 2, "original_correct": 1, "original_total": 2}


def test_discriminator_loss_ignores_unweighted_positions():
    logits = torch.tensor([[0.0, 100.0]])
    loss = obj.discriminator_loss(logits, torch.tensor([[True, False]]), torch.tensor([[1, 0]]))
    assert loss.item() == pytest.approx(math.log(2))


def test_copy_mechanism_worked_values():
    # Copy probability D = sigmoid(-z) = 0.5; softmax over two words gives q = 0.5 each.
    vocab_logits = torch.zeros(2, 2)
    replaced_logits = torch.zeros(2)
    inputs = torch.tensor([0, 1])
    targets = torch.tensor([0, 0])  # first: input is the target, p = 0.5 + 0.5·0.5; second: p = 0.5·0.5
    loss = obj.copy_mlm_loss(vocab_logits, replaced_logits, inputs, targets)
    assert loss.item() == pytest.approx(-(math.log(0.75) + math.log(0.25)) / 2)


def micro_model(objective="electra", sharing="shared", fraction=0.25, seed=0) -> PretrainingModel:
    disc_shape = TransformerShape(32, 2, 2, 64, 16, VOCAB)
    gen_shape = None if objective == "mlm" else generator_shape(disc_shape, fraction)
    torch.manual_seed(seed)
    networks = build_networks(network_config(disc_shape, 64, PAD, "eager"),
                              gen_shape and network_config(gen_shape, 64, PAD, "eager"), sharing,
                              objective in MAIN_MLM)
    return PretrainingModel(*networks, objective, SETTINGS)


def generator_grads(model, disc_weight: float, seed: int = 5) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    model.disc_weight = disc_weight
    torch.manual_seed(seed)  # same masks, samples and dropout for both calls
    loss, _ = model(**random_batch())
    loss.backward()
    return {n: p.grad.clone() for n, p in model.generator.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("sharing", ["shared", "untied", "gdes"])
def test_discriminator_loss_puts_no_gradient_on_generator_weights(sharing):
    model = micro_model(sharing=sharing)
    with_disc, without_disc = generator_grads(model, 50.0), generator_grads(model, 0.0)
    assert with_disc.keys() == without_disc.keys() and with_disc
    differing = sorted(n for n in with_disc if not torch.equal(with_disc[n], without_disc[n]))
    if sharing == "shared":  # by design the shared embedding group also learns from the discriminator
        assert differing and all(n.startswith("electra.embeddings.") for n in differing)
    else:
        assert differing == []


def test_shared_embeddings_are_one_tensor_before_and_after_a_step():
    model = micro_model()
    disc, gen = model.discriminator.electra.embeddings, model.generator.electra.embeddings
    assert disc is gen
    assert model.generator.generator_lm_head.weight is disc.word_embeddings.weight
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = disc.word_embeddings.weight.detach().clone()
    model(**random_batch())[0].backward()
    optimizer.step()
    assert not torch.equal(before, disc.word_embeddings.weight)
    assert model.generator.electra.embeddings.word_embeddings.weight.data_ptr() == \
        model.discriminator.electra.embeddings.word_embeddings.weight.data_ptr()
    ids = {id(p) for p in model.parameters()}
    assert len(ids) == len(list(model.parameters()))  # parameters() lists the shared tensor once


def test_untied_and_fully_tied_sharing():
    untied = micro_model(sharing="untied")
    assert untied.generator.electra.embeddings is not untied.discriminator.electra.embeddings
    assert untied.generator.electra.embeddings.word_embeddings.weight.shape[1] == 16  # same width
    tied = micro_model(sharing="tied", fraction=1.0)
    assert tied.generator.electra is tied.discriminator.electra


def test_gdes_starts_equal_and_exports_the_sum():
    model = micro_model(sharing="gdes")
    embeddings = model.discriminator.electra.embeddings
    assert isinstance(embeddings, GDESEmbeddings)
    generator_word = model.generator.electra.embeddings.word_embeddings.weight
    state = discriminator_state(model.discriminator)
    assert torch.equal(state["electra.embeddings.word_embeddings.weight"], generator_word)
    with torch.no_grad():
        embeddings.delta["word_embeddings__weight"].fill_(0.5)
    state = discriminator_state(model.discriminator)
    assert torch.allclose(state["electra.embeddings.word_embeddings.weight"], generator_word + 0.5)


@pytest.mark.parametrize("objective", ["electra", "electra-15", "replace-mlm", "all-tokens-mlm", "mlm"])
def test_every_objective_gives_a_finite_loss_and_gradients(objective):
    model = micro_model(objective)
    loss, stats = model(**random_batch())
    loss.backward()
    assert torch.isfinite(loss)
    assert int(stats["masked_total"]) > 0
    trained = [n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0]
    assert any(n.startswith("discriminator.electra.encoder") for n in trained)


def test_two_stage_freezes_the_generator_in_stage_two():
    model = micro_model("two-stage", sharing="untied", fraction=1.0)
    loss, stats = model(**random_batch(), stage=1)
    assert "discriminator_loss" not in stats
    model.start_second_stage()
    assert torch.equal(model.discriminator.electra.encoder.layer[0].output.dense.weight,
                       model.generator.electra.encoder.layer[0].output.dense.weight)
    model.zero_grad(set_to_none=True)
    loss, stats = model(**random_batch(), stage=2)
    loss.backward()
    assert all(p.grad is None for p in model.generator.parameters())
    assert loss.item() == pytest.approx(50 * stats["discriminator_loss"].item())


def test_detection_auc_worked_example():
    logits = torch.tensor([[3.0, 1.0, 2.0, 0.0, 9.0]])  # replaced scores 3 and 0; originals 1 and 2
    labels = torch.tensor([[True, False, False, True, True]])
    weights = torch.tensor([[1, 1, 1, 1, 0]])  # the last position is padding
    assert obj.detection_auc(logits, labels, weights).item() == pytest.approx(0.5)  # 2 of 4 pairs right
    assert obj.detection_auc(torch.tensor([[1.0, 0.0]]), torch.tensor([[True, False]]),
                             torch.tensor([[1, 1]])).item() == 1.0


def test_detection_auc_equals_scikit_learn_among_weighted_positions():
    from sklearn.metrics import roc_auc_score

    g = torch.Generator().manual_seed(4)
    logits = torch.randn(6, 40, generator=g)
    labels = torch.rand(6, 40, generator=g) < 0.3
    weights = torch.rand(6, 40, generator=g) < 0.8
    expected = roc_auc_score(labels[weights].numpy(), logits[weights].numpy())
    assert obj.detection_auc(logits, labels, weights).item() == pytest.approx(expected, abs=1e-12)
    only_originals = torch.zeros_like(labels)
    assert obj.detection_auc(logits, only_originals, weights).item() == 0.5


# dynamo traces of the whole forward: the two with a generator take ~6 s each (alone, -n 2), so slow
@pytest.mark.parametrize("objective", [pytest.param("electra", marks=pytest.mark.slow), "mlm",
                                       pytest.param("electra-15", marks=pytest.mark.slow), "replace-mlm",
                                       "all-tokens-mlm"])
def test_forward_is_one_graph_without_data_dependent_shapes(objective):
    """No `.item()`, boolean-mask gather or other host sync: dynamo traces the step as one graph."""
    import torch._dynamo

    explained = torch._dynamo.explain(micro_model(objective))(**random_batch())
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons

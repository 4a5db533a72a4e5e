"""The detector on a fixed corruption source: replacements drawn at the batch's unigram frequencies.

The training AUC (`disc_auc`) scores the discriminator against the live generator, which improves as
the discriminator does, so it can sit on its early plateau while both learn. A fixed source shows
the detector's progress on its own: one fixed batch (the run's first: a fresh stream of the same
seed, so a resumed run probes the same one), its positions masked as the objective masks them, each
given a token drawn from the batch's real tokens (so at their unigram frequency), the same draw at
every probe, dropout off. Its own seeded generator draws them, so probing never moves the run's
random numbers (a resumed run stays identical to an unbroken one). Only the model changes between
probes, so the curve is smooth where a per-batch figure is not (0.49-0.70 around 0.6 on one batch of
8, measured on the tests' micro model).

The same batch, uncorrupted, shows whether the encoder collapses: `position_cosine` is the mean
cosine between a sequence's real positions in the discriminator's last layer. On this probe batch
(Gutenberg, seed 0; reports/results/pretrain-levers.md) random-init electra-tiny measured 0.22, the
same shape pre-trained with MLM to 1e14 FLOPs 0.32, and with ELECTRA under every lever tried
0.60-0.95; those ELECTRA encoders fine-tune worse than random weights.
"""

from __future__ import annotations

import contextlib

import torch

from pretrain import objectives as obj
from pretrain.data import BatchStream

UNIGRAM_AUC = "disc_auc_unigram"
PROBE_SPACING = 0.01  # of the budget, at least, between probes: a hundred points make the curve
POSITION_COSINE = "position_cosine"
DETECTORS = ("electra", "electra-15", "two-stage", "all-tokens-mlm")  # objectives with a trained head


def fixed_batch(examples, config, pad_token_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    """The run's first global batch, from a stream of its own (the training stream does not move)."""
    batch, _ = BatchStream(examples, config.batch_size, config.seed, pad_token_id, 0, 1,
                           width=config.seq_len).next_batch()
    return {k: v.to(device) for k, v in batch.items()}


@torch.no_grad()
def unigram_auc(setup, batch: dict[str, torch.Tensor], seed: int = 0) -> float | None:
    """Replaced-token AUC of setup's discriminator on `batch` corrupted with unigram draws; None without
    a detector head."""
    model = setup.model
    if setup.config.objective not in DETECTORS:
        return None
    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
    generator = torch.Generator(device=input_ids.device).manual_seed(seed)
    positions, weights = obj.choose_masked(input_ids, attention_mask, model.masking, generator)
    pool = input_ids[obj.real_tokens(input_ids, attention_mask, model.masking)]
    if pool.numel() == 0:
        return None
    picks = torch.randint(0, pool.numel(), positions.shape, generator=generator, device=input_ids.device)
    corrupted, replaced = obj.corrupt(input_ids, positions, weights, pool[picks])
    with _evaluating(model.discriminator) as discriminator, setup.autocast():
        hidden = model.encode(discriminator, corrupted, attention_mask, batch["token_type_ids"])
        logits = discriminator.discriminator_predictions(hidden)
    return float(obj.detection_auc(logits, replaced, attention_mask))


@torch.no_grad()
def collapse(setup, batch: dict[str, torch.Tensor]) -> float:
    """`position_cosine` of the discriminator's last layer on `batch` (uncorrupted)."""
    model = setup.model
    with _evaluating(model.discriminator) as discriminator, setup.autocast():
        hidden = model.encode(discriminator, batch["input_ids"], batch["attention_mask"],
                              batch["token_type_ids"]).float()
    return position_cosine(hidden, batch["attention_mask"])


def position_cosine(hidden: torch.Tensor, attention_mask: torch.Tensor) -> float:
    """Mean over sequences of the mean cosine between every pair of real positions (self-pairs included)."""
    unit = torch.nn.functional.normalize(hidden, dim=-1) * attention_mask[..., None]
    summed = unit.sum(dim=1)  # sum over pairs of u_i . u_j = |sum of u|^2
    count = attention_mask.sum(dim=1).float()
    return float(((summed * summed).sum(dim=-1) / count.clamp(min=1) ** 2).mean())


@contextlib.contextmanager
def _evaluating(network: torch.nn.Module):
    """`network` with dropout off, put back in the mode it was in."""
    was_training = network.training
    network.eval()
    try:
        yield network
    finally:
        network.train(was_training)

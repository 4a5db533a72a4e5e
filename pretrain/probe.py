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

The same batch, uncorrupted, shows whether the encoder collapses: `cls_rank` is the effective rank of
the discriminator's last-layer [CLS] states across the batch's sequences (centred; exp of the entropy
of the normalised squared singular values, Roy & Vetterli 2007). A random-init electra-tiny has
tens (its [CLS] varies in many directions); the demo's 1e14-FLOPs discriminators measured 1-3: their
[CLS] varies along about one direction, and they fine-tune worse than random weights
(reports/results/pretrain-levers.md).
"""

from __future__ import annotations

import contextlib

import torch

from pretrain import objectives as obj
from pretrain.data import BatchStream

UNIGRAM_AUC = "disc_auc_unigram"
CLS_RANK = "cls_rank"
DETECTORS = ("electra", "electra-15", "two-stage", "all-tokens-mlm")  # objectives with a trained head


def fixed_batch(examples, config, pad_token_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    """The run's first global batch, from a stream of its own (the training stream does not move)."""
    batch, _ = BatchStream(examples, config.batch_size, config.seed, pad_token_id, 0, 1,
                           width=config.seq_len).next_batch()
    return {k: v.to(device) for k, v in batch.items()}


@torch.no_grad()
def unigram_auc(run, batch: dict[str, torch.Tensor], seed: int = 0) -> float | None:
    """Replaced-token AUC of run's discriminator on `batch` corrupted with unigram draws; None without
    a detector head."""
    model = run.model
    if run.config.objective not in DETECTORS:
        return None
    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
    generator = torch.Generator(device=input_ids.device).manual_seed(seed)
    positions, weights = obj.choose_masked(input_ids, attention_mask, model.masking, generator)
    pool = input_ids[obj.real_tokens(input_ids, attention_mask, model.masking)]
    if pool.numel() == 0:
        return None
    picks = torch.randint(0, pool.numel(), positions.shape, generator=generator, device=input_ids.device)
    corrupted, replaced = obj.corrupt(input_ids, positions, weights, pool[picks])
    with _evaluating(model.discriminator) as discriminator, run.autocast():
        hidden = model.encode(discriminator, corrupted, attention_mask, batch["token_type_ids"])
        logits = discriminator.discriminator_predictions(hidden)
    return float(obj.detection_auc(logits, replaced, attention_mask))


@torch.no_grad()
def cls_rank(run, batch: dict[str, torch.Tensor]) -> float:
    """Effective rank of the discriminator's last-layer [CLS] states over `batch` (uncorrupted)."""
    model = run.model
    with _evaluating(model.discriminator) as discriminator, run.autocast():
        hidden = model.encode(discriminator, batch["input_ids"], batch["attention_mask"],
                              batch["token_type_ids"])
    return effective_rank(hidden[:, 0].float())


def effective_rank(rows: torch.Tensor) -> float:
    """exp(entropy) of the centred rows' normalised squared singular values: 1 for rows on one line,
    d for rows spread evenly over d directions."""
    values = torch.linalg.svdvals(rows - rows.mean(dim=0)) ** 2
    if values.sum() <= 0:
        return 0.0  # identical rows: no direction at all
    share = values / values.sum()
    return float(torch.exp(-(share * share.clamp_min(1e-30).log()).sum()))


@contextlib.contextmanager
def _evaluating(network: torch.nn.Module):
    """`network` with dropout off, put back in the mode it was in."""
    was_training = network.training
    network.eval()
    try:
        yield network
    finally:
        network.train(was_training)

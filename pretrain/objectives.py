"""The pre-training objectives as pure tensor functions: masking, sampling, corruption, losses.

Paper conventions (Clark et al. 2020; google-research/electra `pretrain_helpers.py`): 15% of the
real, non-special positions of each example are masked; of those 85% show [MASK] and 15% keep
their token (BERT's 10% random tokens are an option, off by default as in the paper's code). The
generator's Gumbel-max samples replace every masked position, and a position counts as
"replaced" only where the sample differs from the original token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class MaskingSettings:
    """Token ids and rates the masking needs."""

    mask_id: int
    special_ids: tuple[int, ...]  # never masked: [CLS], [SEP], [PAD], [MASK]
    vocab_size: int
    mask_prob: float = 0.15
    mask_token_fraction: float = 0.85
    random_token_fraction: float = 0.0


def choose_masked(input_ids: torch.Tensor, attention_mask: torch.Tensor, settings: MaskingSettings,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """Boolean [B, L]: exactly round(mask_prob · candidates) positions per example (at least one)."""
    candidates = attention_mask.bool()
    for special in settings.special_ids:
        candidates &= input_ids != special
    num_candidates = candidates.sum(dim=1, keepdim=True)
    num_masked = torch.round(num_candidates * settings.mask_prob).clamp(min=1).minimum(num_candidates)
    scores = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    scores = scores.masked_fill(~candidates, 2.0)  # non-candidates sort last
    ranks = scores.argsort(dim=1).argsort(dim=1)
    return ranks < num_masked


def apply_mask(input_ids: torch.Tensor, is_masked: torch.Tensor, settings: MaskingSettings,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """Masked positions become [MASK], a random token, or stay, in the configured proportions."""
    draw = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    to_mask = is_masked & (draw < settings.mask_token_fraction)
    to_random = is_masked & ~to_mask & (draw < settings.mask_token_fraction + settings.random_token_fraction)
    random_ids = torch.randint(0, settings.vocab_size, input_ids.shape, generator=generator,
                               device=input_ids.device)
    masked = torch.where(to_mask, settings.mask_id, input_ids)
    return torch.where(to_random, random_ids, masked)


def gumbel_sample(logits: torch.Tensor, temperature: float = 1.0,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """One sample per row of softmax(logits / temperature), by the Gumbel-max trick."""
    # Gumbel noise is -log(E) with E = -log(U) ~ Exp(1), so argmax(logits + G) = argmax(logits -
    # log(-log U)). Over [masked positions, vocabulary] this is the costliest element-wise work of a
    # step, so it runs in place in one buffer (Tensor.exponential_ is several times slower on CPUs).
    # U is in [0, 1): U = 0 gives -inf (never chosen), no draw gives +inf.
    noise = torch.rand(logits.shape, generator=generator, device=logits.device)
    noise.log_().neg_().log_()
    scaled = logits.float() if temperature == 1.0 else logits.float() / temperature
    return torch.sub(scaled, noise, out=noise).argmax(dim=-1)


def corrupt(input_ids: torch.Tensor, is_masked: torch.Tensor, samples: torch.Tensor):
    """Put `samples` (one per masked position, row-major) in; labels 1 where a token changed."""
    corrupted = input_ids.clone()
    corrupted[is_masked] = samples.to(input_ids.dtype)
    return corrupted, (corrupted != input_ids)


def mlm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of [N, V] logits at the N predicted positions (computed in fp32)."""
    return F.cross_entropy(logits.float(), targets)


def discriminator_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean sigmoid cross-entropy over the positions where `weights` is set."""
    losses = F.binary_cross_entropy_with_logits(logits.float(), labels.float(), reduction="none")
    weights = weights.float()
    return (losses * weights).sum() / weights.sum().clamp(min=1.0)


def copy_mlm_loss(vocab_logits: torch.Tensor, replaced_logits: torch.Tensor, inputs: torch.Tensor,
                  targets: torch.Tensor) -> torch.Tensor:
    """All-tokens MLM with the paper's copy mechanism, mean over the given [N] positions.

    p(target) = D · [target == input] + (1 - D) · softmax(vocab_logits)[target], where the copy
    probability D = sigmoid(-replaced_logits) is the discriminator head's "original" probability.
    """
    log_q = F.log_softmax(vocab_logits.float(), dim=-1).gather(-1, targets[:, None]).squeeze(-1)
    log_copy = F.logsigmoid(-replaced_logits.float())
    log_generate = F.logsigmoid(replaced_logits.float()) + log_q
    same = inputs == targets
    log_p = torch.where(same, torch.logaddexp(log_copy, log_generate), log_generate)
    return -log_p.mean()


def detection_counts(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> dict:
    """Correct and total counts of replaced and original tokens among the weighted positions."""
    predicted = logits > 0
    weights = weights.bool()
    replaced, original = labels & weights, ~labels & weights
    return {"replaced_correct": (predicted & replaced).sum(), "replaced_total": replaced.sum(),
            "original_correct": (~predicted & original).sum(), "original_total": original.sum()}


def detection_auc(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """ROC AUC of the replaced-token scores among weighted positions (0.5 = no better than chance).

    Threshold-free, so it shows a discriminator learning while its 0.5-threshold accuracy on the
    rare replaced class is still zero; ELECTRA logs it too.
    """
    scores, positive = logits[weights.bool()].float(), labels[weights.bool()]
    num_pos, num_neg = positive.sum(), (~positive).sum()
    if num_pos == 0 or num_neg == 0:
        return torch.tensor(0.5)  # undefined without both classes; chance keeps window means finite
    ranks = scores.argsort().argsort().double() + 1  # ties are rare for float logits
    return (ranks[positive].sum() - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg)
